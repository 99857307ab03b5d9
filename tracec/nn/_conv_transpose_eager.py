"""Transposed convolution run eagerly in NumPy, as the adjoint it is.

``conv_transpose(x, w)`` is the input gradient of ``conv(·, w)`` at ``x``:
the columns ``wᵀ x`` (one matmul per group) added into their windows of the
output (col2im).  Its gradients are a convolution of the output's gradient
(``w``'s input gradient: im2col with the same stride, one matmul) and the
weight's (``x`` against those columns).  The primitive path (zeros spread
between the input's elements, then a stride-1 convolution with the flipped
weight) multiplies ``stride**nsp`` times more numbers, most of them zeros:
DCGAN's 4x4 stride-2 layers ran 5-6x slower than PyTorch that way.  The
traced path keeps the primitives; values agree to float rounding (sums in
another order), checked against PyTorch and the primitive path in
``tests/test_conv_transpose_eager.py``.  Double backward (``create_graph``)
takes the primitive path's gradient.

float16 runs PyTorch's CPU kernel for it (slow_conv_transpose: no oneDNN
half support on CPUs without AVX512-FP16/AMX-FP16): each matmul in float32
rounded once to float16 (cpublas' half gemm), the columns added into the
output in float16 in kernel-offset order (col2im, each add rounded), then
the bias; the weight's gradient rounded after each image (the gemm
accumulates into it with beta 1), the bias's a float32 sum rounded once."""
from __future__ import annotations

import math

import numpy as np

from tracec import graph
from tracec.autograd import Function
from tracec.tensor import Tensor


def window_view(xp: np.ndarray, kernel, stride, dilation, out) -> np.ndarray:
    """``[N, C, *sp]`` -> the view ``[N, C, *kernel, *out]`` of its windows
    (what im2col copies; shared with ``_conv``)."""
    st = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp, xp.shape[:2] + tuple(kernel) + tuple(out),
        st[:2] + tuple(s * d for s, d in zip(st[2:], dilation))
        + tuple(s * t for s, t in zip(st[2:], stride)), writeable=False)


COLUMNS_BYTES = 64 << 20


def output_shape(in_sp, kernel, stride, padding, output_padding, dilation):
    return tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, k, s, p, op, d in
                 zip(in_sp, kernel, stride, padding, output_padding, dilation))


#: the most multiply-adds a float16 product runs in cpublas' order (a
#: Python loop over the inner dimension); larger ones take BLAS's order,
#: which rounds a float32 sum differently now and then (about 0.1% of the
#: float16 results one unit off)
ORDERED_MACS = 1 << 25


def _matmul(a: np.ndarray, b: np.ndarray, dtype, ilp: int = 1) -> np.ndarray:
    """``a @ b`` ([G, M, K] @ [G, K, P]) in ``dtype``; float16 as cpublas'
    half gemm: float32 products summed in float32, rounded once, the sum
    over K in ``ilp`` interleaved partial sums added at the end (1: one
    running sum, its gemm_transb; 4: its gemm_notrans' ``sum``)."""
    if dtype != np.float16:
        return np.matmul(a, b)
    a, b = a.astype(np.float32), b.astype(np.float32)
    k = a.shape[-1]
    if k * a.shape[-2] * b.shape[-1] * a.shape[0] > ORDERED_MACS:
        return np.matmul(a, b).astype(np.float16)
    parts = np.zeros((ilp,) + a.shape[:-1] + b.shape[-1:], np.float32)
    full = k - k % ilp
    for i in range(k):
        parts[i % ilp if i < full else 0] += a[..., :, i, None] * b[..., None, i, :]
    acc = parts[0]
    for p in parts[1:]:
        acc = acc + p
    return acc.astype(np.float16)


