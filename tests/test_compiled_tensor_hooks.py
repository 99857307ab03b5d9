"""Tensor hooks on non-leaf tensors inside a compiled step
(``tracec.traced_tensor_hooks``): ``h.register_hook(fn)`` returning a new
gradient (scaling, gradient reversal, clamping) and ``h.retain_grad()``,
with ``loss.backward()`` in the step, compile (one trace, no eager
signature) and equal PyTorch at every call -- the loss, the parameters'
gradients, ``h.grad`` (returned, or read in the step).  A hook that keeps
its gradient in Python state, and a hook a backward outside the compiled
call would have to run, are refused naming the user's line, and
``fallback="eager"`` then computes PyTorch's numbers."""
import numpy as np
import pytest
import torch

import tracec

KINDS = ["double", "reverse", "clamp", "retain", "retain_returned", "hook_then_retain",
         "after_use", "two_hooks"]


def _step(lib, kind, saved=None):
    """A two-layer step and its parameters; ``kind`` picks the hooks on the
    hidden activation ``h``."""
    lib.manual_seed(0)
    lin, lin2 = lib.nn.Linear(3, 4), lib.nn.Linear(4, 2)
    params = [lin.weight, lin.bias, lin2.weight, lin2.bias]

    def step(x):
        h = lin(x)
        extra = None
        if kind == "after_use":
            extra = (h * 3).sum()     # a use before the hook: eager's hook sees its gradient too
        if kind in ("double", "after_use", "two_hooks", "hook_then_retain"):
            h.register_hook(lambda g: g * 2)
        if kind == "reverse":
            h.register_hook(lambda g: -g)
        if kind in ("clamp", "two_hooks"):
            h.register_hook(lambda g: g.clamp(-0.05, 0.05))
        if kind in ("retain", "retain_returned", "hook_then_retain"):
            h.retain_grad()
        if kind == "keeps":
            h.register_hook(lambda g: saved.append(g))
        if kind == "keeps_computed":
            h.register_hook(lambda g: saved.append(g.abs().sum()))
        loss = lin2(h.tanh()).pow(2).sum()
        if extra is not None:
            loss = loss + extra
        loss.backward()
        out = [loss.detach()] + [p.grad.clone() for p in params]
        if kind in ("retain", "hook_then_retain"):
            out.append(h.grad * 1)
        if kind == "retain_returned":
            out.append(h)
        for p in params:
            p.grad = None
        return tuple(out)
    return step, params


def _run(step, lib, calls=3):
    outs = []
    for i in range(calls):
        x = np.random.RandomState(i).randn(5, 3).astype(np.float32)
        out = step(lib.tensor(x))
        outs.append([t.detach().numpy().copy() for t in out]
                    + [out[-1].grad.numpy().copy()] if out[-1].requires_grad else
                    [t.detach().numpy().copy() for t in out])
    return outs


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("kind", KINDS)
def test_hooks_compile_and_equal_torch(kind, backend):
    want = _run(_step(torch, kind)[0], torch)
    step, params = _step(tracec, kind)
    compiled = tracec.compile(step, backend=backend)
    got = _run(compiled, tracec)
    for w, g in zip(want, got):
        assert len(w) == len(g)
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    info = compiled.cache_info()
    assert info.traces == 1 and info.hits == 2 and not info.eager_reasons, info


def test_hook_changes_the_gradient():
    """(the hooks are not no-ops: the test above would pass without them)"""
    plain = _run(_step(tracec, "none")[0], tracec, calls=1)[0]
    doubled = _run(tracec.compile(_step(tracec, "double")[0]), tracec, calls=1)[0]
    np.testing.assert_allclose(doubled[1], 2 * plain[1], rtol=1e-5)
    np.testing.assert_allclose(doubled[3], plain[3], rtol=1e-5)   # (lin2: after h)


@pytest.mark.parametrize("kind", ["keeps", "keeps_computed"])
def test_hook_keeping_its_gradient_is_refused(kind):
    step, _ = _step(tracec, kind, [])
    with pytest.raises(tracec.TraceError, match=r"test_compiled_tensor_hooks.py:\d+: the tensor "
                       r"hook .*<lambda> \(.*test_compiled_tensor_hooks.py:\d+\) keeps its "
                       r"gradient, or a tensor it computed, in Python state"):
        tracec.compile(step, backend="interp")(tracec.ones(5, 3))
    ref, theirs = [], []
    want = _run(_step(torch, kind, ref)[0], torch)
    compiled = tracec.compile(_step(tracec, kind, theirs)[0], backend="interp", fallback="eager")
    with pytest.warns(UserWarning, match="keeps its gradient"):
        got = _run(compiled, tracec)
    for w, g in zip(want + [ref], got + [theirs]):
        for a, b in zip(w, g):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    assert len(theirs) == 3


def test_hook_with_backward_outside_runs_eagerly():
    """The compiled backward of a returned loss cannot call a hook the step
    registered: the signature runs eagerly (it was silently dropped)."""
    def make(lib):
        lib.manual_seed(0)
        lin, lin2 = lib.nn.Linear(3, 4), lib.nn.Linear(4, 1)

        def fwd(x):
            h = lin(x)
            h.register_hook(lambda g: g * 2)
            return lin2(h.tanh()).pow(2).sum()
        return fwd, lin
    (ref, lin_t), (fwd, lin) = make(torch), make(tracec)
    compiled = tracec.compile(fwd, backend="interp")
    with pytest.warns(UserWarning, match=r"goes through the tensor hook .*<lambda>"):
        for i in range(3):
            x = np.random.RandomState(i).randn(2, 3).astype(np.float32)
            ref(torch.tensor(x)).backward()
            compiled(tracec.tensor(x)).backward()
            np.testing.assert_allclose(lin.weight.grad.numpy(), lin_t.weight.grad.numpy(),
                                       rtol=1e-5, atol=1e-6)
    assert compiled.cache_info().eager_reasons


class _Cam:
    """grad-cam's pattern: a forward hook registers a tensor hook that keeps
    a detached copy of the gradient on the object."""
    def __init__(self, lib):
        lib.manual_seed(0)
        self.lin, self.lin2 = lib.nn.Linear(3, 4), lib.nn.Linear(4, 1)
        self.gradients = []

    def step(self, x):
        h = self.lin(x)

        def _store_grad(grad):
            self.gradients = [grad.cpu().detach()] + self.gradients
        h.register_hook(_store_grad)
        self.lin2(h.relu()).sum().backward()
        g = self.lin.weight.grad.clone()
        self.lin.weight.grad = None
        return g


def test_hook_keeping_a_detached_gradient_on_an_object_runs_eagerly():
    ref, cam = _Cam(torch), _Cam(tracec)
    compiled = tracec.compile(cam.step, backend="interp", fallback="eager")
    with pytest.warns(UserWarning, match=r"_store_grad .* keeps its gradient"):
        for i in range(3):
            x = np.random.RandomState(i).randn(2, 3).astype(np.float32)
            np.testing.assert_allclose(compiled(tracec.tensor(x)).numpy(),
                                       ref.step(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    assert len(cam.gradients) == 3
    for a, b in zip(ref.gradients, cam.gradients):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
