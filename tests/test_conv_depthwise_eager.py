"""The column-free eager depthwise convolution (tracec/nn/_conv_depthwise_eager.py),
forced on small shapes by lowering its columns threshold: values and all
gradients against PyTorch 2.13, float32 and float64, 1-D to 3-D, strides,
dilations, asymmetric padding, odd sizes; the non-finite fallbacks; and that
the forward and input gradient are the per-offset sums' bits."""
import itertools

import numpy as np
import pytest
import torch

import tracec
from tracec.nn import _conv
from tracec.nn import _conv_depthwise_eager as _dw

CASES = [
    # x shape, kernel, kwargs (groups = channels)
    ((3, 5, 11), (3,), {"padding": 1}),
    ((3, 5, 17), (4,), {"stride": 2, "dilation": 2, "padding": 3}),
    ((2, 4, 13), (5,), {"stride": 3}),
    ((2, 6, 9, 7), (3, 3), {"padding": 1}),
    ((2, 6, 9, 11), (3, 3), {"stride": 2, "padding": 1}),
    ((2, 3, 10, 9), (3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
    ((2, 8, 7, 7), (5, 5), {"padding": "same"}),
    ((1, 3, 8, 9), (2, 2), {"padding": "same"}),      # asymmetric: low 0, high 1
    ((2, 4, 5, 6, 7), (2, 3, 2), {"padding": (1, 0, 1)}),
    ((2, 4, 7, 6, 5), (3, 3, 3), {"stride": 2, "padding": 1}),
]


@pytest.fixture
def column_free(monkeypatch):
    # the NumPy column-free path: not the native kernels (which a process
    # takes once its depthwise convolutions passed NATIVE.warmup elements)
    monkeypatch.setattr(_dw, "COLUMNS_BYTES", 0)
    monkeypatch.setattr(_dw.NATIVE, "makers", [])


def _fn(lib, nsp):
    return {1: lib.nn.functional.conv1d, 2: lib.nn.functional.conv2d,
            3: lib.nn.functional.conv3d}[nsp]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
def test_column_free_depthwise_matches_pytorch(column_free, case, dtype, bias):
    xs, k, kw = CASES[case]
    c, nsp = xs[1], len(k)
    rng = np.random.default_rng(case)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((c, 1) + k).astype(dtype)
    b = rng.standard_normal(c).astype(dtype) if bias else None
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    targs = [torch.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    ty = _fn(torch, nsp)(targs[0], targs[1], targs[2] if bias else None, groups=c, **kw)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    cargs = [tracec.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    cy = _fn(tracec, nsp)(cargs[0], cargs[1], cargs[2] if bias else None, groups=c, **kw)
    cy.backward(tracec.tensor(g))
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), **tol)
    for ca, ta in zip(cargs, targs):
        assert ca.grad.dtype is ca.dtype
        np.testing.assert_allclose(ca.grad.numpy(), ta.grad.numpy(), **tol)


def test_column_free_path_is_taken_and_keeps_no_columns(column_free):
    x = tracec.randn(2, 4, 9, 9, requires_grad=True)
    w = tracec.randn(4, 1, 3, 3, requires_grad=True)
    y = tracec.nn.functional.conv2d(x, w, padding=1, groups=4)
    ctx = y.grad_fn
    plan = getattr(ctx, "plan", None) or getattr(getattr(ctx, "ctx", None), "plan", None)
    assert isinstance(plan, _dw.Plan)


def _offsets_sum(xp, wk, kernel, stride, dilation, out):
    """``sum_k wk[:, k] * window_k`` in row-major offset order, one
    product and one add at a time: what the column-free forward computes."""
    acc = None
    for k, offs in enumerate(itertools.product(*[range(v) for v in kernel])):
        win = xp[(slice(None), slice(None)) + tuple(
            slice(q * d, q * d + (o - 1) * s + 1, s)
            for q, d, o, s in zip(offs, dilation, out, stride))]
        term = win * wk[:, k].reshape((1, -1) + (1,) * len(kernel))
        acc = term if acc is None else acc + term
    return acc


@pytest.mark.parametrize("case", [1, 4, 5, 9])
def test_column_free_forward_and_input_grad_are_the_offset_sums_bits(case):
    xs, k, kw = CASES[case]
    nsp = len(k)
    rng = np.random.default_rng(10 + case)
    x = rng.standard_normal(xs).astype(np.float32)
    wk = rng.standard_normal((xs[1], int(np.prod(k)))).astype(np.float32)
    stride = _conv._ntuple(kw.get("stride", 1), nsp, "stride")
    dilation = _conv._ntuple(kw.get("dilation", 1), nsp, "dilation")
    low = high = _conv._ntuple(kw.get("padding", 0), nsp, "padding")
    out = tuple((s + lo + hi - d * (kq - 1) - 1) // st + 1 for s, lo, hi, kq, st, d in
                zip(xs[2:], low, high, k, stride, dilation))
    plan = _dw.Plan(xs[2:], k, stride, low, high, dilation, out)
    assert plan.ok
    xp = _dw.pad(x, plan)
    got = _dw.forward(xp, wk, plan)
    want = _offsets_sum(xp, wk, k, stride, dilation, out)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    g = rng.standard_normal((xs[0], xs[1]) + out).astype(np.float32)
    windows = [(offs, tuple(slice(q * d, q * d + (o - 1) * s + 1, s)
                            for q, d, o, s in zip(offs, dilation, out, stride)))
               for offs in itertools.product(*[range(v) for v in k])]
    want_gx = _conv._depthwise_col2im(g, wk, plan.padded, windows)
    got_gx = _dw.input_grad(g, wk, plan)
    np.testing.assert_array_equal(np.asarray(got_gx).view(np.uint32),
                                  np.ascontiguousarray(want_gx).view(np.uint32))


@pytest.mark.parametrize("where", ["weight", "input"])
def test_column_free_non_finite_operands_match_pytorch(column_free, where):
    """Junk positions multiply zeros by the weight (input gradient) or by
    the input (weight gradient): an infinite operand must not leak NaNs."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 9))
    w = rng.standard_normal((3, 1, 3, 3))
    if where == "weight":
        w[1, 0, 2, 1] = np.inf
    else:
        x[0, 2, 4, 8] = np.inf       # the last column: read by junk positions
    targs = [torch.tensor(v, requires_grad=True) for v in (x, w)]
    ty = torch.nn.functional.conv2d(*targs, padding=(1, 0), groups=3)
    g = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(g))
    cargs = [tracec.tensor(v, requires_grad=True) for v in (x, w)]
    cy = tracec.nn.functional.conv2d(*cargs, padding=(1, 0), groups=3)
    cy.backward(tracec.tensor(g))
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    for ca, ta in zip(cargs, targs):
        np.testing.assert_allclose(ca.grad.numpy(), ta.grad.numpy(), rtol=1e-12)


def test_column_free_weight_grad_reads_the_input_at_backward_time(column_free):
    """As with columns: a write through ``x.data`` after the forward is what
    the weight's gradient reads (PyTorch's saved input)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 6, 6))
    w = rng.standard_normal((3, 1, 3, 3))
    grads = []
    for lib in (torch, tracec):
        tx = lib.tensor(x.copy())
        tw = lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(tx, tw, padding=1, groups=3)
        tx.data[:, :, :2] = 0.0
        y.sum().backward()
        grads.append(tw.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_long_rows_take_the_column_free_input_grad_with_the_same_bits(monkeypatch, dtype):
    """Below the columns threshold, stride 1 with output rows of at least
    ROWS_MIN takes the column-free col2im for the input's gradient: the
    channels-last col2im's bits, and PyTorch's values."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5, _dw.ROWS_MIN + 1)).astype(dtype)
    w = rng.standard_normal((4, 1, 3, 3)).astype(dtype)
    g = rng.standard_normal((3, 4, 5, _dw.ROWS_MIN + 1)).astype(dtype)
    grads = []
    for rows_min in (_dw.ROWS_MIN, 10 ** 9):
        monkeypatch.setattr(_dw, "ROWS_MIN", rows_min)
        cx = tracec.tensor(x, requires_grad=True)
        y = tracec.nn.functional.conv2d(cx, tracec.tensor(w), padding=1, groups=4)
        y.backward(tracec.tensor(g))
        grads.append(cx.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.conv2d(tx, torch.tensor(w), padding=1, groups=4).backward(
        torch.tensor(g))
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=1e-5, atol=1e-5)
