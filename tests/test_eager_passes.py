"""Eager ops that make fewer passes over their data than their primitives
would, with the same values:

* ``clamp`` without a gradient to build is one ``np.clip`` pass
  (``functions._clip_values``): every bit as PyTorch's, signed zeros, NaN,
  infinities and crossed bounds included, and equal to the ``where`` path
  that builds the gradient;
* the 2-norm (``linalg.vector_norm``, ``clip_grad_norm_``) squares ``x``
  itself, without a pass for ``abs`` (``|x| * |x|`` is ``x * x`` to the bit);
* global average pooling (``adaptive_avg_pool2d/3d`` to size 1) is one
  ``mean`` over the trailing axes, as PyTorch computes it, not a reduction
  per axis over a strided middle one;
* ``one_hot`` writes ones into zeros instead of comparing every class;
* ``cumsum`` is one sequential pass accumulating in float64, as PyTorch's
  CPU kernel: its value and gradient equal PyTorch's bit for bit.
"""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

X = np.array([-0.0, 0.0, -1.5, 2.5, np.nan, np.inf, -np.inf, 0.3, -0.3, 1.0, -1.0, 1e-40],
             np.float64)
BOUNDS = [(0, None), (None, 0), (-0.0, None), (0.0, 1.0), (-1, 1), (0.5, 0.2), (None, -0.0),
          (1, None), (-0.0, 0.0), (-2.5, 0.3), (float("-inf"), float("inf"))]


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_clamp_without_grad_matches_torch_bit_for_bit(dtype):
    x = X.astype(dtype)
    for lo, hi in BOUNDS:
        want = torch.from_numpy(x).clamp(lo, hi).numpy()
        got = tracec.from_numpy(x).clamp(lo, hi)
        assert got.dtype == getattr(tracec, dtype)
        assert np.array_equal(_bits(got.numpy()), _bits(want)), (lo, hi, got, want)
        with tracec.no_grad():        # no gradient to build: the np.clip pass
            plain = tracec.from_numpy(x).requires_grad_().clamp(lo, hi)
        with tracec.enable_grad():    # the where path, which builds ClampBackward1
            graded = tracec.from_numpy(x).requires_grad_().clamp(lo, hi)
        assert graded.grad_fn is not None and plain.grad_fn is None
        assert np.array_equal(_bits(plain.numpy()), _bits(want)), (lo, hi)
        assert np.array_equal(_bits(graded.detach().numpy()), _bits(want)), (lo, hi)


def test_clamp_of_a_large_tensor_and_in_place():
    x = np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32)
    t = tracec.from_numpy(x.copy())
    np.testing.assert_array_equal(t.clamp(-0.5, 0.5).numpy(), np.clip(x, -0.5, 0.5))
    with tracec.no_grad():
        t.clamp_(min=0.0)           # WGAN-style in-place clipping
    np.testing.assert_array_equal(t.numpy(), torch.from_numpy(x).clamp(min=0.0).numpy())


def test_no_grad_clamp_is_one_pass_not_two_wheres(monkeypatch):
    from tracec import ops
    calls = []
    real = ops.where
    monkeypatch.setattr(ops, "where", lambda *a: calls.append(1) or real(*a))
    x = tracec.randn(8, 8)
    x.clamp(-0.5, 0.5)
    assert not calls
    x.requires_grad_().clamp(-0.5, 0.5)
    # (a where per bound, and one keeping the gradient from NaN results, as
    # PyTorch's backward passes it only where min <= x <= max)
    assert len(calls) == 3


def test_the_two_norm_takes_no_abs_pass(monkeypatch):
    from tracec import functions, ops
    calls = []
    real_op, real_fn = ops.abs_, functions.abs
    monkeypatch.setattr(ops, "abs_", lambda *a: calls.append(1) or real_op(*a))
    monkeypatch.setattr(functions, "abs", lambda *a: calls.append(1) or real_fn(*a))
    x = np.random.default_rng(2).standard_normal((30, 40)).astype(np.float32)
    x[0, :3] = [-0.0, np.inf, -3e38]
    t = tracec.from_numpy(x)
    want = np.sqrt(np.add.reduce((np.abs(x) * np.abs(x)).reshape(-1)))
    for got in (t.norm(), tracec.linalg.vector_norm(t), tracec.norm(t, p=2)):
        assert np.array_equal(got.numpy(), want)
    rows = tracec.linalg.vector_norm(t[1:], dim=1)
    np.testing.assert_allclose(rows.numpy(), torch.from_numpy(x[1:]).norm(dim=1).numpy(),
                               rtol=1e-6)
    p = tracec.nn.Parameter(tracec.from_numpy(x[1:].copy()))
    p.grad = tracec.from_numpy(x[1:] * 0.5)
    total = tracec.nn.utils.clip_grad_norm_([p], 1.0)
    np.testing.assert_allclose(total.item(), torch.from_numpy(x[1:] * 0.5).norm().item(),
                               rtol=1e-6)
    assert not calls
    tracec.linalg.vector_norm(t, 3)             # other orders read |x|
    assert calls