def _fold(a: np.ndarray, groups: int) -> np.ndarray:
    """``[N, C, *sp]`` -> ``[G, C/G, N*L]``: the batch folded into the
    matmul's columns (one large matmul per group, not one per image)."""
    n, c = a.shape[:2]
    return np.ascontiguousarray(np.swapaxes(a.reshape(n, c, -1), 0, 1)).reshape(
        groups, c // groups, -1)


class ConvTransposeEager(Function):
    node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias, geometry, prims):
        stride, padding, output_padding, dilation, groups = geometry
        a, w = x._data, weight._data
        n, cin = a.shape[:2]
        og, kernel = w.shape[1], tuple(w.shape[2:])
        nsp, kk, sp = len(kernel), math.prod(kernel), tuple(a.shape[2:])
        out = output_shape(sp, kernel, stride, padding, output_padding, dilation)
        full = tuple(o + 2 * p for o, p in zip(out, padding))
        # columns [G, O/G*kk, N*L] = wᵀ [G, O/G*kk, Cin/G] @ x [G, Cin/G, N*L],
        # added into their windows of [O, N, *full] (channels first: each add
        # runs over N*L); a few images at a time, so that the columns (kk
        # times the output's size) stay within COLUMNS_BYTES
        wt = np.swapaxes(w.reshape(groups, cin // groups, og * kk), -1, -2)
        yp = np.zeros((groups * og, n) + full, a.dtype)
        wins = [(offs, tuple(slice(q * d, q * d + (i - 1) * s + 1, s)
                             for q, d, i, s in zip(offs, dilation, sp, stride)))
                for offs in np.ndindex(*kernel)]
        step = max(1, COLUMNS_BYTES // max(1, groups * og * kk * math.prod(sp) * a.itemsize))
        for n0 in range(0, n, step):
            part = a[n0:n0 + step]
            cols = _matmul(wt, _fold(part, groups), a.dtype).reshape(
                (groups * og,) + kernel + (part.shape[0],) + sp)
            for offs, win in wins:
                dst = yp[(slice(None), slice(n0, n0 + step)) + win]
                dst += cols[(slice(None),) + offs]
        y = yp[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, out))]
        y = np.ascontiguousarray(np.swapaxes(y, 0, 1))
        if bias is not None:
            y += bias._data.reshape((1, -1) + (1,) * nsp)
        ctx.save_for_backward(x, weight, bias)
        ctx.geometry, ctx.prims = geometry, prims
        return Tensor._make(y, x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, weight, bias = ctx.saved_tensors
        stride, padding, output_padding, dilation, groups = ctx.geometry
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if graph.is_grad_enabled():
            # create_graph: the primitives' gradient, itself differentiable
            from tracec.autograd import grad as _grad
            wrt = [t for t, nd in ((x, need_x), (weight, need_w), (bias, need_b)) if nd]
            with graph.enable_grad():
                y = ctx.prims(x, weight, bias)
            it = iter(_grad(y, wrt, g, create_graph=True, allow_unused=True))
            return tuple(next(it) if nd else None for nd in (need_x, need_w, need_b)) + \
                (None, None)
        gd, a, w = g._data, x._data, weight._data
        n, cin = a.shape[:2]
        og, kernel = w.shape[1], tuple(w.shape[2:])
        kk, sp = math.prod(kernel), tuple(a.shape[2:])
        gx = gw = gb = None
        if need_x or need_w:
            # the output's gradient, channels first, padded back to the full
            # (uncropped) output; its windows at the input's positions are
            # conv's im2col: [O, *k, N, *sp] -> [G, O/G*kk, N*L]
            full = tuple(o + 2 * p for o, p in zip(gd.shape[2:], padding))
            gp = np.zeros((gd.shape[1], n) + full, gd.dtype)
            gp[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in
                                                  zip(padding, gd.shape[2:]))] = \
                np.swapaxes(gd, 0, 1)
            view = window_view(gp, kernel, stride, dilation, sp)     # [O, N, *k, *sp]
            nk = len(kernel)
            cols = np.ascontiguousarray(np.moveaxis(view, 1, 1 + nk)).reshape(
                groups, og * kk, -1)
            if need_x:
                wm = w.reshape(groups, cin // groups, og * kk)
                gx = _matmul(wm, cols, a.dtype, ilp=4).reshape((cin, n) + sp)
                gx = Tensor._make(np.ascontiguousarray(np.swapaxes(gx, 0, 1)), x.dtype)
            if need_w:
                gw = _weight_grad(_fold(a, groups), np.swapaxes(cols, -1, -2), n)
                gw = Tensor._make(gw.reshape(w.shape), weight.dtype)
        if need_b:
            axes = (0,) + tuple(range(2, gd.ndim))
            gb = np.add.reduce(gd, axis=axes, dtype=np.float32).astype(np.float16) \
                if gd.dtype == np.float16 else np.add.reduce(gd, axis=axes)
            gb = Tensor._make(gb, bias.dtype)
        return gx, gw, gb, None, None


def _weight_grad(xs: np.ndarray, cols_t: np.ndarray, n: int) -> np.ndarray:
    """``xs @ cols_t`` ([G, Cin/G, N*L] @ [G, N*L, O/G*kk]); float16 as
    PyTorch's kernel: one image's float32 product at a time, added to the
    float16 gradient so far and rounded (its gemm's beta 1)."""
    if xs.dtype != np.float16:
        return np.matmul(xs, cols_t)
    per = xs.shape[-1] // max(n, 1)
    gw = np.zeros(xs.shape[:-1] + cols_t.shape[-1:], np.float16)
    for i in range(n):
        part = np.matmul(xs[..., i * per:(i + 1) * per].astype(np.float32),
                         cols_t[:, i * per:(i + 1) * per].astype(np.float32))
        gw = (gw.astype(np.float32) + part).astype(np.float16)
    return gw
