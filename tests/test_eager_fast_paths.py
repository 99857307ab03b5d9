"""The eager fast paths of the primitives' NumPy implementations and of the
eager convolution, against PyTorch and against the paths they replace:
``where``'s bit select with a (+)0 operand (ReLU's value and gradient),
``matmul`` of a batch against one matrix (one GEMM), the in-place
``random_uniform`` (the same draws), the float32 ``erf`` in blocks (the
same bits), the eager im2col convolution (values and gradients as
PyTorch's, double backward through the primitive path), and the weight
gradient's layout (C-contiguous as the parameter, as PyTorch's
AccumulateGrad)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracec
import tracec.nn.functional as F
from tracec import dtypes as dt
from tracec.nn import _conv
from tracec.ops import elementwise as ew, linalg, random as rnd

torch = pytest.importorskip("torch")

_U = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a):
    a = np.asarray(a)
    return a.view(_U[a.dtype.itemsize]) if a.dtype.kind == "f" else a


def _special(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3::11] = 0.0
    flat[5::13] = np.nan
    flat[6::17] = -np.nan
    flat[8::19] = np.inf
    flat[9::23] = -np.inf
    return x


# --- where's bit select ------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64,
                                   np.uint8, np.bool_])
@pytest.mark.parametrize("shape", [(70001,), (3, 40000), (4, 129, 130)])
def test_where_bit_select_matches_np_where(dtype, shape):
    rng = np.random.default_rng(1)
    if np.dtype(dtype).kind == "f":
        a, b = _special(shape, dtype, 1), _special(shape, dtype, 2)
    else:
        a = rng.integers(0, 2 if dtype is np.bool_ else 100, shape).astype(dtype)
        b = rng.integers(0, 2 if dtype is np.bool_ else 100, shape).astype(dtype)
    c = rng.random(shape) < 0.5
    zero = np.zeros((), dtype)
    scalars = [zero, np.ones((), dtype)]
    if np.dtype(dtype).kind == "f":
        scalars += [np.asarray(-0.0, dtype), np.asarray(np.nan, dtype)]
    for s in scalars:
        for args in ((c, s, b), (c, a, s), (c, s, s), (c, a, b)):
            got, want = ew._where_impl(*args), np.where(*args)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(_bits(got), _bits(want))
    # a broadcast condition and operands
    cb = c[..., :1]
    for args in ((cb, zero, b), (cb, a, zero), (c, zero, b[..., :1]), (c, a[..., :1], zero)):
        np.testing.assert_array_equal(_bits(ew._where_impl(*args)), _bits(np.where(*args)))



@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_where_scalar_condition_is_a_copy_of_one_branch(dtype):
    """A 0-d condition (``fill_``/``copy_``'s where(True, v, self) on a
    tensor that requires grad): np.where's values, dtype and shape, in a
    fresh C-contiguous array (never an operand), for broadcast operands."""
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((3, 1, 50)) * 9).astype(dtype)
    b = (rng.standard_normal((4, 50)) * 9).astype(dtype)
    full = (rng.standard_normal((3, 4, 50)) * 9).astype(dtype)
    for c in (np.bool_(True), np.array(False), np.array(True)):
        for x, y in ((a, b), (full, np.zeros((), dtype)), (np.ones((), dtype), full),
                     (full, full[::-1])):
            got, want = ew._where_impl(c, x, y), np.where(c, x, y)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.flags.c_contiguous and got.flags.owndata
            assert got is not x and got is not y
            np.testing.assert_array_equal(_bits(got), _bits(want))

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_large_special_values_match_pytorch(dtype):
    """ReLU on arrays past the bit-select threshold: NaN (with its sign)
    and -0.0 go through, negatives become +0.0; the gradient is the
    incoming one where x <= 0 is false, +0.0 elsewhere."""
    x = _special((64, 33, 37), getattr(np, dtype))
    g = np.random.default_rng(5).standard_normal(x.shape).astype(x.dtype)
    g.reshape(-1)[::29] = np.nan
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.relu(tx)
    ty.backward(torch.tensor(g))
    cx = tracec.tensor(x, requires_grad=True)
    cy = F.relu(cx)
    cy.backward(tracec.tensor(g))
    np.testing.assert_array_equal(_bits(cy.detach().numpy()), _bits(ty.detach().numpy()))
    np.testing.assert_array_equal(_bits(cx.grad.numpy()), _bits(tx.grad.numpy()))


# --- matmul: a batch against one matrix -----------------------------------------------

@pytest.mark.parametrize("a_shape,b_shape", [
    ((35, 20, 200), (200, 300)), ((2, 3, 4, 65), (65, 33)), ((3, 5, 7), (1, 7, 9)),
    ((3, 5, 7), (1, 1, 7, 9)), ((4, 0, 6), (6, 5)), ((0, 3, 6), (6, 5)), ((2, 3, 0), (0, 4))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex64])
def test_matmul_batch_against_one_matrix_is_one_product(a_shape, b_shape, dtype):
    """Each row of the batch as in the 2-D product of all rows (x @ w.T on a
    [T, B, F] input gives the bits of the same Linear on [T * B, F]), and
    np.matmul's values; also for a transposed B (which NumPy's batched loop
    multiplied without BLAS) and a non-contiguous A."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(a_shape) * 4).astype(dtype)
    b = (rng.standard_normal(b_shape) * 4).astype(dtype)
    want = np.matmul(a, b)
    k, n = b_shape[-2:]
    bt = np.swapaxes(np.ascontiguousarray(np.swapaxes(b, -1, -2)), -1, -2)
    at = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, -2)), 0, -2)
    assert not bt.flags.c_contiguous or bt.size == 0
    for aa in (a, at):
        for bb in (b, bt):
            got = linalg.matmul_p.impl(aa, bb)
            assert got.shape == want.shape and got.dtype == want.dtype
            rows = np.matmul(aa.reshape(math.prod(a_shape[:-1]), k), bb.reshape(k, n))
            np.testing.assert_array_equal(got, rows.reshape(want.shape))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def test_linear_on_3d_input_matches_pytorch():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((7, 5, 40)).astype(np.float32)
    w = rng.standard_normal((30, 40)).astype(np.float32)
    g = rng.standard_normal((7, 5, 30)).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.linear(tx, tw)
    ty.backward(torch.tensor(g))
    cx, cw = tracec.tensor(x, requires_grad=True), tracec.tensor(w, requires_grad=True)
    cy = F.linear(cx, cw)
    cy.backward(tracec.tensor(g))
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-4)


