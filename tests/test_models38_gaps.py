"""Gaps the public programs of ``tests/programs/models38`` found, each against
torch: ``torch.func.jacrev`` of a function whose differentiated argument is a
pytree (the Neural Tangent Kernels tutorial's
``vmap(jacrev(fnet_single), (None, 0))(params, x)`` over a parameter dict),
its Jacobian the same pytree."""
import numpy as np
import pytest
import torch

import tracec


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_jacrev_of_a_dict_argument_is_a_dict_of_jacobians():
    w, b, x = _arr(3, 4), _arr(3, seed=1), _arr(2, 4, seed=2)

    def run(lib):
        params = {"w": lib.tensor(w), "b": lib.tensor(b)}

        def f(p, xx):
            return (xx @ p["w"].T + p["b"]).tanh()
        jac = lib.func.jacrev(f)(params, lib.tensor(x))
        both = lib.func.jacrev(f, argnums=(0, 1))(params, lib.tensor(x))
        batched = lib.func.vmap(lib.func.jacrev(f), (None, 0))(params, lib.tensor(x))
        return jac, both, batched

    (tj, tboth, tb), (cj, cboth, cb) = run(torch), run(tracec)
    assert isinstance(cj, dict) and list(cj) == ["w", "b"]
    for k in tj:
        np.testing.assert_allclose(cj[k].numpy(), tj[k].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(cb[k].numpy(), tb[k].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(cboth[0][k].numpy(), tboth[0][k].numpy(), rtol=1e-5, atol=1e-6)
    assert tuple(cb["w"].shape) == tuple(tb["w"].shape) == (2, 3, 3, 4)
    np.testing.assert_allclose(cboth[1].numpy(), tboth[1].numpy(), rtol=1e-5, atol=1e-6)


# --- forward-mode AD (the "Forward-mode Automatic Differentiation" tutorial) ---

def _fwad_tangents(lib, fn_cls_factory):
    fwAD = lib.autograd.forward_ad
    p = lib.tensor(_arr(3, 3).astype(np.float64), requires_grad=True)
    t = lib.tensor(_arr(3, 3, seed=1).astype(np.float64))
    with fwAD.dual_level():
        out = fn_cls_factory(lib).apply(fwAD.make_dual(p, t))
        return fwAD.unpack_dual(out).tangent.detach().numpy()


def _exp_fn(lib):
    class Fn(lib.autograd.Function):
        @staticmethod
        def forward(ctx, foo):
            result = lib.exp(foo)
            ctx.result = result
            return result

        @staticmethod
        def jvp(ctx, gI):
            gO = gI * ctx.result
            del ctx.result      # jvp runs once per application
            return gO
    return Fn


def test_custom_function_jvp_without_backward_gives_the_tangent():
    np.testing.assert_allclose(_fwad_tangents(tracec, _exp_fn), _fwad_tangents(torch, _exp_fn),
                               rtol=1e-12)


def _mulsin_fn(lib, wrong=False):
    class MulSin(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_forward(x, y)
            ctx.save_for_backward(x, y)
            return x * lib.sin(y)

        @staticmethod
        def jvp(ctx, gx, gy):
            x, y = ctx.saved_tensors
            return gx * lib.sin(y) + x * lib.cos(y) * gy * (2 if wrong else 1)

        @staticmethod
        def backward(ctx, gO):
            x, y = ctx.saved_tensors
            return gO * lib.sin(y), gO * x * lib.cos(y)
    return MulSin


def test_custom_function_jvp_is_used_over_backward_and_reads_save_for_forward():
    # a deliberately wrong jvp: the tangent is the jvp's, not the backward's
    def run(lib):
        fwAD = lib.autograd.forward_ad
        x = lib.tensor(_arr(2, 3).astype(np.float64))
        y = lib.tensor(_arr(2, 3, seed=1).astype(np.float64))
        tx, ty = lib.ones(2, 3, dtype=lib.float64), lib.full((2, 3), 0.5, dtype=lib.float64)
        with fwAD.dual_level():
            out = _mulsin_fn(lib, wrong=True).apply(fwAD.make_dual(x, tx), fwAD.make_dual(y, ty))
            return fwAD.unpack_dual(out).tangent.detach().numpy()
    np.testing.assert_allclose(run(tracec), run(torch), rtol=1e-12)


def test_gradcheck_check_forward_ad():
    def run(lib, wrong):
        a = lib.tensor(_arr(2, 2).astype(np.float64), requires_grad=True)
        b = lib.tensor(_arr(2, 2, seed=1).astype(np.float64), requires_grad=True)
        return lib.autograd.gradcheck(_mulsin_fn(lib, wrong).apply, (a, b), check_forward_ad=True,
                                      check_backward_ad=False, check_undefined_grad=False,
                                      check_batched_grad=False, raise_exception=False)
    assert run(tracec, False) is run(torch, False) is True
    assert run(tracec, True) is run(torch, True) is False
    p = tracec.tensor(_arr(2, 2).astype(np.float64), requires_grad=True)
    try:
        q = tracec.tensor(_arr(2, 2, seed=3).astype(np.float64), requires_grad=True)
        tracec.autograd.gradcheck(_mulsin_fn(tracec, True).apply, (p, q),
                                  check_forward_ad=True)
    except tracec.autograd.GradcheckError as e:
        assert str(e).startswith("Jacobian computed with forward mode mismatch for output 0 "
                                 "with respect to input 1")
    else:
        raise AssertionError("no GradcheckError")


def test_make_dual_tangent_as_given_or_copied_and_primal_history_kept():
    def run(lib):
        fwAD = lib.autograd.forward_ad
        p = lib.tensor(_arr(3, 3), requires_grad=True)
        t = lib.tensor(_arr(3, 3, seed=1))
        with fwAD.dual_level():
            same = fwAD.unpack_dual(fwAD.make_dual(p, t)).tangent is t
            alt = fwAD.unpack_dual(fwAD.make_dual(p, t.T)).tangent
            d = fwAD.make_dual(p, t)
            (d * d).sum().backward()
        return same, alt is t.T, alt.is_contiguous(), alt.numpy(), p.grad.numpy()
    got, want = run(tracec), run(torch)
    assert got[:3] == want[:3] == (True, False, True)
    np.testing.assert_array_equal(got[3], want[3])
    np.testing.assert_allclose(got[4], want[4], rtol=1e-6)


# --- "Double Backward with Custom Functions" / "Fusing Convolution and Batch Norm" ---

def _sinh_bad(lib):
    class SinhBad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.expx, ctx.expnegx = lib.exp(x), lib.exp(-x)
            return (ctx.expx - ctx.expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            return grad_out * (ctx.expx + ctx.expnegx) / 2
    return SinhBad


def test_gradgradcheck_draws_grad_outputs_as_torch_and_flags_a_constant_first_derivative():
    def run(lib):
        lib.manual_seed(0)
        x = lib.rand(2, 3, dtype=lib.float64, requires_grad=True)
        ok = lib.autograd.gradgradcheck(lambda t: t ** 3, x)
        after = lib.rand(3, dtype=lib.float64)      # the grad_outputs' draws came before
        bad = lib.autograd.gradgradcheck(_sinh_bad(lib).apply, x, raise_exception=False)
        return ok, after.numpy(), bad
    (tok, tafter, tbad), (cok, cafter, cbad) = run(torch), run(tracec)
    assert cok is tok is True
    np.testing.assert_array_equal(cafter, tafter)
    assert cbad is tbad is False
    with pytest.raises(tracec.autograd.GradcheckError,
                       match="Jacobian mismatch for output 0 with respect to input 0"):
        tracec.autograd.gradgradcheck(_sinh_bad(tracec).apply,
                                      tracec.rand(2, dtype=tracec.float64, requires_grad=True))
    # no differentiable output at all: the numerical Jacobian must be zero
    with pytest.raises(tracec.autograd.GradcheckError,
                       match="Numerical gradient for function expected to be zero"):
        tracec.autograd.gradcheck(lambda t: _sinh_bad(tracec).apply(t.detach()),
                                  tracec.tensor(1., dtype=tracec.float64, requires_grad=True))


@pytest.mark.parametrize("dtype,noncontiguous", [("float32", False), ("float64", True)])
def test_make_tensor_draws_as_torch(dtype, noncontiguous):
    def run(lib):
        lib.manual_seed(5)
        t = lib.testing.make_tensor((3, 4), dtype=getattr(lib, dtype), device="cpu", low=-1,
                                    high=1, noncontiguous=noncontiguous)
        return t.numpy(), t.is_contiguous()
    (tv, tc), (cv, cc) = run(torch), run(tracec)
    np.testing.assert_array_equal(cv, tv)
    assert cc == tc


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(groups=2, dilation=2)])
def test_nn_grad_conv2d_input_and_weight(kw):
    x, w, = _arr(2, 4, 9, 9), _arr(6, 4 // kw.get("groups", 1), 3, 3, seed=1)
    out_shape = tuple(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **kw).shape)
    go = _arr(*out_shape, seed=2)

    def run(lib):
        gi = lib.nn.grad.conv2d_input(x.shape, lib.tensor(w), lib.tensor(go), **kw)
        gw = lib.nn.grad.conv2d_weight(lib.tensor(x), w.shape, lib.tensor(go), **kw)
        return gi.numpy(), gw.numpy(), gi.requires_grad
    (ti, tw, tr), (ci, cw, cr) = run(torch), run(tracec)
    np.testing.assert_allclose(ci, ti, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cw, tw, rtol=1e-4, atol=1e-4)
    assert cr is tr is False


def test_nn_grad_conv1d_weight_is_differentiable_in_grad_output():
    x, go = _arr(1, 2, 7), _arr(1, 3, 5, seed=1)

    def run(lib):
        g = lib.tensor(go, requires_grad=True)
        gw = lib.nn.grad.conv1d_weight(lib.tensor(x), (3, 2, 3), g)
        (gw ** 2).sum().backward()
        return gw.detach().numpy(), g.grad.numpy()
    for a, b in zip(run(tracec), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# --- torch.func / autograd.functional inside torch.compile ---------------------

def _predict(lib, w, b, x):
    return lib.nn.functional.linear(x, w, b).tanh()


_TRANSFORMS = {
    "hvp": lambda lib, w, b, x: lib.func.jvp(lib.func.grad(lambda xx: _predict(lib, w, b, xx).sum()),
                                             (x,), (x * 2,))[1],
    "vjp": lambda lib, w, b, x: lib.func.vjp(lambda xx: _predict(lib, w, b, xx), x)[1](
        lib.ones(5))[0],
    "jacrev": lambda lib, w, b, x: lib.func.jacrev(lambda ww, bb, xx: _predict(lib, ww, bb, xx),
                                                   argnums=(0, 1))(w, b, x)[0],
    "hessian": lambda lib, w, b, x: lib.func.hessian(
        lambda xx: _predict(lib, w, b, xx).sum())(x),
    "vmap_jacrev": lambda lib, w, b, x: lib.func.vmap(
        lib.func.jacrev(lambda ww, bb, xx: _predict(lib, ww, bb, xx), argnums=2),
        in_dims=(None, None, 0))(w, b, lib.stack([x, x * 3])),
    "functional_jacobian": lambda lib, w, b, x: lib.autograd.functional.jacobian(
        lambda xx: _predict(lib, w, b, xx), x),
}


@pytest.mark.parametrize("name", sorted(_TRANSFORMS))
def test_function_transforms_compile_to_eager_values(name):
    w, b = _arr(5, 4), _arr(5, seed=1)
    xs = [_arr(4, seed=2), _arr(4, seed=3)]
    fn = _TRANSFORMS[name]

    def cfn(w, b, x):
        return fn(tracec, w, b, x)
    compiled = tracec.compile(cfn)
    for x in xs:     # the first call traces, the second runs the compiled code
        got = compiled(tracec.tensor(w), tracec.tensor(b), tracec.tensor(x))
        want = fn(torch, torch.tensor(w), torch.tensor(b), torch.tensor(x))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def _two_outputs(lib, calls):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_forward(x)
            ctx.save_for_backward(x)
            ctx.k = k
            return x.sin() * k, x.exp()

        @staticmethod
        def jvp(ctx, gx, gk):
            calls.append(gk)
            x, = ctx.saved_tensors
            return gx * x.cos() * ctx.k, gx * x.exp()

        @staticmethod
        def backward(ctx, ga, gb):
            x, = ctx.saved_tensors
            return ga * x.cos() * ctx.k + gb * x.exp(), None
    return Two


def test_multi_output_function_jvp_and_jvp_called_only_for_tangents():
    def run(lib):
        calls = []
        Two = _two_outputs(lib, calls)
        fw = lib.autograd.forward_ad
        x = lib.tensor(np.linspace(-1, 1, 5), requires_grad=True)
        with fw.dual_level():
            plain_a, _ = Two.apply(x, 2.0)              # no tangent: jvp not called
            n_plain = len(calls)
            a, b = Two.apply(fw.make_dual(x, lib.ones(5, dtype=lib.float64)), 3.0)
            y = a * b + a
            tangents = [fw.unpack_dual(t).tangent.detach().numpy() for t in (a, b, y)]
        plain_a.sum().backward()
        return n_plain, calls[-1], tangents, x.grad.numpy()
    (tn, tk, tt, tg), (cn, ck, ct, cg) = run(torch), run(tracec)
    assert cn == tn == 0 and ck is tk is None
    for g, w in zip(ct, tt):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_allclose(cg, tg, rtol=1e-12)


# --- torch.utils.benchmark (the Jacobians tutorial's Timer comparisons) --------

@pytest.mark.parametrize("raw", [[2.5e-3], [1e-6, 1.2e-6, 0.9e-6, 3e-6, 1.1e-6],
                                 [0.4, 0.41, 0.39, 0.4, 0.42, 0.38]])
def test_benchmark_measurement_statistics_and_repr(raw):
    import re
    import torch.utils.benchmark as tb
    import tracec.utils.benchmark as cb

    def make(b):
        spec = b.TaskSpec(stmt="jacrev(predict, argnums=2)(weight, bias, x)", setup="pass",
                          num_threads=1)
        return b.Measurement(number_per_run=500, raw_times=list(raw), task_spec=spec)
    t, c = make(tb), make(cb)
    assert c.times == t.times
    for name in ("median", "iqr", "significant_figures", "has_warnings", "title"):
        assert getattr(c, name) == getattr(t, name), name
    # (a float64 mean: PyTorch's vectorized sum may round the last bit otherwise)
    assert c.mean == pytest.approx(t.mean, rel=1e-15)

    def shown(m):
        return re.sub(r"<\w+\.utils\.benchmark\.utils\.common\.Measurement object at 0x[0-9a-f]+>",
                      "<Measurement>", repr(m))
    assert shown(c) == shown(t)
    merged_c, merged_t = cb.Measurement.merge([c, c]), tb.Measurement.merge([t, t])
    assert merged_c[0].times == merged_t[0].times and merged_c[0].number_per_run == 1
    for x in (3.14159e-7, 0.02, 12.5):
        assert cb.select_unit(x) == tb.select_unit(x)
        assert cb.trim_sigfig(x, 2) == tb.trim_sigfig(x, 2)


def test_benchmark_timer_runs_the_statement():
    from tracec.utils.benchmark import Timer
    calls = []
    t = Timer(stmt="""
        f(x)
    """, setup="x = torch.ones(2)", globals={"f": calls.append}, label="append", sub_label="ones")
    m = t.timeit(10)
    assert len(calls) == 2 + 10      # the warm-up's max(10 // 100, 2) runs, then 10
    assert m.number_per_run == 10 and len(m.times) == 1 and m.title == "append: ones"
    assert m.stmt == "f(x)" and m.setup == "x = torch.ones(2)"
    b = t.blocked_autorange(min_run_time=0.01)
    assert sum(b.raw_times) >= 0.01 and b.number_per_run >= 1
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        Timer("pass", global_setup="#include <x>")