@pytest.mark.parametrize("shape,fn,out", [
    ((3, 4, 7, 5), "adaptive_avg_pool2d", 1), ((4, 6, 6), "adaptive_avg_pool2d", (1, 1)),
    ((2, 3, 4, 5, 3), "adaptive_avg_pool3d", 1), ((3, 4, 5, 2), "adaptive_avg_pool3d", (1, 1, 1))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_global_average_pooling_is_one_mean(shape, fn, out, dtype, monkeypatch):
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    a.reshape(-1)[:3] = [np.inf, -0.0, 1e-30]
    res = []
    for L in (tracec, torch):
        x = L.from_numpy(a.copy()).to(getattr(L, dtype)).requires_grad_()
        y = getattr(L.nn.functional, fn)(x, out)
        y.backward(L.ones_like(y) * 3)
        res.append((type(y.grad_fn).__name__, y.detach().float().numpy(),
                    x.grad.float().numpy()))
    (n0, y0, g0), (n1, y1, g1) = res
    assert n0 == n1 and y0.shape == y1.shape
    tol = 1e-2 if dtype == "bfloat16" else 1e-6
    np.testing.assert_allclose(y0, y1, rtol=tol, atol=tol)
    np.testing.assert_allclose(g0, g1, rtol=tol, atol=tol)
    calls = []
    real = tracec.ops.reduce_sum
    monkeypatch.setattr(tracec.ops, "reduce_sum", lambda x, axes: calls.append(axes) or real(x, axes))
    getattr(tracec.nn.functional, fn)(tracec.from_numpy(a), out)
    nsp = 3 if fn.endswith("3d") else 2
    assert len(calls) == 1 and calls[0] == tuple(range(len(shape) - nsp, len(shape))), calls


@pytest.mark.parametrize("shape,k", [((7,), 3), ((2, 3), 4), ((0,), 3), ((4,), -1), ((), 5),
                                     ((300,), 1000)])
def test_one_hot_eager_equals_the_compare_path_and_torch(shape, k):
    a = np.random.default_rng(0).integers(0, 3, shape)
    got = tracec.nn.functional.one_hot(tracec.from_numpy(a), k)
    want = torch.nn.functional.one_hot(torch.from_numpy(a), k)
    traced = tracec.compile(lambda t: tracec.nn.functional.one_hot(t, max(k, 3)),
                            backend="interp")(tracec.from_numpy(a))
    assert got.dtype is tracec.int64 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if k != -1:
        np.testing.assert_array_equal(traced.numpy(), got.numpy())
    with pytest.raises(RuntimeError, match="non-negative"):
        tracec.nn.functional.one_hot(tracec.tensor([0, -1]), 3)


@pytest.mark.parametrize("shape,dim", [((64, 1000), 1), ((7, 5, 3), 0), ((4,), 0), ((3, 0), 1),
                                       ((5, 6), -1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cumsum_equals_torch_bit_for_bit(shape, dim, dtype):
    rng = np.random.default_rng(0)
    a, g = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    res = []
    for L in (tracec, torch):
        x = L.from_numpy(a.copy()).requires_grad_()
        y = L.cumsum(x, dim)
        y.backward(L.from_numpy(g))
        res.append((type(y.grad_fn).__name__, _bits(y.detach().numpy()), _bits(x.grad.numpy())))
    assert res[0][0] == res[1][0]
    np.testing.assert_array_equal(res[0][1], res[1][1])
    np.testing.assert_array_equal(res[0][2], res[1][2])
    # The compiled form (a log-step scan, in float64 for float32 as well)
    # rounds each prefix once, as the eager pass: equal to float64 rounding
    # (a float32 scan moved a NeRF's inverse-CDF samples across bins)
    for backend in ("interp", "cpu"):
        compiled = tracec.compile(lambda t: tracec.cumsum(t, dim), backend=backend)
        np.testing.assert_allclose(compiled(tracec.from_numpy(a)).numpy(),
                                   np.cumsum(a, dim, dtype=np.float64).astype(dtype),
                                   rtol=1e-7 if dtype == "float32" else 1e-13, atol=1e-12)