# --- gradient layout -------------------------------------------------------------------

def test_weight_gradient_is_laid_out_as_the_parameter():
    """``x @ w.T``'s weight gradient comes out of the VJP transposed; .grad
    has the parameter's strides, as PyTorch's (an optimizer's passes over
    it are contiguous), with the same values."""
    tracec.manual_seed(0)
    torch.manual_seed(0)
    for lib in (tracec, torch):
        lin = lib.nn.Linear(50, 20)
        x = lib.randn(8, 50)
        lin(x).sum().backward()
        assert lin.weight.grad.stride() == lin.weight.stride() == (50, 1)
        assert lin.weight.grad.is_contiguous()
    lin = tracec.nn.Linear(50, 20)
    x = tracec.randn(8, 50)
    lin(x).sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.ones((20, 8), np.float32)
                               @ x.numpy(), rtol=1e-5, atol=1e-5)
    # a leaf that is itself a transposed view: the gradient as before
    w = tracec.randn(20, 50).t().detach().requires_grad_()
    (tracec.randn(8, 50) @ w).sum().backward()
    assert w.grad.shape == w.shape


@pytest.mark.parametrize("shape", [(9, 2000), (64, 4096), (130, 1100), (3, 65536)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_wide_weight_gradient_tiled_copy(shape, dtype):
    """A wide layer's transposed weight gradient is copied in tiles (ragged
    edges too): the same values, C-contiguous, as PyTorch's."""
    from tracec import autograd as A
    g = np.random.default_rng(0).standard_normal(shape[::-1]).astype(dtype).T
    out = A._transposed_copy(g)
    assert out.flags.c_contiguous and out.dtype == g.dtype
    np.testing.assert_array_equal(out, g)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, shape[1])).astype(dtype)
    w = rng.standard_normal(shape).astype(dtype) / 50
    grads = []
    for lib in (tracec, torch):
        wt = lib.tensor(w).requires_grad_()
        (lib.tensor(x) @ wt.t()).pow(2).sum().backward()
        assert wt.grad.is_contiguous() and wt.grad.stride() == (shape[1], 1)
        grads.append(wt.grad.numpy())
    # float32 sums of up to 65536 products (in torch's order or NumPy's):
    # the error scales with the largest gradient, not with each element
    tol = 1e-4 if dtype is np.float32 else 1e-10
    np.testing.assert_allclose(grads[0], grads[1], rtol=tol,
                               atol=tol * float(np.abs(grads[1]).max()))


# --- random_uniform ---------------------------------------------------------------------

def _uniform_reference(state, shape, dtype):
    """The draws as the float64 formula of the module docstring."""
    n = math.prod(shape)
    seed, offset = (int(v) for v in state)
    with np.errstate(over="ignore"):
        key = rnd.splitmix64(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + rnd._GOLDEN)
        ctr = np.arange(n, dtype=np.uint64) + np.uint64(offset & 0xFFFFFFFFFFFFFFFF)
        bits = rnd.splitmix64(ctr * rnd._GOLDEN + key)
    b = rnd.uniform_bits(dtype)
    u = (bits >> np.uint64(64 - b)).astype(np.float64) * (1.0 / (1 << b))
    return u.astype(dtype.np).reshape(shape)


