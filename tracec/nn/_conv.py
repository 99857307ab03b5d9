"""Convolution, pooling and padding as Python over the primitives.

Every window op is im2col: ``pad`` the input, take one strided ``slice`` per
kernel offset, ``concatenate`` them on a window axis ``[N, C, K, *out]``,
then reduce that axis (``reduce_max`` for max pooling, ``reduce_sum`` for
average pooling) or contract it with the weight (``matmul`` for
convolution).  Gradients therefore come from the primitives' VJPs, and the
tracer sees ordinary primitives.

Invariant: nothing here reads tensor data; shapes alone steer the code.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import aten_vec, autocast_mode, fused_eager, graph, ops
from tracec.autograd import Function
from tracec.symbolic import Sym, same
from tracec.tensor import RECORDERS, Tensor, eager_direct
from tracec import aten_report
from tracec.tensor_meta import keep_memory_format
from tracec.nn import _conv_depthwise_eager as _dw
from tracec.nn import _conv_transpose_eager as _ct

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
           "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_avg_pool3d", "pad"]


def _ntuple(v, n: int, name: str) -> tuple:
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of "
                               f"{n} values to match the convolution dimensions, but got "
                               f"{name}={list(v)}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _batched(x: Tensor, nsp: int, name: str):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.ndim == nsp + 1:
        return ops.reshape(x, (1,) + tuple(x.shape)), True
    if x.ndim != nsp + 2:
        raise RuntimeError(_RANK_ERRORS.get(name, _RANK_ERROR).format(
            name=name, a=nsp + 1, b=nsp + 2, ndim=x.ndim, shape=list(x.shape)))
    return x, False


#: PyTorch's wrong-rank messages (each op its own wording)
_RANK_ERROR = ("{name}: Expected {a}D (unbatched) or {b}D (batched) input, but got input of "
               "size: {shape}")
_CONV_RANK = ("Expected {a}D (unbatched) or {b}D (batched) input to {name}, but got input of "
              "size: {shape}")
_RANK_ERRORS = {
    **{n: _CONV_RANK for n in ("conv1d", "conv2d", "conv3d", "conv_transpose1d",
                               "conv_transpose2d", "conv_transpose3d")},
    "max_pool1d": "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch "
                  "size for input, but got:{shape}",
    "max_pool2d": "non-empty 3D or 4D (batch mode) tensor expected for input",
    "max_pool3d": "non-empty 4D or 5D (batch mode) tensor expected for input",
    "avg_pool1d": "Expected 2 to 3 dimensions, but got {ndim}-dimensional tensor for argument #1 "
                  "'self' (while checking arguments for avg_pool1d)",
    "avg_pool3d": "non-empty 4D or 5D (batch mode) tensor expected for input",
}


def _unbatch(y: Tensor, unbatched: bool) -> Tensor:
    return ops.reshape(y, tuple(y.shape[1:])) if unbatched else y


def _windows(x: Tensor, kernel, stride, dilation, out) -> Tensor:
    """``[N, C, *sp]`` -> ``[N, C, prod(kernel), *out]``: the kernel offsets
    in row-major order, each a strided slice of ``x``."""
    n, c = x.shape[:2]
    ones = (1, 1)
    pieces = []
    for offs in itertools.product(*[range(k) for k in kernel]):
        starts = (0, 0) + tuple(o * d for o, d in zip(offs, dilation))
        stops = (n, c) + tuple(s + (o - 1) * st + 1 for s, o, st in zip(starts[2:], out, stride))
        w = ops.slice_(x, starts, stops, ones + tuple(stride))
        pieces.append(ops.reshape(w, (n, c, 1) + tuple(out)))
    return pieces[0] if len(pieces) == 1 else ops.concatenate(pieces, 2)


def _pad_spatial(x: Tensor, low, high, value) -> Tensor:
    if not any(low) and not any(high):
        return x
    z = (0,) * x.ndim
    return ops.pad(x, (0, 0) + tuple(low), (0, 0) + tuple(high), z, value)


# --- convolution ----------------------------------------------------------------------

def _conv_padding(padding, kernel, stride, dilation, nsp):
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nsp, (0,) * nsp
        if padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            if any(t % 2 for t in total):
                warnings.warn("Using padding='same' with even kernel lengths and odd dilation "
                              "may require a zero-padded copy of the input be created "
                              "(Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/"
                              "native/Convolution.cpp:1101.)", stacklevel=4)
            return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        raise RuntimeError(f"Invalid padding string '{padding}', should be one of "
                           "{'valid', 'same'}")
    p = _ntuple(padding, nsp, "padding")
    if any(v < 0 for v in p):
        raise RuntimeError("negative padding is not supported")
    return p, p


def _conv_calls(transposed):
    """ATen's ``convolution``: the batched input's, the weight's and the
    output's shapes (an unbatched input gains a batch of 1)."""
    def calls(out, input, weight, *args):
        nsp = args[-2]
        x, o = tuple(input.shape), tuple(out.shape)
        if len(x) == nsp + 1:
            x, o = (1,) + x, (1,) + o
        return [aten_report.AtenCall("convolution", (x, tuple(weight.shape), o, transposed),
                                     (input.requires_grad, weight.requires_grad))]
    return calls


#: ``Tensor.toString()`` of CPU tensors in PyTorch's oneDNN message
_LEGACY_TYPE = {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor",
                "float16": "torch.HalfTensor", "bfloat16": "CPUBFloat16Type"}


def _mismatch(x, weight):
    """Raise PyTorch's error for an input whose dtype is not the weight's:
    a half-precision input goes to oneDNN where this machine's processor
    lets PyTorch send it there (its message then names legacy type
    strings), anything else to the native kernels' scalar-type check."""
    if x.dtype.name in ("float16", "bfloat16") and aten_vec.onednn_takes(x.dtype.name):
        def name(d):
            return _LEGACY_TYPE.get(d.name, d.name)
        raise RuntimeError(f"Input type ({name(x.dtype)}) and weight type "
                           f"({name(weight.dtype)}) should be the same or input should "
                           "be a MKLDNN tensor and weight is a dense tensor")
    raise RuntimeError(f"expected scalar type {dt.scalar_type_name(x.dtype)} but found "
                       f"{dt.scalar_type_name(weight.dtype)}")


