"""Custom ``autograd.Function``s under the ``torch.func`` transforms and
forward-mode AD, checked against torch (PyTorch's docs notes/extending.func):
a Function reached by a tangent (a forward_ad dual, ``func.jvp``,
``jacfwd``, ``hessian``) without a ``jvp`` raises NotImplementedError (tracec
used to differentiate its backward twice); one with a ``jvp`` gives that
jvp's tangents in ``func.jvp`` / ``jacfwd`` too (tracec used its backward's);
a ``forward(ctx, ...)`` Function under a transform, and one without a vmap
rule (or with two) under ``vmap`` / ``jacfwd``, raise PyTorch's
RuntimeError; ``jacrev`` needs no vmap rule of the Function."""
import numpy as np
import pytest
import torch

import tracec


def _functions(lib):
    class Sq(lib.autograd.Function):          # old style: forward takes ctx
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    class Half(lib.autograd.Function):        # a jvp other than its backward
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.clamp(-1, 1)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            x, = ctx.saved_tensors
            return t * 0.5 + 0.25 * t * (x > 0)

    class Cube(lib.autograd.Function):        # no jvp
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x ** 2 * g

    class NoRule(Cube):                       # no vmap rule
        generate_vmap_rule = False

    class TwoRules(Cube):
        @staticmethod
        def vmap(info, in_dims, x):
            return NoRule.apply(x), 0

    return {"Sq": Sq, "Half": Half, "Cube": Cube, "NoRule": NoRule, "TwoRules": TwoRules}


X = np.array([0.5, 2.0, -3.0, 0.25], np.float32)
T = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def _run(lib, case):
    F = _functions(lib)
    x, t = lib.tensor(X), lib.tensor(T)
    fwAD = lib.autograd.forward_ad
    if case == "dual_no_jvp":
        with fwAD.dual_level():
            return fwAD.unpack_dual(F["Cube"].apply(fwAD.make_dual(x, t))).tangent
    if case == "dual_jvp":
        with fwAD.dual_level():
            return fwAD.unpack_dual(F["Half"].apply(fwAD.make_dual(x, t))).tangent
    if case == "jvp_uses_jvp":
        return lib.func.jvp(lambda z: F["Half"].apply(z * 2) + z, (x,), (t,))[1]
    if case == "jacfwd_uses_jvp":
        return lib.func.jacfwd(lambda z: F["Half"].apply(z).sin())(x)
    if case == "jacrev_uses_backward":
        return lib.func.jacrev(lambda z: F["Half"].apply(z).sin())(x)
    if case == "jvp_no_jvp":
        return lib.func.jvp(F["Cube"].apply, (x,), (t,))[1]
    if case == "jvp_untouched_no_jvp":      # no tangent reaches Cube: no jvp needed
        return lib.func.jvp(lambda z: z * F["Cube"].apply(x), (x,), (t,))[1]
    if case == "hessian_no_jvp":
        return lib.func.hessian(lambda z: F["Cube"].apply(z).sum())(x)
    if case == "grad_old_style":
        return lib.func.grad(lambda z: F["Sq"].apply(z).sum())(x)
    if case == "vmap_old_style":
        return lib.vmap(F["Sq"].apply)(x)
    if case == "vmap_no_rule":
        return lib.vmap(F["NoRule"].apply)(x)
    if case == "vmap_two_rules":
        return lib.vmap(F["TwoRules"].apply)(x)
    if case == "jacfwd_no_rule":
        return lib.func.jacfwd(F["NoRule"].apply)(x)
    if case == "jacrev_no_rule":
        return lib.func.jacrev(F["NoRule"].apply)(x)
    if case == "vmap_generated":
        return lib.vmap(F["Cube"].apply)(x.reshape(2, 2))
    raise AssertionError(case)


CASES = ["dual_no_jvp", "dual_jvp", "jvp_uses_jvp", "jacfwd_uses_jvp", "jacrev_uses_backward",
         "jvp_no_jvp", "jvp_untouched_no_jvp", "hessian_no_jvp", "grad_old_style",
         "vmap_old_style", "vmap_no_rule", "vmap_two_rules", "jacfwd_no_rule", "jacrev_no_rule",
         "vmap_generated"]


def _outcome(lib, case):
    try:
        r = _run(lib, case)
    except (RuntimeError, NotImplementedError) as e:
        return type(e).__name__, str(e)
    return "ok", r.detach().numpy()


@pytest.mark.parametrize("case", CASES)
def test_function_under_func_transforms_matches_torch(case):
    want, got = _outcome(torch, case), _outcome(tracec, case)
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    else:
        assert got[1] == want[1]
