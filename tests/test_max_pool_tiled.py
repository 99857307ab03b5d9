"""Max pooling over non-overlapping windows (kernel == stride, no padding),
which ``_conv.py`` computes as a reshape and reductions rather than im2col +
argmax: values (signed zeros, infinities, NaN) and gradients (the whole
gradient to the first maximum of a window, to the first NaN when there is
one) exactly as PyTorch's, eagerly and compiled (interp and cpu).  Also the
cpu backend's folding of views read only by pad / concatenate."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tracec
import tracec.nn.functional as F
from tracec import ops


def _torch_pool(x, g, kernel, kw):
    xt = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.max_pool2d(xt, kernel, **kw)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), xt.grad.numpy()


def _tracec_pool(x, g, kernel, kw, backend):
    def step(x, g):
        y = F.max_pool2d(x, kernel, **kw)
        y.backward(g)
        return y.detach(), x.grad
    fn = step if backend == "eager" else tracec.compile(step, backend=backend)
    y, gx = fn(tracec.tensor(x, requires_grad=True), tracec.tensor(g))
    return y.numpy(), gx.numpy()


def _special(dtype):
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (2, 3, 7, 9)).astype(dtype)     # many ties
    x[0, 0, :2, :2] = -0.0                                  # a window of -0.0
    x[0, 0, 0, 2:4] = (-0.0, 0.0)                           # -0.0 before +0.0
    x[0, 0, 1, 2:4] = -1.0
    x[0, 1, 0, 0:2] = (0.0, -0.0)
    x[0, 1, 1, 0:2] = -3.0
    x[0, 2, :2, :2] = -np.inf                               # all -inf
    x[1, 0, 2:4, 2:4] = (1.0, np.nan), (np.nan, 2.0)        # two NaNs: the first wins
    x[1, 1, 4, 4] = np.inf
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,kw", [(2, {}), (3, {}), ((2, 3), {}), (2, {"stride": 2}),
                                       ((1, 2), {}), (2, {"ceil_mode": True})])
@pytest.mark.parametrize("backend", ["eager", "interp", "cpu"])
def test_tiled_max_pool_matches_torch(dtype, kernel, kw, backend):
    x = _special(dtype)
    if kw.get("ceil_mode"):
        x = x[:, :, :6, :8]          # even sizes: ceil mode adds no window
    g = np.random.default_rng(1).standard_normal(
        torch.nn.functional.max_pool2d(torch.tensor(x), kernel, **kw).shape).astype(dtype)
    yt, gt = _torch_pool(x, g, kernel, kw)
    y, gx = _tracec_pool(x, g, kernel, kw, backend)
    np.testing.assert_array_equal(y, yt)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(yt))
    np.testing.assert_array_equal(gx, gt)


def test_tiled_max_pool_unbatched_and_module():
    x = _special(np.float32)[0]
    y = tracec.nn.MaxPool2d(2)(tracec.tensor(x))
    np.testing.assert_array_equal(y.numpy(), torch.nn.MaxPool2d(2)(torch.tensor(x)).numpy())


def _im2col_and_col2im(x, g):
    """A stride-1 3x3 im2col (slices -> concatenate) and, for ``g``, the
    padded slices summed back (pads of slices): the shapes conv2d makes."""
    n, c, h, w = x.shape
    cols = ops.concatenate([ops.reshape(ops.slice_(x, (0, 0, i, j), (n, c, i + h - 2, j + w - 2),
                                                   (1, 1, 1, 1)), (n, c, 1, h - 2, w - 2))
                            for i in range(3) for j in range(3)], 2)
    back = None
    for k in range(9):
        i, j = divmod(k, 3)
        piece = ops.reshape(ops.slice_(g, (0, 0, k, 0, 0), (n, c, k + 1, h - 2, w - 2),
                                       (1, 1, 1, 1, 1)), (n, c, h - 2, w - 2))
        p = ops.pad(piece, (0, 0, i, j), (0, 0, 2 - i, 2 - j), (0, 0, 0, 0), 0.0)
        back = p if back is None else ops.add(back, p)
    # A slice read by a pad and by something else: still materialized.
    s = ops.slice_(x, (0, 0, 1, 1), (n, c, h, w), (1, 1, 1, 1))
    other = ops.add(ops.pad(s, (0, 0, 1, 1), (0, 0, 0, 0), (0, 0, 0, 0), 0.0), x)
    return cols, back, ops.mul(s, 2.0), other


def test_views_folded_into_pad_and_concatenate():
    rng = np.random.default_rng(3)
    x = tracec.tensor(rng.standard_normal((2, 3, 6, 7)).astype(np.float32))
    g = tracec.tensor(rng.standard_normal((2, 3, 9, 4, 5)).astype(np.float32))
    want = _im2col_and_col2im(x, g)
    got = tracec.compile(_im2col_and_col2im, backend="cpu")(x, g)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("kernel", [2, 3])
def test_tiled_max_pool1d_matches_torch(kernel):
    x = np.random.default_rng(0).integers(-2, 3, (2, 3, 9)).astype(np.float32)
    x[0, 0, 2], x[1, 1, 0:2] = np.nan, -0.0
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.max_pool1d(xt, kernel)
    g = np.random.default_rng(1).standard_normal(yt.shape).astype(np.float32)
    yt.backward(torch.tensor(g))
    xc = tracec.tensor(x, requires_grad=True)
    y = F.max_pool1d(xc, kernel)
    y.backward(tracec.tensor(g))
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(np.signbit(y.detach().numpy()), np.signbit(yt.detach().numpy()))
    np.testing.assert_array_equal(xc.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("fn,shape,k", [("max_pool2d", (4, 3, 9, 8), 2), ("max_pool1d", (2, 3, 7), 3),
                                        ("max_pool3d", (2, 2, 4, 6, 5), 2),
                                        ("max_pool2d", (2, 4, 9, 9), 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_eager_numpy_path_equals_pytorch_bit_for_bit(fn, shape, k, dtype):
    """Eager non-overlapping pooling runs in NumPy (_MaxPoolTiledEager):
    values (signed zeros too), the chosen element under ties, gradients,
    PyTorch's grad_fn names, double backward."""
    import torch
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    x[..., 0] = x[..., 1]
    x.flat[4], x.flat[5] = 0.0, -0.0
    x[..., 2] = np.round(x[..., 2])
    tx, cx = torch.tensor(x, requires_grad=True), tracec.tensor(x, requires_grad=True)
    ty = getattr(torch.nn.functional, fn)(tx, k)
    cy = getattr(tracec.nn.functional, fn)(cx, k)
    assert cy.grad_fn.name() == ty.grad_fn.name()
    assert np.array_equal(cy.detach().numpy().view(np.uint8), ty.detach().numpy().view(np.uint8))
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    gt, = torch.autograd.grad((ty ** 2 * torch.tensor(g)).sum(), tx, create_graph=True)
    gc, = tracec.autograd.grad((cy ** 2 * tracec.tensor(g)).sum(), cx, create_graph=True)
    np.testing.assert_array_equal(gc.detach().numpy(), gt.detach().numpy())
    (gt ** 2).sum().backward()
    (gc ** 2).sum().backward()
    np.testing.assert_array_equal(cx.grad.numpy(), tx.grad.numpy())


def test_where_bit_select_equals_numpy_where():
    """The where primitive's branch-free form on large arrays is np.where
    bit for bit: every dtype width, a 0 / -0.0 / other scalar, broadcast
    operands, NaN and infinities."""
    from tracec.ops.elementwise import _where_impl
    rng = np.random.default_rng(0)
    m = rng.standard_normal((8, 16, 24, 24)) > 0
    for dt_ in (np.float32, np.float64, np.float16, np.int64, np.int8, np.bool_):
        a = (rng.standard_normal(m.shape) * 3).astype(dt_)
        for b in (np.zeros((), dt_), np.array(-0.0).astype(dt_), np.ones((), dt_),
                  (rng.standard_normal((8, 1, 24, 24)) * 3).astype(dt_)):
            for c in (m, m[:, :1]):
                want, got = np.where(c, a, b), _where_impl(c, a, b)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    a = np.tile(np.array([np.nan, np.inf, -np.inf, -0.0], np.float32), 20000)
    c = np.tile(np.array([True, False]), 40000)
    assert np.array_equal(_where_impl(c, a, np.float32(0)).view(np.uint32),
                          np.where(c, a, np.float32(0)).view(np.uint32))