@aten_report.reports(_conv_calls(False))
def _convnd(input, weight, bias, stride, padding, dilation, groups, nsp, name):
    if autocast_mode.ACTIVE:
        input, weight, bias = autocast_mode.lower_precision(input, weight, bias)
    x, unbatched = _batched(input, nsp, name)
    if weight.ndim < 3:
        raise RuntimeError(f"{name}: expected weight to be {nsp + 2}-dimensional, got weight "
                           f"of size {list(weight.shape)}")
    if weight.ndim != nsp + 2:
        # PyTorch sizes stride / padding / dilation by the weight's spatial
        # dimensions, then compares the ranks (a Conv1d built with
        # kernel_size=(1, 2) has a 4-D weight)
        wsp = weight.ndim - 2
        for v, what in ((stride, "stride"), (padding, "padding"), (dilation, "dilation")):
            if not isinstance(v, str):
                _ntuple(tuple(v) if isinstance(v, (list, tuple)) else (v,) * nsp, wsp, what)
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-"
                           f"dimensional weight {list(weight.shape)}, but got {x.ndim}-"
                           f"dimensional input of size {list(x.shape)} instead")
    if x.dtype is not weight.dtype or (bias is not None and bias.dtype is not weight.dtype):
        # PyTorch's CPU checks, in its order and words: the bias against the
        # input (C type names), then the weight (ScalarType names)
        from tracec.shape_ops import _C_TYPE_NAMES
        if bias is not None and bias.dtype is not x.dtype:
            raise RuntimeError(f"Input type ({_C_TYPE_NAMES[x.dtype.name]}) and bias type "
                               f"({_C_TYPE_NAMES[bias.dtype.name]}) should be the same")
        _mismatch(x, weight)
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    _check_weight_groups(weight, groups)
    if groups < 1 or c != cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {cg * groups} channels, "
                           f"but got {c} channels instead")
    stride = _ntuple(stride, nsp, "stride")
    dilation = _ntuple(dilation, nsp, "dilation")
    low, high = _conv_padding(padding, kernel, stride, dilation, nsp)
    sp = tuple(x.shape[2:])
    out = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                for s, lo, hi, k, st, d in zip(sp, low, high, kernel, stride, dilation))
    padded = tuple(s + lo + hi for s, lo, hi in zip(sp, low, high))
    dilated = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if any(p < k for p, k in zip(padded, dilated)):
        # (PyTorch reports the dilated kernel's extent)
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, dilated))}). Kernel size can't be greater "
                           "than actual input size")
    if (x.dtype in (dt.float32, dt.float64) and eager_direct(x) and eager_direct(weight)
            and (bias is None or eager_direct(bias))):
        y = _ConvEager.apply(x, weight, bias, (stride, low, high, dilation, groups, out))
        return _unbatch(y, unbatched)
    if bias is not None and x.dtype in (dt.bfloat16, dt.float16):
        # PyTorch's half-precision convolution adds the bias to the float32
        # accumulator and rounds once (rounding the product, then the sum,
        # lands one ulp away)
        f32 = dt.float32
        y = _conv_prims(ops.cast(x, f32), ops.cast(weight, f32), ops.cast(bias, f32), stride,
                        low, high, dilation, groups, out)
        return _unbatch(ops.cast(y, x.dtype), unbatched)
    keep = [] if RECORDERS and weight.requires_grad else None
    y = _conv_prims(x, weight, bias, stride, low, high, dilation, groups, out, keep)
    if keep:
        # Recording: eagerly, PyTorch's weight gradient reads the input as it
        # is at backward time (a write through ``x.data`` after the conv, as
        # Tacotron2's parse_output does, changes it); the primitives' columns
        # are a copy.  The recorder refreshes them from the input when it
        # refuses the trace over such a write and the call finishes eagerly.
        geometry = (stride, low, high, dilation, groups, out)
        kernel = tuple(weight.shape[2:])
        cols = keep[0]
        for r in list(RECORDERS):
            r(None, (x,), {"conv_columns": lambda: _im2col(x._data, kernel, geometry)
                           .reshape(cols._data.shape)}, cols)
    return _unbatch(y, unbatched)