@pytest.mark.parametrize("dtype", [dt.float32, dt.float64, dt.float16, dt.bfloat16])
@pytest.mark.parametrize("state", [(0, 0), (12345, 2 ** 40 + 7), (-1, 2 ** 63 - 5)])
def test_random_uniform_draws_unchanged(dtype, state):
    s = np.array(state, np.int64)
    for shape in ((1000, 37), (3,), ()):
        got = rnd._uniform_impl(s, shape=shape, dtype=dtype)
        want = _uniform_reference(s, shape, dtype)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(_bits(got), _bits(want))
        assert ((got >= 0) & (got < 1)).all()


# --- erf in blocks ------------------------------------------------------------------------

def _erf32_reference(x):
    """The float32 erf's formula, each step a fresh array."""
    f = np.float32
    ax = np.abs(x)
    y = np.full_like(x, ew.ERF32_A[0])
    for c in ew.ERF32_A[1:]:
        y = y * (x * x) + f(c)
    small = x * y
    t = np.clip(ax, f(1.0), f(4.0))
    e = np.exp(-t * t)
    q = np.full_like(x, ew.ERF32_B[0])
    for c in ew.ERF32_B[1:]:
        q = q * (f(1.0) / t) + f(c)
    big = np.copysign(np.minimum(f(1.0) - e * q, f(1.0)), x)
    return np.where(ax < f(1.0), small, big)


def test_erf_float32_in_place_steps_are_the_formulas_bits():
    x = np.concatenate([np.linspace(-6, 6, 200001, dtype=np.float32),
                        _special((5000,), np.float32) * np.float32(2),
                        np.array([0.99999994, 1.0, 1.0000001, 3.9999998, 4.0, 4.0000005,
                                  1e-40, -1e-40, 1e-30], np.float32)])
    with np.errstate(all="ignore"):
        want = _erf32_reference(x)
        np.testing.assert_array_equal(_bits(ew._erf32(x)), _bits(want))
        for v in (x[7], x[-3], np.float32(np.nan)):            # 0-d operands
            got = ew.erf_p.impl(np.asarray(v))
            assert got.shape == () and _bits(got) == _bits(_erf32_reference(np.asarray(v)))


def test_erf_float32_blocks_are_the_whole_arrays_bits():
    x = _special((3, 50001), np.float32) * np.float32(3)
    x[0, :2000] = np.linspace(-5, 5, 2000, dtype=np.float32)
    with np.errstate(all="ignore"):
        whole = ew._erf32(x)
    got = ew.erf_p.impl(x)
    np.testing.assert_array_equal(_bits(got), _bits(whole))
    got_t = ew.erf_p.impl(np.asfortranarray(x))        # a non-contiguous operand
    np.testing.assert_array_equal(_bits(got_t), _bits(whole))
    want = torch.erf(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=3e-7)


# --- eager convolution ----------------------------------------------------------------------

CONV_CASES = [
    # x shape, w shape, kwargs
    ((4, 3, 13, 11), (5, 3, 3, 3), {}),
    ((4, 3, 13, 11), (5, 3, 3, 2), {"stride": 2, "padding": 1}),
    ((2, 4, 12, 12), (6, 2, 3, 3), {"groups": 2, "dilation": 2, "padding": (2, 1)}),
    ((2, 4, 9, 10), (4, 4, 2, 3), {"padding": "same"}),
    ((2, 6, 8, 8), (6, 1, 3, 3), {"groups": 6, "stride": (1, 2)}),
    ((3, 2, 17), (4, 2, 5), {"stride": 3, "padding": 2}),
    ((2, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"padding": 1, "dilation": (1, 2, 1)}),
    ((3, 9, 9), (2, 3, 3, 3), {}),                  # unbatched
    # depthwise (one input and output channel per group): the channels-last
    # col2im of the input's gradient
    ((3, 5, 11), (5, 1, 4), {"groups": 5, "stride": 2, "dilation": 2, "padding": 3}),
    ((2, 8, 7, 7), (8, 1, 5, 5), {"groups": 8, "padding": "same"}),
    ((2, 4, 5, 6, 7), (4, 1, 2, 3, 2), {"groups": 4, "padding": (1, 0, 1)}),
]


def _conv_fn(lib, nsp):
    return {1: lib.nn.functional.conv1d, 2: lib.nn.functional.conv2d,
            3: lib.nn.functional.conv3d}[nsp]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
def test_eager_conv_matches_pytorch(case, dtype, bias):
    xs, ws, kw = CONV_CASES[case]
    nsp = len(ws) - 2
    rng = np.random.default_rng(case)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if bias else None
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)
    targs = [torch.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    ty = _conv_fn(torch, nsp)(targs[0], targs[1], targs[2] if bias else None, **kw)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    cargs = [tracec.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    cy = _conv_fn(tracec, nsp)(cargs[0], cargs[1], cargs[2] if bias else None, **kw)
    assert cy.grad_fn.name() == "ConvolutionBackward0" or x.ndim == nsp + 1
    cy.backward(tracec.tensor(g))
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), **tol)
    for c, t in zip(cargs, targs):
        assert c.grad.dtype is c.dtype
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), **tol)


