"""The eager backward's short cuts (tracec/ops/iter_layout.py's row-major
case, AccumulateGrad's plain case in tracec/autograd, ``x.sum()`` without
argument conversion) against the general path they skip and against
PyTorch: result layouts (strides) of elementwise ops with broadcast
operands, accumulated gradients (values, dtype, identity of ``.grad``
across accumulations, its version), and ``.grad`` reads seen by the
observers that make the general path run."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from tracec.tensor import GRAD_HOOKS
from tracec.ops import iter_layout as il
from _compiled_check import assert_step_matches_eager

torch = pytest.importorskip("torch")


def _general_relayout(out, operands):
    """``relayout`` without its row-major short cut (TensorIterator's rule)."""
    if type(out) is not np.ndarray or out.ndim < 2 or out.size < 2:
        return out
    arrays = [a for a in operands if type(a) is np.ndarray and a.ndim > 0]
    if len(arrays) < 2 or all(a.flags.c_contiguous for a in arrays):
        return out
    return il.in_order(out, il._perm(out.shape, il._iter_strides(out.shape, arrays)))


def _operand(rng, shape):
    k = int(rng.integers(0, 5))
    if k == 0:                                   # a scalar expanded (every stride 0)
        return np.broadcast_to(np.float32(2), shape)
    if k == 1:
        return np.ones(shape, np.float32)
    if k == 2:                                   # column-major
        return np.ones(shape[::-1], np.float32).T
    if k == 3:                                   # a size-one row / column expanded
        small = tuple(s if i % 2 else 1 for i, s in enumerate(shape))
        return np.broadcast_to(np.ones(small, np.float32), shape)
    return np.ones(tuple(s if rng.random() < 0.5 else 1 for s in shape), np.float32)


def test_relayout_short_cut_gives_the_general_layout():
    rng = np.random.default_rng(0)
    short = 0
    for _ in range(3000):
        shape = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(2, 5))))
        ops = [_operand(rng, shape) for _ in range(int(rng.integers(2, 4)))]
        out = ops[0] * ops[1]
        for o in ops[2:]:
            out = out * o
        want, got = _general_relayout(out, ops), il.relayout(out, ops)
        assert got.strides == want.strides and (got is out) == (want is out), \
            (shape, [o.strides for o in ops])
        short += got is out and 1 not in shape and any(not any(o.strides) for o in ops)
    assert short > 100          # the short cut's case was met, not only the general one


def test_expanded_cotangent_times_permuted_operand_keeps_torch_layout():
    # mul's VJP on a permuted operand: the gradient is laid out as PyTorch's
    x_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = tracec.tensor(x_np).t().contiguous().t().requires_grad_()
    w = tracec.tensor(x_np.T.copy()).t()
    (a * w).sum().backward()
    ta = torch.tensor(x_np).t().contiguous().t().requires_grad_()
    tw = torch.tensor(x_np.T.copy()).t()
    (ta * tw).sum().backward()
    assert a.grad.stride() == ta.grad.stride()
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    y, ty = tracec.ones(()).expand(3, 4) * w, torch.ones(()).expand(3, 4) * tw
    assert y.stride() == ty.stride()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_accumulation_as_torch(dtype):
    rng = np.random.default_rng(1)
    w_np = rng.standard_normal((3, 4)).astype(dtype)
    b_np = rng.standard_normal(4).astype(dtype)
    x_np = rng.standard_normal((2, 3)).astype(dtype)
    res = {}
    for L in (tracec, torch):
        w = L.tensor(w_np, requires_grad=True)
        b = L.tensor(b_np, requires_grad=True)
        x = L.tensor(x_np)
        (x @ w + b).relu().sum().backward()
        first, v0 = w.grad, w.grad._version
        (x @ w * 2.0 + b).sum().backward()     # accumulates in place
        assert w.grad is first and w.grad._version == v0 + 1
        (b * 3.0).sum().backward()
        res[L] = (w.grad.detach().numpy().copy(), b.grad.detach().numpy().copy(),
                  str(w.grad.dtype).rpartition(".")[2])
    np.testing.assert_allclose(res[tracec][0], res[torch][0], rtol=1e-6)
    np.testing.assert_allclose(res[tracec][1], res[torch][1], rtol=1e-6)
    assert res[tracec][2] == res[torch][2]


def test_gradient_cast_and_expanded_to_the_leaf():
    # a float64 cotangent into a float32 leaf, a broadcast one into a 0-d leaf
    for L in (tracec, torch):
        s = L.tensor(2.0, requires_grad=True)
        v = L.ones(3, dtype=L.float64)
        (s * v).sum().backward()
        (s * v).sum().backward()
        assert s.grad.dtype == L.float32 and float(s.grad) == 6.0


def test_grad_observers_still_see_the_reads():
    # with a .grad observer (the tracer's), the general path reads .grad
    # through the property, as before
    seen = []

    def hook(t, what, value):
        seen.append(what)

    w = tracec.ones(3, requires_grad=True)
    GRAD_HOOKS.append(hook)
    try:
        (w * 2.0).sum().backward()
        (w * 2.0).sum().backward()
    finally:
        GRAD_HOOKS.remove(hook)
    assert "get" in seen and "set" in seen
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 4.0, 4.0])


@pytest.mark.parametrize("make", [
    lambda L: L.arange(6.0).reshape(2, 3),
    lambda L: L.tensor([True, False, True]),
    lambda L: L.arange(6, dtype=L.int32),
    lambda L: L.tensor(3.5),
])
def test_plain_sum_as_torch(make):
    a, ta = make(tracec), make(torch)
    for got, want in ((a.sum(), ta.sum()), (tracec.sum(a), torch.sum(ta)),
                      (a.sum(dtype=tracec.float64), ta.sum(dtype=torch.float64))):
        assert str(got.dtype) == str(want.dtype).replace("torch", "tracec")
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_sum_of_a_non_tensor_names_it():
    with pytest.raises(TypeError, match="sum"):
        tracec.sum("abc")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_step_as_eager_and_torch(backend):
    # the same step (x.sum(), a scalar times an operand, accumulation over
    # two backwards) compiled: equal to eager, whose gradient equals torch's
    rng = np.random.default_rng(2)
    w_np = rng.standard_normal((4, 3)).astype(np.float32)
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2)]
    w = tracec.tensor(w_np, requires_grad=True)

    def step(x):
        loss = (tracec.tensor(x) @ w * 2.0).relu().sum()
        loss.backward()
        (w * 3.0).sum().backward()
        return loss

    assert_step_matches_eager(step, w, xs, backend)
    tw = torch.tensor(w_np, requires_grad=True)
    (torch.tensor(xs[0]) @ tw * 2.0).relu().sum().backward()
    (tw * 3.0).sum().backward()
    w.grad = None
    step(xs[0])
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
