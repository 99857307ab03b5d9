"""Eager depthwise convolution (one input and one output channel per group)
in NumPy, without im2col columns.

A depthwise convolution is, per kernel offset, a shifted view of the padded
input times one weight per channel.  Flattening the padded spatial axes
makes every such view a 1-D slice of each channel's row (stride: the
convolution's last stride), if the output is laid out with the padded
input's row pitch: ``q = sum(o_i * R_i)`` where ``R_i`` is the padded
input's element stride of axis ``i`` times ``stride_i / stride_last``.  The
positions of ``q`` that are no output (the tail of each row) are computed
and dropped (the *junk* columns; about ``(k - 1) * d / padded`` of a row
for stride 1).  So each of the ``kk`` multiply-adds runs over long rows
instead of the general path's matmul of a ``[1, kk]`` weight per image and
channel against columns ``kk`` times the input's size (copied first), and
the weight's gradient needs no saved columns: the padded input is enough.
``_conv._ConvEager`` takes this path where the columns would exceed
``COLUMNS_BYTES``, and for the input's gradient alone also at stride 1 with
output rows of at least ``ROWS_MIN``.

1-d and 2-d float32/float64 depthwise convolutions take the backend's
native kernels instead once a process has warmed up (``NATIVE``,
``native_forward`` / ``native_backward``: ``depthwise_kernels``, with the
zero padding inside the loops); the NumPy paths here serve the rest.

Invariant: every result is the sum over kernel offsets in row-major order
of ``w[c, k] * x`` (forward, input gradient; elementwise IEEE products and
adds, so the same bits on every machine) or a dot product per channel
(weight gradient); junk positions never reach a result.  Junk products
``0 * w`` or ``0 * x`` would turn an infinite ``w`` or ``x`` into a NaN, so
the input gradient is taken here only for finite weights and a weight
gradient that comes out non-finite is recomputed from views without junk.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from tracec import fused_eager

# Above this many bytes of im2col columns (the input's size times kk) the
# column-free path is the faster one (measured, float32, one thread: at 150
# MB of columns forward + backward take half the time; at 21 MB the columns
# are 15% faster, their weight gradient being one matmul); it also never
# holds kk copies of the input.
COLUMNS_BYTES = 64 << 20

# The input's gradient (whose bits are the channels-last col2im's) takes
# the column-free path at any size for stride 1 and output rows at least
# this long: measured, float32, one thread, 3x3: [16,48,32,32] 8.0 -> 4.9 ms,
# [16,144,16,16] 4.6 -> 4.1; shorter rows (8, 4) and strided outputs are
# faster channels-last (the junk tail of each row, the rows' overhead).
ROWS_MIN = 16

# images per chunk: this many bytes of one operand's rows, so that the kk
# passes over a chunk stay in cache
CHUNK_BYTES = 1 << 19


class Plan:
    """The flat geometry of one depthwise convolution: ``padded`` (the
    padded input's spatial shape), ``out``, ``step`` (the last stride: the
    flat input step between consecutive junk-layout positions), ``pitch``
    (``R``, the junk layout's strides of the output axes, in elements),
    ``length`` (positions per channel in the junk layout) and ``offsets``
    (each kernel offset's start in the flattened padded input, row-major)."""

    def __init__(self, sp, kernel, stride, low, high, dilation, out):
        self.padded = tuple(s + lo + hi for s, lo, hi in zip(sp, low, high))
        self.out = tuple(out)
        self.kernel = tuple(kernel)
        self.low = tuple(low)
        nsp = len(sp)
        pst = [math.prod(self.padded[i + 1:]) for i in range(nsp)]   # element strides
        self.step = stride[-1]
        self.ok = all(s * p % self.step == 0 for s, p in zip(stride, pst))
        self.pitch = tuple(s * p // self.step for s, p in zip(stride, pst))
        self.length = sum((o - 1) * r for o, r in zip(out, self.pitch)) + 1
        self.offsets = [sum(k * d * p for k, d, p in zip(offs, dilation, pst))
                        for offs in itertools.product(*[range(k) for k in kernel])]
        self.flat = math.prod(self.padded)
        # the views of the strided (element) geometry, for the exact fallback
        self.stride, self.dilation = tuple(stride), tuple(dilation)

    def chunk(self, n: int, c: int, itemsize: int) -> int:
        return max(1, min(n, CHUNK_BYTES // max(1, c * self.length * itemsize)))

    def rows(self, xf: np.ndarray, k: int) -> np.ndarray:
        """``xf`` ``[n, C, flat]``'s view ``[n, C, length]`` read by offset ``k``."""
        off = self.offsets[k]
        return xf[:, :, off:off + self.step * (self.length - 1) + 1:self.step]

    def outputs(self, junk: np.ndarray) -> np.ndarray:
        """The output positions of a junk-layout ``[n, C, length]`` array:
        a strided view ``[n, C, *out]``."""
        it = junk.itemsize
        return np.lib.stride_tricks.as_strided(
            junk, junk.shape[:2] + self.out,
            junk.strides[:2] + tuple(r * it for r in self.pitch), writeable=False)


def pad(a: np.ndarray, plan: Plan) -> np.ndarray:
    """The zero-padded input, contiguous ``[N, C, *padded]``."""
    if plan.padded == tuple(a.shape[2:]):
        return np.ascontiguousarray(a)
    xp = np.zeros(a.shape[:2] + plan.padded, a.dtype)
    xp[(slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, lo in
                                          zip(a.shape[2:], plan.low))] = a
    return xp


def forward(xp: np.ndarray, wk: np.ndarray, plan: Plan) -> np.ndarray:
    """``y[n, c] = sum_k wk[c, k] * window_k(xp[n, c])`` (offsets in
    row-major order), contiguous ``[N, C, *out]``."""
    n, c = xp.shape[:2]
    xf = xp.reshape(n, c, plan.flat)
    y = np.empty((n, c) + plan.out, xp.dtype)
    step = plan.chunk(n, c, xp.itemsize)
    acc = np.empty((step, c, plan.length), xp.dtype)
    tmp = np.empty_like(acc)
    cols = [wk[:, k:k + 1] for k in range(wk.shape[1])]
    with np.errstate(all="ignore"):      # inf * 0 in the padding: a NaN, as im2col's
        _forward_chunks(xf, y, acc, tmp, cols, plan, step)
    return y


def _forward_chunks(xf, y, acc, tmp, cols, plan, step):
    n = xf.shape[0]
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        a, t, part = acc[:m], tmp[:m], xf[n0:n0 + m]
        np.multiply(plan.rows(part, 0), cols[0], out=a)
        for k in range(1, len(cols)):
            np.multiply(plan.rows(part, k), cols[k], out=t)
            a += t
        y[n0:n0 + m] = plan.outputs(a)


def _junk(gd: np.ndarray, plan: Plan, n0: int, m: int, buf: np.ndarray) -> np.ndarray:
    """Images ``n0:n0+m`` of the output gradient in the junk layout, zeros
    at the junk positions."""
    g = buf[:m]
    g.fill(0)
    it = g.itemsize
    dst = np.lib.stride_tricks.as_strided(
        g, g.shape[:2] + plan.out, g.strides[:2] + tuple(r * it for r in plan.pitch))
    dst[...] = gd[n0:n0 + m]
    return g


def weight_grad(xp: np.ndarray, gd: np.ndarray, plan: Plan) -> np.ndarray:
    """``gw[c, k] = sum_{n, o} gd[n, c, o] * window_k(xp[n, c])[o]``,
    ``[C, kk]``: per chunk of images, a product and a pairwise sum along
    each channel's row; then the chunks' sums added."""
    n, c = xp.shape[:2]
    kk = len(plan.offsets)
    xf = xp.reshape(n, c, plan.flat)
    step = plan.chunk(n, c, xp.itemsize)
    buf = np.empty((step, c, plan.length), xp.dtype)
    tmp = np.empty_like(buf)
    parts = np.zeros((kk, (n + step - 1) // step, step, c), xp.dtype)
    with np.errstate(all="ignore"):      # junk 0 * inf: detected below
        for i, n0 in enumerate(range(0, n, step)):
            m = min(step, n - n0)
            g = _junk(gd, plan, n0, m, buf)
            t, part = tmp[:m], xf[n0:n0 + m]
            for k in range(kk):
                np.multiply(plan.rows(part, k), g, out=t)
                np.add.reduce(t, axis=2, out=parts[k, i, :m])
        gw = np.add.reduce(parts.reshape(kk, -1, c), axis=1).T
    if not np.isfinite(gw).all():
        # a junk position read an infinite or NaN input (0 * inf): the
        # same sums from strided views that skip the junk
        gw = np.empty((c, kk), xp.dtype)
        for k, offs in enumerate(itertools.product(*[range(v) for v in plan.kernel])):
            win = xp[(slice(None), slice(None)) + tuple(
                slice(q * d, q * d + (o - 1) * s + 1, s)
                for q, d, o, s in zip(offs, plan.dilation, plan.out, plan.stride))]
            gw[:, k] = np.add.reduce(np.multiply(win, gd).reshape(n, c, -1),
                                     axis=(0, 2))
    return np.ascontiguousarray(gw)


def input_grad(gd: np.ndarray, wk: np.ndarray, plan: Plan) -> np.ndarray:
    """The padded input's gradient ``[N, C, *padded]``: each offset's
    ``wk[c, k] * gd`` added into its window positions, offsets in
    row-major order.  ``wk`` must be finite (junk zeros times it add
    nothing)."""
    n, c = gd.shape[:2]
    gxp = np.zeros((n, c, plan.flat), gd.dtype)
    step = plan.chunk(n, c, gd.itemsize)
    buf = np.empty((step, c, plan.length), gd.dtype)
    tmp = np.empty_like(buf)
    cols = [wk[:, k:k + 1] for k in range(wk.shape[1])]
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        g = _junk(gd, plan, n0, m, buf)
        t, part = tmp[:m], gxp[n0:n0 + m]
        for k in range(len(cols)):
            np.multiply(g, cols[k], out=t)
            dst = plan.rows(part, k)
            dst += t
    return gxp.reshape((n, c) + plan.padded)


# --- native kernels -----------------------------------------------------------------

#: The native kernels (``fused_eager.NativeSet``; the package registers the
#: backend's ``depthwise_kernels.load``): ``forward``, ``input_grad`` and
#: ``weight_grad`` on NumPy arrays.
NATIVE = fused_eager.NativeSet("depthwise convolution", 1 << 20)


def native_kernels(a: np.ndarray, w: np.ndarray):
    """The native kernels for a depthwise convolution of ``a`` (``[N, C,
    L]`` or ``[N, C, H, W]``, float32/float64) by ``w`` (``[C, 1, *k]``),
    or None (see ``fused_eager.NativeSet``)."""
    if a.ndim not in (3, 4) or a.dtype not in (np.float32, np.float64) or w.dtype != a.dtype:
        return None
    return NATIVE.get(a.size)


def _planes(a: np.ndarray, low, high, stride, dilation, out, kernel):
    """The 2-d geometry of a 1-d or 2-d convolution (1-d: height 1)."""
    if a.ndim == 3:
        a = a[:, :, None, :]
        low, high, stride, dilation, out, kernel = ((0,) + tuple(low), (0,) + tuple(high),
                                                   (1,) + tuple(stride),
                                                   (1,) + tuple(dilation), (1,) + tuple(out),
                                                   (1,) + tuple(kernel))
    return a, low, high, stride, dilation, out, kernel


def native_forward(kern, a: np.ndarray, w: np.ndarray, stride, low, high, dilation,
                   out) -> np.ndarray:
    """``[N, C, *out]``: the depthwise convolution by the native kernel
    (the zero padding inside it: no padded copy)."""
    a4, low, high, stride, dilation, out4, kernel = _planes(a, low, high, stride, dilation,
                                                            out, w.shape[2:])
    wk = np.ascontiguousarray(w.reshape(w.shape[0], -1))
    return kern.forward(np.ascontiguousarray(a4), wk, out4, kernel, stride, dilation,
                        low).reshape(a.shape[:2] + tuple(out))


def native_backward(kern, a: np.ndarray, w: np.ndarray, gd: np.ndarray, stride, low, high,
                    dilation, need_x: bool, need_w: bool):
    """``(gx, gw)`` (None where not needed) of the depthwise convolution
    at input ``a`` (as it is now) and weight ``w`` for the output gradient
    ``gd``, by the native kernels."""
    out = gd.shape[2:]
    a4, low, high, stride, dilation, out4, kernel = _planes(a, low, high, stride, dilation,
                                                            out, w.shape[2:])
    g = np.ascontiguousarray(gd).reshape(gd.shape[:2] + tuple(out4))
    gx = gw = None
    if need_w:
        gw = kern.weight_grad(np.ascontiguousarray(a4), g, kernel, stride, dilation,
                              low).reshape(w.shape)
    if need_x:
        wk = np.ascontiguousarray(w.reshape(w.shape[0], -1))
        gx = kern.input_grad(g, wk, a4.shape[2:], kernel, stride, dilation,
                             low).reshape(a.shape)
    return gx, gw
