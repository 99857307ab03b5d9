"""Window ops beyond plain pooling: adaptive max pooling (with indices),
``max_unpool``, power-average (``lp_pool``) pooling, and ``unfold`` /
``fold`` (im2col and its adjoint col2im).

Invariant: every gather of window elements is a ``take`` along a flat
spatial axis with an index table computed from shapes alone (NumPy, at
trace time), and every scatter back is its adjoint ``index_add``; so each
op is one or two primitives whose VJPs carry the gradients.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import ops
from tracec.nn._conv import (_batched, _ntuple, _unbatch, avg_pool1d, avg_pool2d,
                             avg_pool3d, max_pool1d, max_pool2d, max_pool3d)
from tracec.graph import keep_saved
from tracec.tensor import Tensor

__all__ = ["adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "max_pool3d_with_indices", "max_unpool1d",
           "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "unfold",
           "fold"]


def _index(a: np.ndarray) -> Tensor:
    return Tensor._make(np.ascontiguousarray(a, dtype=np.int64), dt.int64)


# --- adaptive max pooling -----------------------------------------------------------------

def _bins(n: int, o: int) -> np.ndarray:
    """``[o, k]`` positions of PyTorch's adaptive bins
    ``[floor(i*n/o), ceil((i+1)*n/o))``, short bins padded by repeating
    their last element (a repeat changes neither the max nor which
    element comes first)."""
    starts = [(i * n) // o for i in range(o)]
    ends = [-(-((i + 1) * n) // o) for i in range(o)]
    k = max(e - s for s, e in zip(starts, ends))
    return np.array([[min(s + j, e - 1) for j in range(k)] for s, e in zip(starts, ends)])


def _adaptive_max_poolnd(input, output_size, return_indices, nsp, name):
    x, unbatched = _batched(input, nsp, name)
    size = tuple(output_size) if isinstance(output_size, (list, tuple)) \
        else (output_size,) * nsp
    if len(size) != nsp:
        raise RuntimeError(f"{name}: output_size must be {nsp} values, got {output_size}")
    sp = tuple(x.shape[2:])
    size = tuple(s if o is None else int(o) for s, o in zip(sp, size))
    if any(s == 0 for s in sp) or any(o <= 0 for o in size):
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input.shape)} with output "
                           f"size {list(size)}")
    n, c = x.shape[:2]
    if all(type(o) is int and o == 1 for o in size):
        # The global pool (adaptive_max_pool2d(x, 1)): one window, the whole
        # plane, whose flat argmax is the index; no position tables, so a
        # symbolic image size stays symbolic.
        flat_x = ops.reshape(x, (n, c, math.prod(sp)))
        arg = ops.reshape(ops.argmax(flat_x, 2), (n, c, 1))
        y = _unbatch(ops.reshape(ops.gather(flat_x, arg, 2), (n, c) + size), unbatched)
        if not return_indices:
            return y
        return y, _unbatch(ops.reshape(arg, (n, c) + size), unbatched)
    tables = [_bins(n, o) for n, o in zip(sp, size)]
    ks = tuple(t.shape[1] for t in tables)
    # Flat input position of every (out..., k...) window element.
    strides = np.cumprod((1,) + sp[::-1])[:-1][::-1]
    flat = np.zeros(size + ks, np.int64)
    for d, t in enumerate(tables):
        shape = [1] * (2 * nsp)
        shape[d], shape[nsp + d] = t.shape
        flat = flat + t.reshape(shape) * strides[d]
    n, c = x.shape[:2]
    kk = math.prod(ks)
    cols = ops.take(ops.reshape(x, (n, c, math.prod(sp))), _index(flat.reshape(-1)), 2)
    cols = ops.reshape(cols, (n, c, math.prod(size), kk))
    arg = ops.reshape(ops.argmax(cols, 3), (n, c, math.prod(size), 1))
    y = _unbatch(ops.reshape(ops.gather(cols, arg, 3), (n, c) + size), unbatched)
    if not return_indices:
        return y
    pos = ops.broadcast_to(_index(flat.reshape(1, 1, math.prod(size), kk)), tuple(cols.shape))
    idx = ops.reshape(ops.gather(pos, arg, 3), (n, c) + size)
    return y, _unbatch(idx, unbatched)


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    return _adaptive_max_poolnd(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    return _adaptive_max_poolnd(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):
    return _adaptive_max_poolnd(input, output_size, return_indices, 3, "adaptive_max_pool3d")


def adaptive_max_pool1d_with_indices(input, output_size, return_indices: bool = False):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices: bool = False):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices: bool = False):
    return adaptive_max_pool3d(input, output_size, True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# --- max unpooling ---------------------------------------------------------------------------

def _unpool_size(x, kernel, stride, padding, output_size, nsp):
    default = tuple((x.shape[x.ndim - nsp + d] - 1) * stride[d] - 2 * padding[d] + kernel[d]
                    for d in range(nsp))
    if output_size is None:
        return default
    size = tuple(int(v) for v in output_size)
    if len(size) == nsp + 2:
        size = size[2:]
    elif len(size) == nsp + 1:
        size = size[1:]
    if len(size) != nsp:
        raise ValueError(f"output_size should be a sequence containing {nsp} or {nsp + 2} "
                         f"elements, but it has a length of '{len(output_size)}'")
    for d in range(nsp):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < size[d] < hi:
            raise ValueError(f'invalid output_size "{list(size)}" (dim {d} must be between '
                             f"{lo} and {hi})")
    return size


def _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, nsp, name):
    kernel = _ntuple(kernel_size, nsp, "kernel_size")
    stride = kernel if stride is None else _ntuple(stride, nsp, "stride")
    padding = _ntuple(padding, nsp, "padding")
    x, unbatched = _batched(input, nsp, name)
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    size = _unpool_size(x, kernel, stride, padding, output_size, nsp)
    n, c = x.shape[:2]
    m = math.prod(x.shape[2:])
    idx = ops.reshape(ops.cast(indices, dt.int64) if indices.dtype is not dt.int64 else indices,
                      (n, c, m))
    out = ops.zeros((n, c, math.prod(size)), x.dtype, like=x)
    # Written, not added: overlapping pooling windows (kernel 3, stride 2)
    # can give two outputs the same argmax; PyTorch writes it once (the last
    # write wins) and both inputs get its gradient.
    from tracec.scatter_ops import scatter
    y = scatter(out, 2, idx, ops.reshape(x, (n, c, m)))
    return _unbatch(ops.reshape(y, (n, c) + size), unbatched)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, 1,
                         "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, 2,
                         "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, 3,
                         "max_unpool3d")


# --- power-average pooling ---------------------------------------------------------------

def _lp_poolnd(input, norm_type, kernel_size, stride, ceil_mode, nsp, avg):
    """PyTorch's formula: ``(sign(a) * relu(|a|) * prod(kernel)) ** (1/p)``
    with ``a`` the average of ``x ** p`` over each window."""
    kernel = _ntuple(kernel_size, nsp, "kernel_size")
    out = avg(TF.pow(input, norm_type), kernel, stride, 0, ceil_mode)
    out = TF.mul(TF.mul(TF.sign(out), TF.relu(TF.abs(out))), float(math.prod(kernel)))
    return TF.pow(out, 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    return _lp_poolnd(input, norm_type, kernel_size, stride, ceil_mode, 1, avg_pool1d)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    return _lp_poolnd(input, norm_type, kernel_size, stride, ceil_mode, 2, avg_pool2d)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    return _lp_poolnd(input, norm_type, kernel_size, stride, ceil_mode, 3, avg_pool3d)


# --- im2col / col2im ----------------------------------------------------------------------

def _col_table(sp, kernel, dilation, padding, stride):
    """Flat positions in the padded image of every (kernel offset, output
    location) pair, ``[prod(kernel) * L]``, and the output grid."""
    padded = tuple(s + 2 * p for s, p in zip(sp, padding))
    out = tuple((pd - d * (k - 1) - 1) // st + 1
                for pd, k, d, st in zip(padded, kernel, dilation, stride))
    if any(o <= 0 for o in out):
        # (PyTorch's words, the sizes as tuples)
        raise RuntimeError(f"Given input with spatial size {tuple(sp)}, "
                           f"kernel_size={tuple(kernel)}, dilation={tuple(dilation)}, "
                           f"padding={tuple(padding)}, calculated shape of the array of sliding "
                           f"blocks as {tuple(out)}, but its components must be at least one.")
    rows = []
    for offs in itertools.product(*[range(k) for k in kernel]):
        grids = np.meshgrid(*[np.arange(o) * st + off * d for o, st, off, d in
                              zip(out, stride, offs, dilation)], indexing="ij")
        rows.append(np.ravel_multi_index(tuple(grids), padded).reshape(-1))
    return np.concatenate(rows), padded, out


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """``[N, C, H, W]`` -> ``[N, C * kh * kw, L]``: every sliding block as a
    column (PyTorch's im2col; channel-major, then kernel offset)."""
    x, unbatched = _batched(input, 2, "unfold")
    kernel, dilation = _ntuple(kernel_size, 2, "kernel_size"), _ntuple(dilation, 2, "dilation")
    padding, stride = _ntuple(padding, 2, "padding"), _ntuple(stride, 2, "stride")
    n, c = x.shape[:2]
    table, padded, out = _col_table(tuple(x.shape[2:]), kernel, dilation, padding, stride)
    if any(padding):
        x = ops.pad(x, (0, 0) + padding, (0, 0) + padding, (0,) * 4, 0.0)
    cols = ops.take(ops.reshape(x, (n, c, math.prod(padded))), _index(table), 2)
    y = _unbatch(ops.reshape(cols, (n, c * math.prod(kernel), math.prod(out))), unbatched)
    keep_saved(y, (input,))    # (PyTorch's Im2ColBackward0 saves no tensors: the table is kept)
    return y


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of ``unfold``: ``[N, C * kh * kw, L]`` -> ``[N, C, H, W]``,
    summing where blocks overlap (col2im)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"fold(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to fold, but got "
                           f"input of size: {list(input.shape)}")
    x, unbatched = (ops.reshape(input, (1,) + tuple(input.shape)), True) if input.ndim == 2 \
        else (input, False)
    size = _ntuple(output_size, 2, "output_size")
    kernel, dilation = _ntuple(kernel_size, 2, "kernel_size"), _ntuple(dilation, 2, "dilation")
    padding, stride = _ntuple(padding, 2, "padding"), _ntuple(stride, 2, "stride")
    n, ck, length = x.shape
    kk = math.prod(kernel)
    if ck % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size={kernel}.")
    # (the block count checked first, as PyTorch does: an output too small
    # for the kernel is "0 * 0 = 0" blocks)
    out = tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                for s, p, k, d, st in zip(size, padding, kernel, dilation, stride))
    if math.prod(out) != length:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, "
                           f"dilation={dilation}, padding={padding}, stride={stride}, expected "
                           f"size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {out[0]} * {out[1]} = {math.prod(out)}, but got "
                           f"input.size(2)={length}.")
    if any(o <= 0 for o in out):     # (a count of (-1) * (-1) blocks passes the one above)
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, "
                           f"dilation={dilation}, padding={padding}, stride={stride}, "
                           f"calculated shape of the array of sliding blocks as {out}, which "
                           f"is too small (non-positive)")
    table, padded, out = _col_table(size, kernel, dilation, padding, stride)
    c = ck // kk
    src = ops.reshape(x, (n, c, kk * length))
    img = ops.index_add(ops.zeros((n, c, math.prod(padded)), x.dtype, like=x), _index(table),
                        src, 2)
    img = ops.reshape(img, (n, c) + padded)
    if any(padding):
        img = ops.slice_(img, (0, 0) + padding,
                         (n, c) + tuple(p - q for p, q in zip(padded, padding)), (1,) * 4)
    img = _unbatch(img, unbatched)
    keep_saved(img, (input,))  # (PyTorch's Col2ImBackward0 saves no tensors: the table is kept)
    return img