@pytest.mark.parametrize("xs,ws,geometry", [
    ((3, 4, 10, 9), (6, 2, 3, 2), ((2, 1), (1, 0), (1, 0), (1, 2), 2, (5, 7))),
    ((3, 4, 10, 9), (4, 1, 3, 3), ((1, 2), (1, 1), (1, 1), (1, 1), 4, (10, 5))),  # depthwise
])
def test_eager_conv_is_the_primitive_paths_value(xs, ws, geometry):
    """The eager im2col makes the same matmul as the primitives: the same
    bits forward; gradients equal up to the order of the col2im sums."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    outs = []
    for eager in (True, False):
        cx, cw, cb = (tracec.tensor(v, requires_grad=True) for v in (x, w, b))
        y = (_conv._ConvEager.apply(cx, cw, cb, geometry) if eager
             else _conv._conv_prims(cx, cw, cb, *geometry))
        y.backward(tracec.ones_like(y))
        outs.append((y.detach().numpy(), cx.grad.numpy(), cw.grad.numpy(), cb.grad.numpy()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    for a, bb in zip(outs[0][1:], outs[1][1:]):
        np.testing.assert_allclose(a, bb, rtol=1e-6, atol=1e-5)


def test_eager_conv_noncontiguous_input_and_partial_grads():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((9, 9, 3, 2)).astype(np.float32)     # permuted to [2, 3, 9, 9]
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    tx = torch.tensor(x).permute(3, 2, 0, 1)
    tw = torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.square().sum().backward()
    cx = tracec.tensor(x).permute(3, 2, 0, 1)
    assert not cx.is_contiguous()
    cw = tracec.tensor(w, requires_grad=True)
    cy = F.conv2d(cx, cw, padding=1)
    cy.square().sum().backward()
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)
    # only the input needs a gradient
    cx2 = tracec.tensor(x).permute(3, 2, 0, 1).detach().requires_grad_()
    tx2 = torch.tensor(x).permute(3, 2, 0, 1).detach().requires_grad_()
    F.conv2d(cx2, tracec.tensor(w), stride=2).sum().backward()
    torch.nn.functional.conv2d(tx2, torch.tensor(w), stride=2).sum().backward()
    np.testing.assert_allclose(cx2.grad.numpy(), tx2.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_eager_conv_double_backward_matches_pytorch():
    """create_graph=True: a gradient penalty through the convolution."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal(4)
    res = []
    for lib in (torch, tracec):
        lx, lw, lb = (lib.tensor(v, requires_grad=True) for v in (x, w, b))
        y = lib.nn.functional.conv2d(lx, lw, lb, padding=1, stride=(2, 1))
        gx, gw = lib.autograd.grad((y * y).sum(), (lx, lw), create_graph=True)
        (gx.square().sum() + (gw * lw).sum()).backward()
        res.append([t.detach().numpy() for t in (gx, gw, lx.grad, lw.grad, lb.grad)])
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_eager_conv_retain_graph_and_freed_graph():
    x = tracec.randn(2, 3, 8, 8, requires_grad=True)
    conv = tracec.nn.Conv2d(3, 4, 3)
    y = conv(x).sum()
    y.backward(retain_graph=True)
    g1 = conv.weight.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(conv.weight.grad.numpy(), 2 * g1, rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


# --- max pooling's eager gradient -----------------------------------------------------------

@pytest.mark.parametrize("fn,shape,k", [("max_pool2d", (8, 16, 25, 24), 2),
                                        ("max_pool2d", (2, 3, 9, 10), (3, 2)),
                                        ("max_pool3d", (2, 3, 6, 7, 4), 2),
                                        ("max_pool1d", (4, 5, 33), 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_eager_gradient_matches_pytorch(fn, shape, k, dtype):
    """The gradient written in place by window position: to the first
    maximum (ties, -0.0 against +0.0), floor mode's dropped rows zero."""
    rng = np.random.default_rng(11)
    x = rng.integers(-2, 3, shape).astype(dtype)
    x.reshape(-1)[::5] = -0.0
    g = None
    res = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = getattr(lib.nn.functional, fn)(lx, k)
        if g is None:
            g = rng.standard_normal(tuple(y.shape)).astype(dtype)
        y.backward(lib.tensor(g))
        res.append((y.detach().numpy(), lx.grad.numpy()))
    np.testing.assert_array_equal(_bits(res[1][0]), _bits(res[0][0]))
    np.testing.assert_array_equal(_bits(res[1][1]), _bits(res[0][1]))


def test_max_pool_eager_double_backward_matches_pytorch():
    x = np.random.default_rng(12).standard_normal((2, 3, 8, 8))
    res = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.max_pool2d(lx, 2)
        (gx,) = lib.autograd.grad((y * y).sum(), (lx,), create_graph=True)
        gx.sum().backward()
        res.append((gx.detach().numpy(), lx.grad.numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_array_equal(got, want)


# --- linear's bias added in place -------------------------------------------------------------

@pytest.mark.parametrize("x_shape", [(7, 40), (3, 5, 40), (40,)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_bias_in_place_matches_pytorch(x_shape, dtype):
    rng = np.random.default_rng(13)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((30, 40)).astype(dtype)
    b = rng.standard_normal(30).astype(dtype)
    res = []
    for lib in (torch, tracec):
        lx, lw, lb = (lib.tensor(v, requires_grad=True) for v in (x, w, b))
        y = lib.nn.functional.linear(lx, lw, lb)
        res.append(y.grad_fn.name())      # PyTorch's (AddmmBackward0 on 2-D input)
        (y * y).sum().backward()
        res.append([t.detach().numpy() for t in (y, lx.grad, lw.grad, lb.grad)])
    tol = 1e-4 if dtype == "float32" else 1e-10
    assert res[2] == res[0]          # grad_fn names
    res = [res[1], res[3]]
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # the value is the product's plus the bias, as the primitives add them
    y = F.linear(tracec.tensor(x), tracec.tensor(w), tracec.tensor(b))
    prod = tracec.matmul(tracec.tensor(x), tracec.tensor(w).t())
    np.testing.assert_array_equal(y.numpy(), ew.add_p.impl(prod.numpy(), b))


# --- log_softmax as one eager Function -----------------------------------------------------

def _log_softmax_case(shape, dim, dtype, seed=14):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    return x, g


@pytest.mark.parametrize("shape,dim", [((700, 1000), 1), ((4, 5, 6), 0), ((4, 5, 6), -2),
                                       ((7,), 0), ((3, 1, 4), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_softmax_eager_is_the_primitives_bits(shape, dim, dtype):
    from tracec import functions as TFn
    x, g = _log_softmax_case(shape, dim, dtype)
    x.reshape(-1)[:4] = (-np.inf, 1e30, -1e30, np.inf)
    res = []
    for fast in (True, False):
        cx = tracec.tensor(x, requires_grad=True)
        y = (F.log_softmax(cx, dim) if fast
             else TFn._log_softmax_prims(cx, TFn._dims(cx, dim)))
        assert y.grad_fn.name() == "LogSoftmaxBackward0"
        y.backward(tracec.tensor(g))
        res.append((y.detach().numpy(), cx.grad.numpy()))
    np.testing.assert_array_equal(_bits(res[0][0]), _bits(res[1][0]))
    np.testing.assert_array_equal(_bits(res[0][1]), _bits(res[1][1]))
    # against PyTorch without the +inf (where the primitives give NaN only at
    # the +inf itself, PyTorch in the whole slice)
    x, g = _log_softmax_case(shape, dim, dtype)
    got = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = lib.log_softmax(lx, dim)
        y.backward(lib.tensor(g))
        got.append((y.detach().numpy(), lx.grad.numpy()))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=tol, atol=tol)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=tol, atol=tol * 10)


def test_log_softmax_eager_special_rows_and_losses_match_pytorch():
    x = np.array([[0.0, 1.0, 2.0], [-np.inf, 0.0, 1.0],
                  [np.nan, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    res = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.log_softmax(lx, 1)
        y.backward(lib.ones_like(y))
        res.append((y.detach().numpy(), lx.grad.numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-6, equal_nan=True)
    # cross_entropy / nll_loss over log_softmax, with ignore_index
    xs, _ = _log_softmax_case((64, 10), 1, "float32")
    t = np.random.default_rng(3).integers(0, 10, 64)
    t[::7] = -100
    res = []
    for lib in (torch, tracec):
        lx = lib.tensor(xs, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(lx, lib.tensor(t))
        loss.backward()
        res.append((loss.item(), lx.grad.numpy()))
    assert abs(res[1][0] - res[0][0]) < 1e-5
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-5, atol=1e-7)


def test_log_softmax_eager_double_backward_and_in_place_input():
    x, g = _log_softmax_case((5, 7), 1, "float64")
    res = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = lib.log_softmax(lx, 1)
        (gx,) = lib.autograd.grad((y * lib.tensor(g)).sum(), (lx,), create_graph=True)
        (gx * gx).sum().backward()
        res.append((gx.detach().numpy(), lx.grad.numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # the input changed in place after the call: the gradient is still the
    # result's (PyTorch's node keeps no input)
    for lib in (torch, tracec):
        a = lib.tensor(x, requires_grad=True)
        h = a * 2
        y = lib.log_softmax(h, 1)
        h.add_(1.0)
        y.backward(lib.tensor(g))
        res.append(a.grad.numpy())
    np.testing.assert_allclose(res[-1], res[-2], rtol=1e-10, atol=1e-12)


# --- exact GELU as one eager Function -----------------------------------------------------------

@pytest.mark.parametrize("shape", [(16, 64, 512), (7,), (3, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_eager_is_the_primitives_bits(shape, dtype):
    from tracec import functions as TFn
    x = _special(shape, getattr(np, dtype), 15) * 3
    g = np.random.default_rng(16).standard_normal(shape).astype(dtype)
    res = []
    for fast in (True, False):
        cx = tracec.tensor(x, requires_grad=True)
        y = F.gelu(cx) if fast else TFn._gelu_prims(cx, "none")
        assert y.grad_fn.name() == "GeluBackward0"
        y.backward(tracec.tensor(g))
        res.append((y.detach().numpy(), cx.grad.numpy()))
    np.testing.assert_array_equal(_bits(res[0][0]), _bits(res[1][0]))
    np.testing.assert_array_equal(_bits(res[0][1]), _bits(res[1][1]))
    # PyTorch, on finite values
    x = np.random.default_rng(17).standard_normal(shape).astype(dtype) * 3
    got = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.gelu(lx)
        y.backward(lib.tensor(g))
        got.append((y.detach().numpy(), lx.grad.numpy()))
    tol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(got[1], got[0]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_gelu_eager_double_backward_and_version_check():
    x = np.random.default_rng(18).standard_normal((4, 6))
    res = []
    for lib in (torch, tracec):
        lx = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.gelu(lx)
        (gx,) = lib.autograd.grad(y.sum(), (lx,), create_graph=True)
        (gx * gx).sum().backward()
        res.append((gx.detach().numpy(), lx.grad.numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    for lib in (torch, tracec):           # x modified in place: both refuse
        lx = lib.tensor(x, requires_grad=True)
        h = lx * 1.0
        y = lib.nn.functional.gelu(h)
        h.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_full_of_zero_is_np_full():
    """``full`` with +0 allocates zeroed memory; -0.0 and others fill."""
    from tracec.ops import creation
    for v in (0, 0.0, -0.0, False, True, 1, 2.5, float("nan")):
        for d in (dt.float32, dt.float64, dt.int64, dt.bool_, dt.int8):
            got = creation.full_p.impl(value=v, shape=(3, 4), dtype=d)
            want = np.full((3, 4), v, dtype=d.np)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (v, d)
            got[0, 0] = 1                                   # writable, owns its memory
    assert np.signbit(tracec.full((2,), -0.0).numpy()).all()
    assert not np.signbit(tracec.zeros(2).numpy()).any()


# --- the LSTM scan's gates written in place -------------------------------------------------------

def test_lstm_scan_is_the_per_gate_formulas_bits():
    from tracec.ops import recurrent as rec
    rng = np.random.default_rng(19)
    T, N, H = 5, 3, 4
    gi = (rng.standard_normal((T, N, 4 * H)) * 3).astype(np.float32)
    w = rng.standard_normal((H, 4 * H)).astype(np.float32)
    h0, c0 = (rng.standard_normal((N, H)).astype(np.float32) for _ in range(2))
    for reverse in (0, 1):
        out = rec._scan_impl(gi, w, h0, c0, mode="LSTM", reverse=reverse)
        h, c = h0, c0
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            a = gi[t] + h @ w
            i, f, o = (ew._sigmoid(a[:, k * H:(k + 1) * H]) for k in (0, 1, 3))
            g = np.tanh(a[:, 2 * H:3 * H])
            c = f * c + i * g
            h = o * np.tanh(c)
            want = np.concatenate([h, c, i, f, g, o], 1)
            np.testing.assert_array_equal(_bits(out[t + 1]), _bits(want))
        # the backward's gate gradients, row by row
        gr = rng.standard_normal(out.shape).astype(np.float32)
        res = rec._grad_impl(gr, out, w, h0, c0, mode="LSTM", reverse=reverse)
        steps = list(range(T - 1, -1, -1) if reverse else range(T))
        dh, dc = gr[0, :, :H].copy(), gr[0, :, H:2 * H].copy()
        for k in range(T - 1, -1, -1):
            t = steps[k]
            row, g_ = out[t + 1], gr[t + 1]
            cprev = c0 if k == 0 else out[steps[k - 1] + 1, :, H:2 * H]
            dh = dh + g_[:, :H]
            i, f, gg, o = (row[:, j * H:(j + 1) * H] for j in range(2, 6))
            gi_, gf, gg_, go = (g_[:, j * H:(j + 1) * H] for j in range(2, 6))
            tc = np.tanh(row[:, H:2 * H])
            dc = dc + g_[:, H:2 * H] + dh * o * (1 - tc * tc)
            da = np.concatenate([(dc * gg + gi_) * i * (1 - i), (dc * cprev + gf) * f * (1 - f),
                                 (dc * i + gg_) * (1 - gg * gg), (dh * tc + go) * o * (1 - o)], 1)
            np.testing.assert_array_equal(_bits(res[t + 1]), _bits(da))
            dc = dc * f
            dh = da @ w.T


# --- the optimizers' in-place NumPy steps ----------------------------------------------

from tracec.optim import _functional as optim_f  # noqa: E402
from tracec.tensor import OP_OBSERVERS  # noqa: E402

OPTIM_CASES = [
    ("Adam", {}), ("Adam", dict(lr=0.1, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.5), amsgrad=True)),   # lerp's other branch
    ("Adam", dict(lr=1, maximize=True, eps=0)),
    ("AdamW", {}), ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.5)),
    ("AdamW", dict(lr=0.01, betas=(0.0, 0.0))),
    ("Adadelta", {}), ("Adadelta", dict(lr=0.5, rho=0.0, weight_decay=0.1)),
    ("Adadelta", dict(lr=2, rho=1.0, eps=1e-3, maximize=True)),
    ("Adadelta", dict(lr=1.0, rho=0.5, eps=0)),
]


def _optim_run(lib, name, kw, dtype, primitives=False, steps=4):
    """Parameters (one a transposed gradient's) and state after ``steps``
    steps with fixed gradients; ``primitives``: the tensor-op path (an op
    observer turns the NumPy path off)."""
    rng = np.random.default_rng(3)
    shapes = [(5, 7), (3,), (4, 2, 3), ()]
    ps = [lib.nn.Parameter(lib.tensor(rng.standard_normal(s).astype(dtype))) for s in shapes]
    opt = getattr(lib.optim, name)(ps, **kw)
    obs = lambda *a: None  # noqa: E731
    for _ in range(steps):
        for i, p in enumerate(ps):
            g = rng.standard_normal(p.shape[::-1]).astype(dtype)
            if g.ndim:
                g[..., :1] = 0.0
            p.grad = lib.tensor(g).T if i == 0 else lib.tensor(g.reshape(p.shape))
        if primitives:
            OP_OBSERVERS.append(obs)
        try:
            opt.step()
        finally:
            if primitives:
                OP_OBSERVERS.remove(obs)
    state = [{k: v.detach().numpy().copy() for k, v in opt.state[p].items()} for p in ps]
    return [p.detach().numpy().copy() for p in ps], state, [p._version for p in ps]


@pytest.mark.parametrize("name,kw", OPTIM_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_optimizer_numpy_step_is_the_tensor_ops_bits(name, kw, dtype):
    calls = []
    orig = optim_f.direct_arrays

    def spy(*a):
        out = orig(*a)
        calls.append(out is not None)
        return out
    optim_f.direct_arrays = spy
    try:
        fast = _optim_run(tracec, name, kw, dtype)
        ran = list(calls)
        slow = _optim_run(tracec, name, kw, dtype, primitives=True)
    finally:
        optim_f.direct_arrays = orig
    assert ran == [True, True, True, False] * 4         # the NumPy path ran (not 0-d)
    assert len(calls) == 32 and not any(calls[16:])     # then the tensor ops
    for a, b in zip(fast[0], slow[0]):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    for sa, sb in zip(fast[1], slow[1]):
        assert sa.keys() == sb.keys()
        for k in sa:
            np.testing.assert_array_equal(_bits(sa[k]), _bits(sb[k]))
    assert fast[2] == slow[2]
    ref = _optim_run(torch, name, kw, dtype)
    rtol, atol = (1e-5, 1e-6) if dtype is np.float32 else (1e-12, 1e-13)
    for a, b in zip(fast[0], ref[0]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    for sa, sb in zip(fast[1], ref[1]):
        for k in sa:
            np.testing.assert_allclose(sa[k], sb[k], rtol=rtol, atol=atol)
    assert fast[2] == ref[2]   # PyTorch's version counts


def test_optimizer_numpy_step_falls_back():
    """A tensor learning rate, a view parameter, a float16 parameter and a
    traced step take the tensor ops (the NumPy path declines them)."""
    base = tracec.zeros(4, 3)
    view = base[1:3]
    p = tracec.nn.Parameter(tracec.ones(3))
    p.grad = tracec.ones(3)
    s = tracec.zeros(())
    assert optim_f.direct_arrays(p, p.grad, (tracec.zeros(3), s), 0.1) is None  # grad mode
    with tracec.no_grad():
        assert optim_f.direct_arrays(p, p.grad, (tracec.zeros(3), s), 0.1) is not None
        assert optim_f.direct_arrays(p, p.grad, (tracec.zeros(3), s),
                                     tracec.tensor(0.1)) is None
        assert optim_f.direct_arrays(p, p.grad, (view[0], s), 0.1) is None
        assert optim_f.direct_arrays(p, p.grad, (tracec.zeros(4), s), 0.1) is None
        h = tracec.nn.Parameter(tracec.ones(3, dtype=tracec.float16))
        assert optim_f.direct_arrays(h, h.clone(), (tracec.zeros(3), s), 0.1) is None
        z = tracec.nn.Parameter(tracec.ones(()))
        assert optim_f.direct_arrays(z, z.clone(), (tracec.zeros(()), s), 0.1) is None
    # a tensor lr still steps as PyTorch does
    for lib in (tracec, torch):
        q = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.Adam([q], lr=lib.tensor(0.1))
        q.grad = lib.tensor([1.0, -2.0, 0.5])
        opt.step()
        opt.step()
        if lib is tracec:
            got = q.detach().numpy()
    np.testing.assert_allclose(got, q.detach().numpy(), rtol=1e-6)


# --- in-place arithmetic written into the tensor --------------------------------------

from tracec import methods as tc_methods  # noqa: E402


def _inplace_cases(lib, dtype):
    """(name, tensor written, args, kwargs) with fresh operands."""
    rng = np.random.default_rng(7)
    x = _special((6, 5), dtype, 11)
    o = _special((6, 5), dtype, 12)
    row = rng.standard_normal((5,)).astype(dtype)
    T = lib.tensor
    cases = []
    for name in ("add_", "sub_", "mul_", "div_"):
        cases += [(name, T(x), (T(o),), {}), (name, T(x), (T(row),), {}),
                  (name, T(x), (2.5,), {}), (name, T(x), (3,), {}),
                  (name, T(x).t(), (T(o).t(),), {}),                  # non-contiguous
                  (name, T(x)[1:4], (T(o)[::2],), {}),                # strided
                  (name, T(x), (T(o)[0, 0],), {})]                    # a 0-d tensor
    for name in ("add_", "sub_"):
        cases += [(name, T(x), (T(o),), {"alpha": -0.3}), (name, T(x), (T(row),), {"alpha": 2}),
                  (name, T(x), (1.5,), {"alpha": -4.0})]
    return cases


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inplace_arithmetic_direct_is_the_tensor_ops_bits(dtype):
    calls = []
    orig = tc_methods._inplace_direct

    def spy(*a):
        calls.append(orig(*a))
        return calls[-1]
    tc_methods._inplace_direct = spy
    try:
        fast = [(getattr(t, n)(*a, **k), t) for n, t, a, k in _inplace_cases(tracec, dtype)]
    finally:
        tc_methods._inplace_direct = orig
    assert calls and all(calls)
    obs = lambda *a: None  # noqa: E731
    OP_OBSERVERS.append(obs)
    try:
        slow = [(getattr(t, n)(*a, **k), t) for n, t, a, k in _inplace_cases(tracec, dtype)]
    finally:
        OP_OBSERVERS.remove(obs)
    ref = [(getattr(t, n)(*a, **k), t) for n, t, a, k in _inplace_cases(torch, dtype)]
    for (fr, ft), (sr, st), (rr, rt) in zip(fast, slow, ref):
        assert fr is ft
        np.testing.assert_array_equal(_bits(ft.numpy()), _bits(st.numpy()))
        np.testing.assert_allclose(ft.numpy(), rt.numpy(), rtol=1e-6 if dtype is np.float32
                                   else 1e-15)
        assert ft._version == st._version == rt._version


def test_inplace_arithmetic_direct_views_aliases_and_autograd():
    # a write through a view reaches the base, as the tensor op's
    base = tracec.zeros(4, 3)
    v = base[1]
    v.add_(tracec.ones(3), alpha=2)
    assert base.numpy()[1].tolist() == [2.0, 2.0, 2.0] and base._version == 1
    v.mul_(3.0)                       # not stale: its version follows
    assert base.numpy()[1].tolist() == [6.0, 6.0, 6.0]
    base.add_(1.0)                    # the view is stale now: the tensor op refreshes it
    v.add_(1.0)
    assert base.numpy()[1].tolist() == [8.0, 8.0, 8.0] and base.numpy()[0, 0] == 1.0
    # p.data.add_(p.grad, alpha=-lr) with grad enabled: the leaf keeps its graph role
    lin = tracec.nn.Linear(3, 2)
    lin(tracec.ones(1, 3)).sum().backward()
    w0 = lin.weight.detach().numpy().copy()
    lin.weight.data.add_(lin.weight.grad, alpha=-0.5)
    np.testing.assert_array_equal(lin.weight.detach().numpy(),
                                  w0 - np.float32(0.5) * lin.weight.grad.numpy())
    assert lin.weight.is_leaf and lin.weight.requires_grad
    # a leaf requiring grad with grad enabled: PyTorch's error
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        lin.weight.add_(1.0)
    # an operand requiring grad: recorded by autograd as before
    a = tracec.ones(3)
    b = tracec.full((3,), 2.0, requires_grad=True)
    a.mul_(b)
    a.sum().backward()
    assert b.grad.tolist() == [1.0, 1.0, 1.0]
    # broadcasting into self is an error; integer tensors and mixed dtypes take the tensor op
    with pytest.raises(RuntimeError):
        tracec.ones(3).add_(tracec.ones(2, 3))
    i = tracec.ones(3, dtype=tracec.int64)
    i.add_(2)
    assert i.tolist() == [3, 3, 3]
    h = tracec.ones(3, dtype=tracec.float64)
    h.add_(tracec.ones(3, dtype=tracec.float32), alpha=0.25)
    assert h.tolist() == [1.25, 1.25, 1.25]
    z = tracec.ones(2)
    z += z
    z /= 4
    assert z.tolist() == [0.5, 0.5]