def _conv_prims(x, weight, bias, stride, low, high, dilation, groups, out, keep=None):
    """The convolution as primitives (traced, and the eager fallback);
    ``keep`` (a list) receives the columns the matmul reads."""
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    nsp = len(kernel)
    cols = _windows(_pad_spatial(x, low, high, 0.0), kernel, stride, dilation, out)
    kk = math.prod(kernel)
    length = math.prod(out)
    if groups == 1:
        cols = ops.reshape(cols, (n, c * kk, length))
        w = ops.reshape(weight, (o, cg * kk))
        y = ops.matmul(w, cols)                                   # [N, O, L]
    else:
        cols = ops.reshape(cols, (n, groups, cg * kk, length))
        w = ops.reshape(weight, (groups, o // groups, cg * kk))
        y = ops.matmul(w, cols)                                   # [N, G, O/G, L]
    if keep is not None:
        keep.append(cols)
    y = ops.reshape(y, (n, o) + out)
    if bias is not None:
        y = ops.add(y, ops.reshape(bias, (1, o) + (1,) * nsp))
    return y


_window_view = _ct.window_view


def _depthwise_col2im(gd: np.ndarray, wk: np.ndarray, padded, windows) -> np.ndarray:
    """The padded input's gradient of a depthwise convolution (one input and
    one output channel per group) from the output's gradient ``gd``
    ``[N, C, *out]`` and the weight ``wk`` ``[C, kk]``: the same products
    ``w[c, k] * g`` (the columns' gradient, an outer product) added into the
    same window positions in the same kernel-offset order as the general
    col2im, so the same bits; but channels-last (``[*sp, N, C]``), so that
    each offset's multiply and strided add run over long contiguous rows
    (the general path's matmul per image and group, and its adds along rows
    of the output's width, cost 3x more)."""
    n, c = gd.shape[:2]
    nsp = gd.ndim - 2
    g_last = np.ascontiguousarray(np.moveaxis(gd, (0, 1), (-2, -1)))     # [*out, N, C]
    gxp = np.zeros(tuple(padded) + (n, c), gd.dtype)
    prod = np.empty_like(g_last)
    for idx, (_, win) in enumerate(windows):
        np.multiply(g_last, wk[:, idx], out=prod)
        dst = gxp[win]
        dst += prod
    return np.moveaxis(gxp, (nsp, nsp + 1), (0, 1))


def _im2col(a: np.ndarray, kernel, geometry) -> np.ndarray:
    """The padded input's windows as columns: ``[N, C*kk, L]``, or
    ``[N, G, C/G*kk, L]`` for grouped convolutions (contiguous)."""
    stride, low, high, dilation, groups, out = geometry
    n, c = a.shape[:2]
    if any(low) or any(high):
        xp = np.zeros((n, c) + tuple(s + lo + hi for s, lo, hi in
                                      zip(a.shape[2:], low, high)), a.dtype)
        xp[(slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, lo in
                                              zip(a.shape[2:], low))] = a
    else:
        xp = a
    cols = np.ascontiguousarray(_window_view(xp, kernel, stride, dilation, out))
    kk, length = math.prod(kernel), math.prod(out)
    if groups == 1:
        return cols.reshape(n, c * kk, length)
    return cols.reshape(n, groups, c // groups * kk, length)


# Bytes of columns one chunk of images holds (above KEEP_BYTES): about a
# core's L2 cache, where the chunk's matmul reads them back (MNIST's second
# convolution's forward: 19.1 -> 17.8 ms with no page faults, measured; 0.5
# to 4 MiB measure alike).
CHUNK_BYTES = 1 << 20


# Up to this many bytes of the whole batch's columns are computed at once
# and kept for the weight's gradient (with a copy of the input, to see a
# write through ``x.data``); larger ones are computed a chunk at a time, in
# the forward and again in the backward.  32 MiB is glibc's largest dynamic
# mmap threshold: a larger block is fresh pages from the OS at every
# allocation (MNIST's second convolution: 42 MB of columns, ~10,000 minor
# page faults a step), while smaller ones can come back from the heap.
# Below it, taking the columns again costs more than keeping them (a second
# im2col: 0.1-0.3 ms of ~1 ms for MNIST's first convolution or a 3-channel
# stem).  (Whether glibc reuses heap memory or faults it back each step is
# history-sensitive: a MobileNetV2 step measured 2 or ~10,000 minor faults,
# 0 or 20 ms of system time, with this path running the same operations.)
KEEP_BYTES = 32 << 20


def _chunks(n: int, per_image: int):
    """``(start, stop)`` ranges over ``n`` images, each holding at most
    ``CHUNK_BYTES`` of columns at ``per_image`` bytes (at least one image)."""
    step = max(1, CHUNK_BYTES // max(1, per_image))
    return [(n0, min(n, n0 + step)) for n0 in range(0, n, step)]


def _column_chunks(a: np.ndarray, kernel, geometry):
    """``(n0, n1, cols)`` per ``_chunks`` range: ``_im2col`` of images
    ``n0:n1``, written into one padded-input buffer and one columns buffer
    that every chunk reuses (a fresh array per chunk is fresh pages from the
    OS, whose faults cost 20 ms of system time a MobileNetV2 step,
    measured).  Each ``cols`` is valid until the next one is yielded."""
    stride, low, high, dilation, groups, out = geometry
    n, c = a.shape[:2]
    kk, length = math.prod(kernel), math.prod(out)
    spans = _chunks(n, c * kk * length * a.itemsize)
    step = spans[0][1]
    sp = a.shape[2:]
    xp = None
    if any(low) or any(high):
        xp = np.zeros((step, c) + tuple(s + lo + hi for s, lo, hi in zip(sp, low, high)),
                      a.dtype)
        inner = (slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, lo in zip(sp, low))
    buf = np.empty((step, c) + tuple(kernel) + tuple(out), a.dtype)
    shape = (c * kk, length) if groups == 1 else (groups, c // groups * kk, length)
    for n0, n1 in spans:
        m = n1 - n0
        if xp is None:
            src = a[n0:n1]
        else:
            src = xp[:m]
            src[inner] = a[n0:n1]      # the border stays zero
        np.copyto(buf[:m], _window_view(src, kernel, stride, dilation, out))
        yield n0, n1, buf[:m].reshape((m,) + shape)


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` (one float dtype and shape) hold the same
    bits: an integer compare, 6x faster than ``array_equal(equal_nan=True)``
    (no NaN masks) and stricter (a changed NaN payload or zero's sign
    differs), which only sends a caller to recompute from ``a``."""
    u = _UINT[a.itemsize]
    return bool(np.array_equal(a.view(u), b.view(u)))


class _ConvEager(Function):
    """``_conv_prims`` run eagerly in NumPy: the padded input's windows
    copied once into the im2col matrix (the primitive path's pad, one
    strided slice per kernel offset and a concatenate cost 4x that), the
    same per-image ``matmul`` (so the same values), and a backward that
    accumulates the columns' gradient into one padded buffer (col2im) in
    place of a padded copy per kernel offset and their sum.  The batch's
    columns are kept for the weight's gradient up to ``KEEP_BYTES``; larger
    ones (and any without a weight gradient) live one cache-sized chunk of
    images at a time (``CHUNK_BYTES``), the backward taking them again from
    the input.  Double backward (``create_graph``) takes the primitive
    path's gradient."""

    node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias, geometry):
        stride, low, high, dilation, groups, out = geometry
        a, w = x._data, weight._data
        n = a.shape[0]
        o, cg = w.shape[:2]
        kernel = w.shape[2:]
        plan = None
        native = _dw.native_kernels(a, w) if cg == 1 and o == groups else None
        ctx.native = native
        if native is not None:
            # a depthwise convolution by the native kernels (no columns;
            # the weight's gradient pads the input again as it is then)
            y = _dw.native_forward(native, a, w, stride, low, high, dilation, out)
            if bias is not None:
                y += bias._data.reshape((1, o) + (1,) * len(kernel))
            ctx.save_for_backward(x, weight, bias)
            ctx.geometry, ctx.plan, ctx.cols, ctx.x_seen = geometry, None, None, None
            return Tensor._make(y, x.dtype)
        if cg == 1 and o == groups and a.nbytes * math.prod(kernel) > _dw.COLUMNS_BYTES:
            plan = _dw.Plan(a.shape[2:], kernel, stride, low, high, dilation, out)
            plan = plan if plan.ok else None
        ctx.plan = plan
        if plan is not None:
            # a depthwise convolution whose columns would be large: kk
            # multiply-adds over rows of the padded input, no columns (see
            # _conv_depthwise_eager); the weight's gradient reads the padded
            # input.  Smaller ones are faster as im2col and matmul (also
            # with the columns taken again in the backward: [16,96,32,32],
            # 3x3, 31 against 38 ms forward and backward, measured)
            cols = _dw.pad(a, plan)
            y = _dw.forward(cols, w.reshape(o, -1), plan)
        else:
            # im2col a few images at a time, each chunk's matmul reading its
            # columns while they are still in cache (the whole batch's
            # columns written out, then read back, cost 25% more: measured
            # on MNIST's second convolution); the same per-image matmuls, so
            # the same values
            kk = math.prod(kernel)
            wm = w.reshape(o, cg * kk) if groups == 1 else \
                w.reshape(groups, o // groups, cg * kk)
            per_image = a.shape[1] * kk * math.prod(out) * a.itemsize
            if ctx.needs_input_grad[1] and n * per_image <= KEEP_BYTES:
                cols = _im2col(a, kernel, geometry)
                y = np.matmul(wm, cols)
            else:
                cols = None
                y = np.empty((n,) + wm.shape[:-1] + (math.prod(out),), a.dtype)
                for n0, n1, chunk in _column_chunks(a, kernel, geometry):
                    np.matmul(wm, chunk, out=y[n0:n1])
            y = y.reshape((n, o) + tuple(out))
        if bias is not None:
            y += bias._data.reshape((1, o) + (1,) * len(kernel))
        ctx.save_for_backward(x, weight, bias)
        ctx.geometry = geometry
        # PyTorch's weight gradient reads the saved input as it is at
        # backward time, and a write through ``x.data`` (Tacotron2's
        # parse_output masking the mel frames the postnet read) changes it
        # without a version bump: the im2col path takes its columns again
        # from ``x`` in the backward (chunk by chunk, in cache: cheaper than
        # allocating the batch's columns) unless they fit KEEP_BYTES;
        # kept columns, and the depthwise plan's padded input, are kept
        # with a copy of the input they came from
        keep = cols is not None and ctx.needs_input_grad[1]
        ctx.cols = cols if keep else None
        ctx.x_seen = a.copy() if keep else None
        return Tensor._make(y, x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, weight, bias = ctx.saved_tensors
        geometry = ctx.geometry
        stride, low, high, dilation, groups, out = geometry
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if graph.is_grad_enabled():
            # create_graph: the primitives' gradient, itself differentiable
            from tracec.autograd import grad as _grad
            wrt = [t for t, nd in ((x, need_x), (weight, need_w), (bias, need_b)) if nd]
            with graph.enable_grad():
                y = _conv_prims(x, weight, bias, *geometry)
            it = iter(_grad(y, wrt, g, create_graph=True, allow_unused=True))
            return tuple(next(it) if nd else None for nd in (need_x, need_w, need_b)) + (None,)
        gd, w = g._data, weight._data
        n, o = gd.shape[:2]
        cg = w.shape[1]
        kernel = w.shape[2:]
        kk, length = math.prod(kernel), math.prod(out)
        shape = (n, o // groups, length) if groups == 1 else (n, groups, o // groups, length)
        g3 = gd.reshape(shape)
        gx = gw = gb = None
        plan = ctx.plan
        if ctx.native is not None:
            gx, gw = _dw.native_backward(ctx.native, x._data, w, gd, stride, low, high,
                                         dilation, need_x, need_w)
            if need_b:
                gb = Tensor._make(np.add.reduce(gd, axis=(0,) + tuple(range(2, gd.ndim))),
                                  bias.dtype)
            return (None if gx is None else Tensor._make(gx, x.dtype),
                    None if gw is None else Tensor._make(gw, weight.dtype), gb, None)
        if need_w:
            if plan is not None:
                cols = ctx.cols
                if not _same_bits(x._data, ctx.x_seen):
                    cols = _dw.pad(x._data, plan)
                gw = _dw.weight_grad(cols, gd, plan)
            elif ctx.cols is not None and _same_bits(x._data, ctx.x_seen):
                gw = np.add.reduce(np.matmul(g3, np.swapaxes(ctx.cols, -1, -2)), axis=(0,))
            else:
                # the columns again, a few images at a time (see forward)
                a = x._data
                for n0, n1, cols in _column_chunks(x._data, kernel, geometry):
                    part = np.add.reduce(np.matmul(g3[n0:n1], np.swapaxes(cols, -1, -2)),
                                         axis=(0,))
                    gw = part if gw is None else np.add(gw, part, out=gw)
            gw = Tensor._make(gw.reshape(w.shape), weight.dtype)
        if need_b:
            gb = Tensor._make(np.add.reduce(gd, axis=(0,) + tuple(range(2, gd.ndim))),
                              bias.dtype)
        if need_x:
            a = x._data
            wm = w.reshape(o, cg * kk) if groups == 1 else \
                w.reshape(groups, o // groups, cg * kk)
            wt = np.swapaxes(wm, -1, -2)
            sp = a.shape[2:]
            padded = tuple(s + lo + hi for s, lo, hi in zip(sp, low, high))
            windows = [(offs, tuple(slice(q * d, q * d + (m - 1) * t + 1, t)
                                    for q, d, m, t in zip(offs, dilation, out, stride)))
                       for offs in itertools.product(*[range(k) for k in kernel])]
            if (plan is None and cg == 1 and o == groups and all(t == 1 for t in stride)
                    and out[-1] >= _dw.ROWS_MIN):
                # long output rows: the column-free col2im (the same bits)
                plan = _dw.Plan(sp, kernel, stride, low, high, dilation, out)
            if plan is not None and plan.ok and np.isfinite(w).all():
                gxp = _dw.input_grad(gd, w.reshape(o, kk), plan)
            elif cg == 1 and o == groups:
                gxp = _depthwise_col2im(gd, w.reshape(o, kk), padded, windows)
            else:
                # The columns' gradient, then col2im: each kernel offset's
                # columns added into its window positions (a strided view of
                # the padded gradient); a few images at a time, so that the
                # columns are still in cache when added (and never all in
                # memory).
                gxp = np.zeros(a.shape[:2] + padded, a.dtype)
                step = max(1, (8 << 20) // max(1, a.shape[1] * kk * length * a.itemsize))
                for n0 in range(0, n, step):
                    gcols = np.matmul(wt, g3[n0:n0 + step])
                    gcols = gcols.reshape((-1,) + a.shape[1:2] + tuple(kernel) + tuple(out))
                    part = gxp[n0:n0 + step]
                    for offs, win in windows:
                        dst = part[(slice(None), slice(None)) + win]
                        dst += gcols[(slice(None), slice(None)) + offs]
            if any(low) or any(high):
                gxp = np.ascontiguousarray(gxp[(slice(None), slice(None)) + tuple(
                    slice(lo, lo + s) for s, lo in zip(sp, low))])
            gx = Tensor._make(np.ascontiguousarray(gxp), x.dtype)
        return gx, gw, gb, None


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    # (PyTorch's result is channels-last when the input or the weight is)
    return keep_memory_format(_convnd(input, weight, bias, stride, padding, dilation, groups, 2,
                                      "conv2d"), input, weight)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    # (PyTorch's result is channels-last when the input or the weight is)
    return keep_memory_format(_convnd(input, weight, bias, stride, padding, dilation, groups, 3,
                                      "conv3d"), input, weight)


def _flip(x: Tensor, axes) -> Tensor:
    for a in axes:
        n = x.shape[a]
        idx = Tensor._make(np.arange(n - 1, -1, -1, dtype=np.int64), dt.int64)
        x = ops.take(x, idx, a)
    return x


def _check_weight_groups(weight, groups):
    """PyTorch's check_shape_forward on the weight's first dimension
    (output channels, or input channels transposed) against ``groups``,
    before the channels are compared: at least ``groups`` of them (a Conv2d
    with zero output channels is refused), a multiple of ``groups``.  (Its
    second message prints the sizes in brackets twice.)"""
    o = weight.shape[0]
    if groups >= 1 and (o < groups or o % groups):
        size = list(weight.shape)
        raise RuntimeError(f"Given groups={groups}, expected weight to be "
                           + (f"at least {groups} at dimension 0, but got weight of size {size} "
                              if o < groups else f"divisible by {groups} at dimension 0, but "
                              f"got weight of size [{size}] ") + "instead")


@aten_report.reports(_conv_calls(True))
def _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                      dilation, nsp, name):
    """The adjoint of a strided convolution: spread the input with
    ``stride - 1`` zeros between elements (``pad``'s interior), pad by
    ``d*(k-1) - p``, and correlate with the flipped, channel-swapped weight."""
    if autocast_mode.ACTIVE:
        input, weight, bias = autocast_mode.lower_precision(input, weight, bias)
    x, unbatched = _batched(input, nsp, name)
    n, c = x.shape[:2]
    cin, og = weight.shape[:2]
    _check_weight_groups(weight, groups)
    if c != cin:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(x.shape)} to have {cin} channels, but got {c} channels "
                           "instead")
    if x.dtype is not weight.dtype:
        # (PyTorch's transposed convolution checks the weight first; the
        # correlation below would name the bias)
        _mismatch(x, weight)
    kernel = tuple(weight.shape[2:])
    stride = _ntuple(stride, nsp, "stride")
    padding = _ntuple(padding, nsp, "padding")
    output_padding = _ntuple(output_padding, nsp, "output_padding")
    dilation = _ntuple(dilation, nsp, "dilation")
    for op_, st, d in zip(output_padding, stride, dilation):
        if op_ >= st and op_ >= d:
            raise RuntimeError("output padding must be smaller than either stride or dilation")
    if (x.dtype in (dt.float32, dt.float64, dt.float16) and x.dtype is weight.dtype
            and groups >= 1
            and cin % groups == 0 and eager_direct(x) and eager_direct(weight)
            and (bias is None or (eager_direct(bias) and bias.dtype is x.dtype
                                  and tuple(bias.shape) == (og * groups,)))
            and all(o > 0 for o in _ct.output_shape(x.shape[2:], kernel, stride, padding,
                                                    output_padding, dilation))):
        def prims(x_, w_, b_):
            return _conv_transpose_prims(x_, w_, b_, stride, padding, output_padding,
                                         groups, dilation, nsp, name)
        y = _ct.ConvTransposeEager.apply(x, weight, bias, (stride, padding, output_padding,
                                                           dilation, groups), prims)
        return _unbatch(y, unbatched)
    return _unbatch(_conv_transpose_prims(x, weight, bias, stride, padding, output_padding,
                                          groups, dilation, nsp, name), unbatched)


def _conv_transpose_prims(x, weight, bias, stride, padding, output_padding, groups,
                          dilation, nsp, name):
    """The transposed convolution as primitives (traced, and the eager
    fallback); ``x`` batched, arguments normalized."""
    cin, og = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    low = [d * (k - 1) - p for k, d, p in zip(kernel, dilation, padding)]
    high = [lo + op_ for lo, op_ in zip(low, output_padding)]
    z = (0, 0)
    xs = ops.pad(x, z + tuple(max(v, 0) for v in low), z + tuple(max(v, 0) for v in high),
                 z + tuple(s - 1 for s in stride), 0.0)
    if any(v < 0 for v in low + high):  # padding larger than the kernel reach: crop
        starts = z + tuple(max(-v, 0) for v in low)
        stops = tuple(xs.shape[:2]) + tuple(s - max(-v, 0) for s, v in zip(xs.shape[2:], high))
        xs = ops.slice_(xs, starts, stops, (1,) * xs.ndim)
    # weight [Cin, O/G, *k] -> [O, Cin/G, *k], flipped spatially.
    w = ops.reshape(weight, (groups, cin // groups, og) + kernel)
    w = ops.transpose(w, (0, 2, 1) + tuple(range(3, 3 + nsp)))
    w = ops.reshape(w, (groups * og, cin // groups) + kernel)
    w = _flip(w, range(2, 2 + nsp))
    return _convnd(xs, w, bias, 1, 0, dilation, groups, nsp, name)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 1, "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 2, "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 3, "conv_transpose3d")


# --- pooling -------------------------------------------------------------------------

def _pool_geometry(x, kernel, stride, padding, dilation, ceil_mode, nsp, name):
    kernel = _ntuple(kernel, nsp, "kernel_size")
    stride = kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else _ntuple(stride, nsp, "stride")
    padding = _ntuple(padding, nsp, "padding")
    dilation = _ntuple(dilation, nsp, "dilation")
    if any(k <= 0 for k in kernel) or any(s <= 0 for s in stride) or any(
            d <= 0 for d in dilation):
        raise RuntimeError(f"{name}: kernel_size, stride and dilation must be greater than "
                           f"zero, but got kernel_size={list(kernel)} stride={list(stride)} "
                           f"dilation={list(dilation)}")
    for p, k, d in zip(padding, kernel, dilation):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, "
                               f"but got pad={p}, kernel_size={k} and dilation={d}")
    sp = tuple(x.shape[2:])
    out, extra = [], []
    for s, k, st, p, d in zip(sp, kernel, stride, padding, dilation):
        eff = d * (k - 1) + 1
        num = s + 2 * p - eff
        if ceil_mode:
            o = -(-num // st) + 1
            if (o - 1) * st >= s + p:
                o -= 1
        else:
            o = num // st + 1
        out.append(o)
        extra.append(max(0, (o - 1) * st + eff - (s + 2 * p)))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, x.shape[1:]))}). Calculated "
                           f"output size: ({'x'.join(map(str, (x.shape[1],) + tuple(out)))}). "
                           "Output size is too small")
    return kernel, stride, padding, dilation, tuple(out), tuple(extra)


def _lowest(d: dt.DType):
    return -math.inf if d.is_floating_point else int(np.iinfo(d.np).min)


def _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                nsp, name):
    x, unbatched = _batched(input, nsp, name)
    kernel, stride, padding, dilation, out, extra = _pool_geometry(
        x, kernel_size, stride, padding, dilation, ceil_mode, nsp, name)
    if (not return_indices and x.dtype.is_floating_point and kernel == stride
            and not any(padding) and not any(extra) and all(d == 1 for d in dilation)):
        if eager_direct(x) and x.dtype is not dt.bfloat16:
            y = _MAX_POOL_EAGER[len(kernel)].apply(x, tuple(kernel), tuple(out))
            if y is not None:
                return _unbatch(y, unbatched)
        return _unbatch(_max_pool_tiled(x, kernel, out), unbatched)
    high = tuple(p + e for p, e in zip(padding, extra))
    cols = _windows(_pad_spatial(x, padding, high, _lowest(x.dtype)), kernel, stride,
                    dilation, out)
    # argmax + gather rather than reduce_max: the gradient goes to the first
    # maximum of each window, as in PyTorch (reduce_max would split ties).
    n, c = cols.shape[:2]
    arg = ops.reshape(ops.argmax(cols, 2), (n, c, 1) + out)
    y = _unbatch(ops.reshape(ops.gather(cols, arg, 2), (n, c) + out), unbatched)
    if not return_indices:
        return y
    # The flat input position of every window element, taken through the
    # same pipeline from an iota; the argmax picks from it.
    sp = tuple(x.shape[2:])
    pos = ops.reshape(ops.iota((math.prod(sp),), dt.int64, 0, like=x), (1, 1) + sp)
    pos = _windows(_pad_spatial(pos, padding, high, -1), kernel, stride, dilation, out)
    pos = ops.broadcast_to(pos, tuple(cols.shape))
    idx = ops.reshape(ops.gather(pos, arg, 2), (n, c) + out)
    return y, _unbatch(idx, unbatched)


class _MaxPoolTiledEager(Function):
    """``_max_pool_tiled`` run eagerly in NumPy: one copy of the input with
    each window's elements last, ``argmax``, a take: the same value and the
    same chosen element (the first maximum in row-major order), for a
    fraction of the primitive path's passes over 6-D strided views (the
    MNIST CNN's pool: ~100 of 500 ms a step).  The gradient is a ``where``
    on the constant one-hot of the choice, so double backward works.
    ``forward`` gives None (the caller takes the primitive path) where a
    window holds a NaN: PyTorch picks its last NaN, ``argmax`` the first."""

    node_name = "MaxPool2DWithIndicesBackward0"

    @staticmethod
    def forward(ctx, x, kernel, out):
        from tracec.ops.elementwise import _where_impl
        a = x._data
        if np.isnan(a).any():
            return None
        n, c = a.shape[:2]
        nsp = len(kernel)
        crop = tuple(o * k for o, k in zip(out, kernel))
        a = a[(slice(None), slice(None)) + tuple(slice(0, v) for v in crop)]
        tiled = (n, c) + tuple(v for o, k in zip(out, kernel) for v in (o, k))
        # window positions first: [k1, k2, .., N, C, o1, o2, ..], one copy
        perm = tuple(3 + 2 * i for i in range(nsp)) + (0, 1) + tuple(2 + 2 * i
                                                                     for i in range(nsp))
        k = math.prod(kernel)
        win = a.reshape(tiled).transpose(perm).reshape((k, n, c) + tuple(out))
        # The scan of PyTorch's kernel: a later element wins only if greater
        # (the first maximum stays), elementwise over whole planes
        # (np.argmax over a last axis of 4 costs more than the copy).
        best = win[0]
        arg = np.zeros(best.shape, np.int32)
        for j in range(1, k):
            take = win[j] > best
            best = _where_impl(take, win[j], best)
            arg += take * (np.int32(j) - arg)      # where(take, j, arg), branch-free
        ctx.geometry = (tuple(x.shape), crop, tiled, perm, k, tuple(kernel))
        ctx.arg = arg
        return Tensor._make(np.ascontiguousarray(best), x.dtype)

    @staticmethod
    def backward(ctx, g):
        shape, crop, tiled, perm, k, kernel = ctx.geometry
        if not graph.is_grad_enabled():
            return _max_pool_tiled_grad(ctx.arg, g, shape, crop, tiled, kernel), None, None
        onehot = Tensor._make(np.arange(k, dtype=np.int32).reshape((k,) + (1,) * ctx.arg.ndim)
                              == ctx.arg, dt.bool_)
        gw = TF.where(onehot, ops.reshape(g, (1,) + tuple(g.shape)), 0.0)
        gw = ops.reshape(gw, kernel + tuple(g.shape))
        inverse = tuple(perm.index(i) for i in range(len(perm)))
        gx = ops.reshape(ops.transpose(gw, inverse), tuple(shape[:2]) + crop)
        if crop != tuple(shape[2:]):    # floor mode dropped trailing rows: they get zeros
            full = tuple(shape[:2]) + crop
            gx = ops.pad(gx, (0,) * len(shape), tuple(s - v for s, v in zip(shape, full)),
                         (0,) * len(shape), 0.0)
        return gx, None, None


_UINT = {4: np.uint32, 8: np.uint64, 2: np.uint16}


def _max_pool_tiled_grad(arg, g: Tensor, shape, crop, tiled, kernel) -> Tensor:
    """``_MaxPoolTiledEager``'s gradient in NumPy (no create_graph): each
    window position's ``where(arg == j, g, 0)`` written as a bit select
    straight into its strided place in the input-shaped result, where the
    differentiable form's window-first gradient was transposed by a copy of
    6-D strided views (inner loops of k2 elements): the same values."""
    gd = g._data
    u = _UINT[gd.dtype.itemsize]
    gu = np.ascontiguousarray(gd).view(u)
    out = np.empty(tiled, gd.dtype)
    outu = out.view(u)
    m = np.empty(gd.shape, u)
    nsp = len(kernel)
    for j, offs in enumerate(itertools.product(*[range(kk) for kk in kernel])):
        dst = outu[(slice(None), slice(None)) + tuple(
            v for i in range(nsp) for v in (slice(None), offs[i]))]
        np.subtract(0, np.equal(arg, j), out=m, dtype=u)    # all ones where chosen
        np.bitwise_and(gu, m, out=dst)
    gx = out.reshape(tuple(shape[:2]) + tuple(crop))
    if tuple(crop) != tuple(shape[2:]):    # floor mode dropped trailing rows: zeros
        full = np.zeros(shape, gd.dtype)
        full[(slice(None), slice(None)) + tuple(slice(0, v) for v in crop)] = gx
        gx = full
    return Tensor._make(gx, g.dtype)


# PyTorch's node names (1-D pooling runs as 2-D and a squeeze there).
_MAX_POOL_EAGER = {nsp: type(f"_MaxPoolTiledEager{nsp}d", (_MaxPoolTiledEager,),
                             {"node_name": name})
                   for nsp, name in ((1, "SqueezeBackward1"), (2, "MaxPool2DWithIndicesBackward0"),
                                     (3, "MaxPool3DWithIndicesBackward0"))}


def _same_sizes(a, b) -> bool:
    """Sizes equal structurally (symbolic ones by expression, making no
    guard): a crop to a symbolic window multiple is taken as a slice, a
    no-op wherever the sizes happen to agree, rather than a size guard on
    the parity of the image (a version per parity, per size)."""
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _max_pool_tiled(x: Tensor, kernel, out) -> Tensor:
    """Max pooling over non-overlapping windows (kernel == stride, no padding,
    no dilation): one strided slice of ``x`` per window position, scanned
    elementwise.  The value and the whole gradient are the chosen element's:
    the first maximum of the window in row-major order, or its last NaN, as
    PyTorch chooses.

    The output is the scan's ``where`` chain itself: ``where``'s VJP sends
    each gradient to the branch it took, so it reaches exactly the chosen
    element (every other element gets a zero), and the slices' VJPs are
    disjoint strided zero pads whose sum the cpu backend writes window by
    window (padsum.py).  The value is the chosen element bit for bit (signed
    zeros and NaN payloads included): nothing is computed on it."""
    n, c = x.shape[:2]
    crop = tuple(o * k for o, k in zip(out, kernel))
    if not _same_sizes(crop, x.shape[2:]):  # floor mode drops the trailing rows
        x = ops.slice_(x, (0,) * x.ndim, (n, c) + crop, (1,) * x.ndim)
    # PyTorch's scan over the window in row-major order: an element replaces
    # the best so far if it is greater or NaN.
    ones = (1,) * x.ndim
    best = None
    for offs in itertools.product(*[range(kk) for kk in kernel]):
        v = ops.slice_(x, (0, 0) + offs, (n, c) + crop, ones[:2] + tuple(kernel))
        if best is None:
            best = v
            continue
        best = ops.where(ops.logical_or(ops.gt(v, best), ops.ne(v, v)), v, best)
    return ops.reshape(best, (n, c) + tuple(out))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 1, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    out = _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                      return_indices, 2, "max_pool2d")
    # (with indices: both are views of one private result, left row-major)
    return out if return_indices else keep_memory_format(out, input)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    out = _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                      return_indices, 3, "max_pool3d")
    # (with indices: both are views of one private result, left row-major)
    return out if return_indices else keep_memory_format(out, input)


def _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override, nsp, name):
    if isinstance(input, Tensor) and not input.dtype.is_floating_point:
        if input.dtype is not dt.int64:
            # PyTorch's CPU kernels take floating types and int64 only
            kernel = "avg_pool3d_out_frame" if nsp == 3 else "avg_pool2d"
            raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                      f"'{dt.scalar_type_name(input.dtype)}'")
        # int64: each window's sum divided as C++ integers do (truncated
        # toward zero, as the cast back truncates); float64 holds the sums
        # and quotients exactly enough (|sum| < 2**53) for that to be the
        # integer quotient
        y = _avg_poolnd(ops.cast(input, dt.float64), kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override, nsp, name)
        return ops.cast(y, dt.int64)
    args = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nsp,
            name)
    if isinstance(input, Tensor) and input.dtype in (dt.float16, dt.bfloat16):
        # PyTorch's kernel sums a window in float32 and rounds the mean once;
        # its backward is the half ops' (each share rounded): the half
        # composite's gradient, plus its value's exact (Sterbenz) step to
        # the float32 one, as a constant
        y = _avg_pool_windows(input, *args)
        y32 = ops.cast(_avg_pool_windows(ops.cast(input, dt.float32), *args), input.dtype)
        return ops.add(y, ops.stop_gradient(ops.sub(y32, y)))
    return _avg_pool_windows(input, *args)


def _avg_pool_windows(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override, nsp, name):
    x, unbatched = _batched(input, nsp, name)
    kernel, stride, padding, _, out, extra = _pool_geometry(
        x, kernel_size, stride, padding, 1, ceil_mode, nsp, name)
    ones = (1,) * nsp
    if kernel == stride and not any(padding) and not any(extra):
        # Non-overlapping windows (ResNet's avg_pool2d(out, 4), global
        # pools): a reshape to [N, C, o1, k1, o2, k2, ...] and one reduction,
        # with no window copies; taps stacked one by one would make a chain
        # of k1*k2 adds in the gradient.
        crop = tuple(o * k for o, k in zip(out, kernel))
        n, c = x.shape[:2]
        if nsp == 2 and isinstance(x, Tensor):
            # large: native kernels, the images as the rows of one batch
            sp = tuple(x.shape[2:])
            y = fused_eager.nary(
                (x,), ((-1,) + sp,), ("avg_pool2d", *kernel, divisor_override or 0),
                lambda t: _avg_poolnd(t, kernel, kernel, 0, False, True, divisor_override,
                                      2, name),
                "AvgPool2DBackward0", out_shape=(n, c) + tuple(out), examples=((2,) + sp,))
            if y is not None:
                return _unbatch(y, unbatched)
        if not _same_sizes(crop, x.shape[2:]):  # floor mode drops the trailing rows
            x = ops.slice_(x, (0,) * x.ndim, (n, c) + crop, (1,) * x.ndim)
        tiled = ops.reshape(x, (n, c) + tuple(v for o, k in zip(out, kernel) for v in (o, k)))
        total = ops.reduce_sum(tiled, tuple(3 + 2 * i for i in range(nsp)))
        div = float(divisor_override) if divisor_override else float(math.prod(kernel))
        return _unbatch(ops.div(total, div), unbatched)
    high = tuple(p + e for p, e in zip(padding, extra))
    cols = _windows(_pad_spatial(x, padding, high, 0.0), kernel, stride, ones, out)
    total = ops.reduce_sum(cols, (2,))
    if divisor_override:
        y = ops.div(total, float(divisor_override))
    elif not any(extra) and (count_include_pad or not any(padding)):
        y = ops.div(total, float(math.prod(kernel)))
    else:
        # Count the window elements that PyTorch divides by: those inside the
        # input, plus the explicit padding when count_include_pad.
        sp = tuple(x.shape[2:])
        cnt = ops.full((1, 1) + sp, 1.0, x.dtype, like=x)
        cnt = _pad_spatial(cnt, padding, padding, 1.0 if count_include_pad else 0.0)
        cnt = _pad_spatial(cnt, (0,) * nsp, extra, 0.0)
        cnt = ops.reduce_sum(_windows(cnt, kernel, stride, ones, out), (2,))
        y = ops.div(total, cnt)
    return _unbatch(y, unbatched)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _saving_input(_avg_poolnd(input, kernel_size, stride, padding, ceil_mode,
                                     count_include_pad, None, 1, "avg_pool1d"), input)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _saving_input(keep_memory_format(_avg_poolnd(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
        "avg_pool2d"), input), input)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _saving_input(keep_memory_format(_avg_poolnd(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
        "avg_pool3d"), input), input)


def _saving_input(out, input):
    """PyTorch's AvgPool2D / 3D and AdaptiveAvgPool2D / 3D nodes save their
    input: a second backward without retain_graph raises there, as PyTorch's
    (tracec's windowed sums need no saved tensor).  (Not a node of the
    caller's: a pooling that is the identity may return ``input``.)"""
    if out is not input:
        graph.saves_operands(out)
    return out


def _adaptive_avg(x: Tensor, axis: int, out: int) -> Tensor:
    """Mean over PyTorch's adaptive bins [floor(i*n/out), ceil((i+1)*n/out))
    along one axis (the op is separable)."""
    n = x.shape[axis]
    if out == n:
        return x
    if n % out == 0:
        k = n // out
        if not _same_sizes((out * k,), (n,)):
            # a symbolic n (divisible, by the guard above): the slice to
            # out*k takes all of it and makes the reshape's sizes agree
            # structurally (no size equation to specialize on)
            stops = tuple(out * k if j == axis else s for j, s in enumerate(x.shape))
            x = ops.slice_(x, (0,) * x.ndim, stops, (1,) * x.ndim)
        shape = tuple(x.shape[:axis]) + (out, k) + tuple(x.shape[axis + 1:])
        return TF.mean(ops.reshape(x, shape), axis + 1)
    pieces = []
    for i in range(out):
        a, b = (i * n) // out, -(-((i + 1) * n) // out)
        starts = tuple(a if j == axis else 0 for j in range(x.ndim))
        stops = tuple(b if j == axis else s for j, s in enumerate(x.shape))
        pieces.append(TF.mean(ops.slice_(x, starts, stops, (1,) * x.ndim), axis, keepdim=True))
    return ops.concatenate(pieces, axis)


def _adaptive_avg_poolnd(input, output_size, nsp, name):
    x, unbatched = _batched(input, nsp, name)
    size = output_size if isinstance(output_size, (list, tuple)) else (output_size,) * nsp
    if len(size) != nsp:
        raise RuntimeError(f"{name}: output_size must be {nsp} values, got {output_size}")
    size = tuple(x.shape[2 + i] if o is None else int(o) for i, o in enumerate(size))
    if not (x.dtype.is_floating_point or x.dtype.is_complex) and any(o != 1 for o in size):
        # PyTorch's kernels (an all-ones output goes through mean(), whose
        # own error then names the dtype)
        kernel = "adaptive_avg_pool3d_cpu" if nsp == 3 else "adaptive_avg_pool2d"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{dt.scalar_type_name(x.dtype)}'")
    if nsp > 1 and all(o == 1 for o in size):
        # Global average pooling (ResNet's head): PyTorch's adaptive_avg_pool2d
        # and 3d take mean() over the spatial axes for an all-ones output;
        # one reduction over the trailing axes (the per-axis bins below
        # reduce a strided middle axis: 1.6 ms against PyTorch's 0.06 for
        # [64, 64, 16, 16], measured)
        # (on the input as given: an unbatched one's result is mean's too)
        return keep_memory_format(TF.mean(input, tuple(range(input.ndim - nsp, input.ndim)),
                                          keepdim=True), input)
    half = x.dtype if x.dtype in (dt.bfloat16, dt.float16) else None
    if half is not None:      # in float32 over every axis, rounded once (PyTorch's kernel)
        x = ops.cast(x, dt.float32)
    x0 = x
    for i, o in enumerate(size):
        x = _adaptive_avg(x, 2 + i, o)
    if half is not None:
        x = ops.cast(x, half)
    elif x is x0:    # every bin one element: a new tensor, as PyTorch's
        from tracec.shape_ops import clone
        x = clone(x)
    return _saving_input(keep_memory_format(_unbatch(x, unbatched), input), input)  # (as PyTorch's kernel)


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg_poolnd(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size):
    return _adaptive_avg_poolnd(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg_poolnd(input, output_size, 3, "adaptive_avg_pool3d")


# --- padding ---------------------------------------------------------------------------

def _index_table(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    if mode == "circular":
        # As PyTorch: negative amounts crop first; the rest wraps around
        # the cropped length.
        c0, c1 = max(-lo, 0), max(-hi, 0)
        m = n - c0 - c1
        return np.mod(np.arange(-max(lo, 0), m + max(hi, 0)), m) + c0
    i = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    # reflect: mirror without repeating the edge
    period = 2 * (n - 1)
    i = np.mod(i, period) if period else np.zeros_like(i)
    return np.where(i >= n, period - i, i)


def _symbolic_index_table(x, n, lo: int, hi: int, mode: str):
    """``_index_table`` for a symbolic length ``n`` (``lo``, ``hi`` within
    the range ``pad`` checked: below ``n`` for reflect, at most ``n`` for
    circular), made of an iota: one trace serves every length."""
    if mode == "circular":      # negative amounts crop first (``_index_table``)
        c0, c1 = max(-lo, 0), max(-hi, 0)
        m, lo, hi = n - c0 - c1, max(lo, 0), max(hi, 0)
        i = ops.sub(ops.iota((m + lo + hi,), dt.int64, 0, like=x), lo)
        i = ops.where(ops.lt(i, 0), ops.add(i, m), ops.where(ops.ge(i, m), ops.sub(i, m), i))
        return ops.add(i, c0) if c0 else i
    i = ops.sub(ops.iota((n + lo + hi,), dt.int64, 0, like=x), lo)
    if mode == "replicate":
        return ops.maximum(ops.minimum(i, n - 1), 0)
    return ops.where(ops.lt(i, 0), ops.neg(i),
                     ops.where(ops.ge(i, n), ops.sub(2 * n - 2, i), i))


def pad(input, pad, mode: str = "constant", value=None):
    """``torch.nn.functional.pad``: ``pad`` lists (low, high) pairs from
    the last dimension backwards; negative amounts crop."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pad(): argument 'input' must be Tensor, not {type(input).__name__}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        # (PyTorch's words, before it looks at the amounts)
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{input.ndim}")
    nd = input.ndim
    low, high = [0] * nd, [0] * nd
    for i in range(len(pad) // 2):
        low[nd - 1 - i], high[nd - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if mode == "constant":
        x = input
        if any(v < 0 for v in low + high):
            starts = tuple(max(-v, 0) for v in low)
            stops = tuple(s - max(-v, 0) for s, v in zip(x.shape, high))
            if any(b < a for a, b in zip(starts, stops)):
                raise RuntimeError("pad: negative padding larger than the input")
            x = ops.slice_(x, starts, stops, (1,) * nd)
        lo, hi = [max(v, 0) for v in low], [max(v, 0) for v in high]
        if not any(lo) and not any(hi):
            return x if x is not input else ops.reshape(x, tuple(x.shape))
        # (PyTorch's padded result is laid out as the input suggests)
        return keep_memory_format(ops.pad(x, lo, hi, (0,) * nd, 0.0 if value is None else value),
                                  input)
    if len(pad) not in (2, 4, 6) or nd - len(pad) // 2 not in (1, 2):
        # the non-constant kernels pad the last 1-3 dims of a (C, ...) or
        # (N, C, ...) input only: ReflectionPad2d((1, 2)) on 4-D is refused
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {nd}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    if value not in (None, 0):
        warnings.warn(f"pad: value is ignored in mode '{mode}'", stacklevel=2)
    if mode == "reflect":
        # PyTorch checks the last dimension first, naming the pad argument's
        # position (#4 for the last dimension's pair, #6 the one before, ...).
        for k, d in enumerate(reversed(range(nd))):
            if (low[d] or high[d]) and (low[d] >= input.shape[d] or high[d] >= input.shape[d]):
                raise RuntimeError(f"Argument #{4 + 2 * k}: Padding size should be less than the "
                                   f"corresponding input dimension, but got: padding ({low[d]}, "
                                   f"{high[d]}) at dimension {d} of input {list(input.shape)}")
    x = input
    for d in range(nd):
        if low[d] == 0 and high[d] == 0:
            continue
        n = x.shape[d]
        if mode == "circular" and (low[d] > n or high[d] > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if isinstance(n, Sym):
            idx = _symbolic_index_table(x, n, low[d], high[d], mode)
        else:
            idx = Tensor._make(_index_table(n, low[d], high[d], mode).astype(np.int64),
                               dt.int64)
        x = ops.take(x, idx, d)
    return x if x is input else keep_memory_format(x, input)
