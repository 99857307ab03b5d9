"""``F.linear`` / ``nn.Linear`` of a 1-D or N-D input builds PyTorch's nodes
(ATen's ``linear``: ``addmm`` on the input viewed as ``(-1, in)`` and a view
back when there is a bias and the input is contiguous; else ``matmul``'s
folding — unsqueeze / view / copy, ``mm``, squeeze / ``_unsafe_view`` — and
the bias added after), so ``grad_fn`` and every ``next_functions`` below it
name PyTorch's nodes.  Before, tracec renamed the last node of one batched
matmul (``ViewBackward0 -> [SqueezeBackward4, AccumulateGrad]`` for a 1-D
input with a bias; the MmBackward0 and AddmmBackward0 nodes were missing)."""
import numpy as np
import pytest
import torch

import tracec


def _tree(fn, depth=0):
    if fn is None:
        return None
    return (type(fn).__name__, tuple(_tree(f, depth + 1) for f, _ in fn.next_functions)
            if depth < 4 else ())


def _graph(lib, shape, bias, rg, contiguous=True):
    lib.manual_seed(0)
    m = lib.nn.Linear(4, 3, bias=bias)
    x = lib.randn(*shape, requires_grad=rg)
    if not contiguous:
        x = x.transpose(0, 1)
    y = m(x)
    return _tree(y.grad_fn), y


@pytest.mark.parametrize("shape", [(4,), (2, 4), (2, 5, 4), (2, 2, 5, 4)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rg", [False, True])
def test_linear_nodes_are_pytorchs(shape, bias, rg):
    want, yt = _graph(torch, shape, bias, rg)
    got, yc = _graph(tracec, shape, bias, rg)
    assert got == want
    np.testing.assert_allclose(yc.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_of_a_non_contiguous_input_is_matmul_then_add(bias):
    want, _ = _graph(torch, (5, 2, 4), bias, True, contiguous=False)
    got, _ = _graph(tracec, (5, 2, 4), bias, True, contiguous=False)
    assert got == want


@pytest.mark.parametrize("shape", [(4,), (3, 2, 4)])
def test_linear_folded_gradients_and_compiled_step(shape):
    """The steps change no number: gradients equal torch's, and a compiled
    step equals eager."""
    def run(lib, compiled=False):
        lib.manual_seed(0)
        m = lib.nn.Linear(4, 3)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        x = lib.randn(*shape, requires_grad=True)

        def step(x):
            opt.zero_grad()
            loss = m(x).tanh().sum()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = tracec.compile(step) if compiled else step
        losses = [float(fn(x)) for _ in range(3)]
        return losses, x.grad.numpy().copy(), m.weight.detach().numpy().copy()
    lt, gt, wt = run(torch)
    le, ge, we = run(tracec)
    lc, gc, wc = run(tracec, True)
    np.testing.assert_allclose(le, lt, rtol=1e-5)
    np.testing.assert_allclose(ge, gt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(we, wt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    np.testing.assert_allclose(gc, ge, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wc, we, rtol=1e-5, atol=1e-6)


def test_legacy_hook_on_linear_of_a_3d_input_sees_the_folded_gradient():
    """``Module.register_backward_hook`` on Linear of a 3-D input: the hook
    is on PyTorch's output node, a view, whose one grad_input is the
    output's gradient folded to ``(N, out)``; a replacement flows on."""
    def run(lib):
        lib.manual_seed(0)
        m = lib.nn.Linear(4, 3)
        x = lib.randn(2, 5, 4, requires_grad=True)
        seen = []

        def hook(mod, gin, gout):
            seen.append([None if g is None else tuple(g.shape) for g in gin])
            return tuple(None if g is None else g * 2 for g in gin)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.register_backward_hook(hook)
        (m(x) ** 2).sum().backward()
        return seen, x.grad.numpy().copy(), m.weight.grad.numpy().copy()
    st, gt, wt = run(torch)
    sc, gc, wc = run(tracec)
    assert sc == st
    np.testing.assert_allclose(gc, gt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wc, wt, rtol=1e-5, atol=1e-6)


def _mm_case(lib, case):
    lib.manual_seed(0)
    W = lib.randn(4, 3, requires_grad=True)
    if case == "3d@2d":
        x = lib.randn(2, 5, 4, requires_grad=True)
        return (x, W), x @ W
    if case == "3d_noncontig@2d.t":
        x = lib.randn(5, 2, 4, requires_grad=True)
        return (x, W), x.transpose(0, 1) @ W.t().t()
    if case == "1d@2d":
        x = lib.randn(4, requires_grad=True)
        return (x, W), x @ W
    if case == "mv":
        x = lib.randn(4, requires_grad=True)
        return (x, W), W.t() @ x
    x, v = lib.randn(4, requires_grad=True), lib.randn(4, requires_grad=True)
    return (x, v), x @ v


@pytest.mark.parametrize("case", ["3d@2d", "3d_noncontig@2d.t", "1d@2d", "mv", "dot"])
def test_matmul_nodes_and_gradients_are_pytorchs(case):
    """``matmul``'s nodes as PyTorch's dispatch makes them: an N-D @ 2-D
    product folded into one mm (UnsafeViewBackward0 -> MmBackward0 ->
    ViewBackward0 / UnsafeViewBackward0 -> CloneBackward0), a 1-D @ 2-D one
    unsqueezed (UnsqueezeBackward0), mv and dot with their operands as
    edges (were the product's MulBackward0)."""
    (xt, wt), yt = _mm_case(torch, case)
    (xc, wc), yc = _mm_case(tracec, case)
    assert _tree(yc.grad_fn) == _tree(yt.grad_fn)
    yt.sin().sum().backward()
    yc.sin().sum().backward()
    np.testing.assert_allclose(yc.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    for a, b in ((xc, xt), (wc, wt)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
        assert a.grad.stride() == b.grad.stride()
