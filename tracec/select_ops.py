"""Selecting and embedding: ``take take_along_dim put masked_select
masked_scatter nonzero argwhere select select_scatter slice_scatter
diagonal_scatter``.

Invariant: composites of primitives (``take``, ``gather``, ``where``,
``pad``, the scan behind ``cumsum``), so gradients and ``tracec.compile``
need nothing of their own, except where the result's *shape* depends on
tensor values (``nonzero``, ``argwhere``, ``masked_select``): those read
the values through ``concrete`` and are refused inside a compiled
function, as PyTorch's graph capture refuses them.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec import shape_ops as S
from tracec.functions import _named
from tracec.graph import keep_saved
from tracec.indexing import getitem
from tracec.methods import _inplace
from tracec.ops.core import normalize_axis
from tracec.rearrange import cumsum
from tracec.scatter_ops import _put_flat
from tracec.shape_extra import movedim
from tracec.tensor import RECORDERS, SPARSE, Tensor, concrete

__all__ = ["take", "take_along_dim", "put", "masked_select", "masked_scatter", "nonzero",
           "nonzero_static",
           "argwhere", "select", "select_scatter", "slice_scatter", "diagonal_scatter"]


def _flat_index(input, index, name):
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got "
                           f"{getattr(index, 'dtype', type(index).__name__)}")
    n = input.numel()
    data = index._data  # a range check only
    if data.size and (data.min() < -n or data.max() >= n):
        bad = data[(data < -n) | (data >= n)].flat[0]
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                         "elements.")
    index = index if index.dtype is dt.int64 else ops.cast(index, dt.int64)
    # Negative indices count from the end (wrapped with primitives: a traced
    # index may hold other values on a later call).
    return ops.where(ops.lt(index, 0), ops.add(index, n), index)


def take(input, index):
    index = _flat_index(input, index, "take")
    return _named(ops.take(ops.reshape(input, (input.numel(),)), index, 0), "TakeBackward0")


def take_along_dim(input, indices, dim=None):
    """PyTorch 2.13's: without ``dim``, ``gather`` along the flat input (an
    index outside ``[0, numel)`` fails with gather's error, also in a
    compiled call: the check is recorded); with ``dim``, ``indices`` must be
    int64 and are wrapped modulo the dimension's size (``indices % size``,
    as ``torch._refs.take_along_dim`` and the native kernel do: 7 takes
    element 2 of 5, -7 element 3), so no index is ever out of range."""
    if dim is None:
        if not isinstance(indices, Tensor):
            raise TypeError("take_along_dim(): argument 'indices' must be Tensor, not "
                            f"{type(indices).__name__}")
        from tracec.shape_ops import gather
        flat = ops.reshape(input, (input.numel(),))
        return gather(flat, 0, ops.reshape(indices, (indices.numel(),)))
    if not isinstance(indices, Tensor):
        raise TypeError("take_along_dim(): argument 'indices' must be Tensor, not "
                        f"{type(indices).__name__}")
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.ndim} dimensions for input, "
                           f"and {indices.ndim} dimensions for indices")
    if indices.dtype is not dt.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{dt.scalar_type_name(indices.dtype)}")
    if input.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = normalize_axis(dim, input.ndim)
    a = list(input.shape)
    a[d] = indices.shape[d]
    shape = list(ops.core.broadcast_shapes(tuple(a), tuple(indices.shape)))
    b = list(indices.shape)
    b[d] = input.shape[d]
    xs = list(ops.core.broadcast_shapes(tuple(b), tuple(input.shape)))
    x = ops.broadcast_to(input, tuple(xs)) if tuple(xs) != tuple(input.shape) else input
    i = ops.broadcast_to(indices, tuple(shape)) if tuple(shape) != tuple(indices.shape) \
        else indices
    n = input.shape[d]
    if i.numel() and n == 0:
        raise RuntimeError("ZeroDivisionError")   # (PyTorch's ``indices % 0``)
    if i.numel():
        # Python's modulo with primitives (a traced index may hold other
        # values at a later call): C's remainder, moved into [0, n).
        r = ops.sub(i, ops.mul(ops.div(i, n), n))     # (int div truncates)
        i = ops.where(ops.lt(r, 0), ops.add(r, n), r)
    return _named(ops.gather(x, i, d), "TakeAlongDimBackward0")


def _int64(i):
    return i if i.dtype is dt.int64 else ops.cast(i, dt.int64)


def put(input, index, source, accumulate=False):
    pos = _flat_index(input, index, "put")
    if not isinstance(source, Tensor) or source.dtype is not input.dtype:
        raise RuntimeError("put(): Expected source and self to have the same dtype")
    if source.numel() != pos.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {pos.numel()}")
    source = ops.reshape(source, tuple(pos.shape))
    return _named(_put_flat(input, pos, source, accumulate), "PutBackward0")


def _bool_mask(mask, name):
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise RuntimeError(f"{name}: expected BoolTensor for mask")
    return mask


def masked_select(input, mask):
    mask = _bool_mask(mask, "masked_select")
    # (the mask first: PyTorch's error names it tensor a)
    shape = ops.core.broadcast_shapes(tuple(mask.shape), tuple(input.shape))
    x = ops.broadcast_to(input, shape) if tuple(input.shape) != shape else input
    m = concrete(mask, "masked_select (its result's size depends on the mask)")
    pos = np.flatnonzero(np.broadcast_to(m, shape)).astype(np.int64)
    flat = ops.reshape(x, (int(np.prod(shape)),))
    return _named(ops.take(flat, Tensor._from_data(pos), 0), "MaskedSelectBackward0")


_SHORT_SOURCE = "Number of elements of source < number of ones in mask"


def masked_scatter(input, mask, source):
    """Where ``mask`` is true, the next element of ``source`` (row-major):
    the k-th true position reads ``source.flat[k]``, k from a cumsum of the
    mask, so the op never reads the mask's values in Python."""
    mask = _bool_mask(mask, "masked_scatter_")
    if not isinstance(source, Tensor) or source.dtype is not input.dtype:
        raise RuntimeError("masked_scatter_: expected self and source to have same dtypes but "
                           f"got {input.dtype} and {getattr(source, 'dtype', None)}")
    shape = tuple(input.shape)
    if tuple(mask.shape) != shape:
        # out of place, PyTorch broadcasts the input and the mask together
        # (in place, a larger result fails the write back into ``input``)
        full = tuple(np.broadcast_shapes(shape, tuple(mask.shape)))
        if full != shape:
            input, shape = ops.broadcast_to(input, full), full
    m = ops.broadcast_to(mask, shape) if tuple(mask.shape) != shape else mask
    n = input.numel()
    if not RECORDERS and int(mask._data.sum() if mask.shape == shape else np.broadcast_to(
            mask._data, shape).sum()) > source.numel():
        raise RuntimeError(_SHORT_SOURCE)
    mflat = ops.reshape(m, (n,))
    ones = cumsum(ops.cast(mflat, dt.int64), 0)
    k = ops.where(mflat, ops.sub(ones, 1), 0)
    enough = None
    if RECORDERS and n:
        # A recorded check (a compiled call checks its own mask), on what
        # is read next: it fails before ``take`` would.
        enough = ops.le(ops.reshape(ops.slice_(ones, (n - 1,), (n,), (1,)), ()),
                        source.numel())
        k = ops.check(k, enough, _SHORT_SOURCE)
    src = ops.reshape(source, (source.numel(),))
    if source.numel() == 0:
        out = ops.cast(input, input.dtype)
        if enough is not None:
            out = ops.check(out, enough, _SHORT_SOURCE)
        return _named(out, "MaskedScatterBackward0")
    vals = ops.reshape(ops.take(src, k, 0), shape)
    return _named(ops.where(m, vals, input), "MaskedScatterBackward0")


def nonzero(input, *, as_tuple=False):
    data = concrete(input, "nonzero (its result's size depends on the values)")
    if as_tuple:
        if input.ndim == 0:
            return (Tensor._from_data(np.zeros(int(bool(data)), np.int64)),)
        return tuple(Tensor._from_data(i.astype(np.int64)) for i in np.nonzero(data))
    if input.ndim == 0:
        res = np.zeros((int(bool(data)), 0), np.int64)
    else:
        res = np.argwhere(data).astype(np.int64)
    return Tensor._from_data(res)


def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero`` padded with ``fill_value`` rows (or cut) to ``size`` rows:
    a shape that does not depend on the values, so it traces. The k-th
    nonzero element (row-major) lands in row k, found by a cumsum of the
    mask; elements past ``size`` go to a spare row that is dropped."""
    from tracec import creation
    if not isinstance(size, int) or size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    shape = tuple(input.shape)
    nd = len(shape)
    flat = ops.ne(ops.reshape(input, (input.numel(),)), 0)
    n = input.numel()
    if nd == 0 or n == 0:
        return ops.full((size, nd), fill_value, dt.int64, like=input)
    rank = ops.sub(cumsum(ops.cast(flat, dt.int64), 0), 1)
    dest = ops.where(ops.logical_and(flat, ops.lt(rank, size)), rank, size)
    idx = creation.arange(n)
    coords, stride = [], 1
    for d in reversed(range(nd)):
        coords.append((idx // stride) % shape[d])
        stride *= shape[d]
    coords = S.stack(coords[::-1], 1)                                   # [n, nd]
    out = ops.full((size + 1, nd), fill_value, dt.int64, like=input)
    out = out.scatter(0, S.expand(S.unsqueeze(dest, 1), n, nd), coords)
    return ops.slice_(out, (0, 0), (size, nd), (1, 1))


def argwhere(input):
    return nonzero(input)


def select(input, dim, index):
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = normalize_axis(dim, input.ndim)
    n = input.shape[d]
    index = int(index)
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    out = _named(getitem(input, (slice(None),) * d + (index,)), "SelectBackward0")
    if SPARSE:
        from tracec.sparse_rows import sparse_selected
        return sparse_selected(out, input, d, index)
    return out


def _check_src(input, src, want):
    if tuple(src.shape) != tuple(want):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size "
                           f"= {list(src.shape)}, slice size = {list(want)}")
    if src.dtype is not input.dtype:
        src = ops.cast(src, input.dtype)
    return src


def _embed(input, src, d, start, step):
    """``input`` with ``src`` written at ``start::step`` along ``d``: ``src``
    padded into place and chosen by a padded mask (``pad`` is the adjoint
    of the strided slice, so the gradient is a slice)."""
    n, k = input.shape[d], src.shape[d]
    low = tuple(start if i == d else 0 for i in range(input.ndim))
    covered = (k - 1) * step + 1 if k else 0
    high = tuple(n - start - covered if i == d else 0 for i in range(input.ndim))
    interior = tuple(step - 1 if i == d else 0 for i in range(input.ndim))
    vals = ops.pad(src, low, high, interior, 0)
    hit = ops.pad(ops.full(tuple(src.shape), True, dt.bool_, like=input), low, high, interior,
                  False)
    return ops.where(hit, vals, input)


def select_scatter(input, src, dim, index):
    d = normalize_axis(dim, input.ndim)
    n = input.shape[d]
    index = int(index)
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    want = tuple(s for i, s in enumerate(input.shape) if i != d)
    src = _check_src(input, src, want)
    src = ops.reshape(src, tuple(1 if i == d else s for i, s in enumerate(input.shape)))
    out = _embed(input, src, d, index % n, 1)
    keep_saved(out, (input, src))    # (PyTorch's node saves no tensors: the mask is kept)
    return _named(out, "SelectScatterBackward0")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    d = normalize_axis(dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    a, b, c = slice(start, end, step).indices(input.shape[d])
    b = max(a, b)
    want = tuple(len(range(a, b, c)) if i == d else s for i, s in enumerate(input.shape))
    src = _check_src(input, src, want)
    return _named(_embed(input, src, d, a, c), "SliceScatterBackward0")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with its ``diagonal(offset, dim1, dim2)`` replaced by
    ``src``: the two dims moved last, each ``(r, c)`` on the diagonal
    reading ``src[..., r]`` (``offset >= 0``) or ``src[..., c]``."""
    from tracec.shape_extra import diagonal
    want = tuple(diagonal(input, offset, dim1, dim2).shape)
    src = _check_src(input, src, want)
    a, b = normalize_axis(dim1, input.ndim), normalize_axis(dim2, input.ndim)
    x = movedim(input, (a, b), (-2, -1))
    n, m = x.shape[-2], x.shape[-1]
    k = int(offset)
    length = want[-1]
    if length == 0:
        return _named(ops.cast(input, input.dtype), "DiagonalScatterBackward0")
    rows = ops.iota((n, m), dt.int64, 0, like=input)
    cols = ops.iota((n, m), dt.int64, 1, like=input)
    on = ops.eq(ops.sub(cols, rows), k)
    pos = rows if k >= 0 else cols
    pos = ops.where(ops.lt(pos, length), pos, length - 1)  # off-diagonal: any valid index
    vals = ops.take(src, pos, src.ndim - 1)  # [..., n, m]
    y = ops.where(on, vals, x)
    return _named(movedim(y, (-2, -1), (a, b)), "DiagonalScatterBackward0")


_METHODS = {"take": take, "take_along_dim": take_along_dim, "put": put,
            "masked_select": masked_select, "masked_scatter": masked_scatter,
            "nonzero": nonzero, "nonzero_static": nonzero_static, "argwhere": argwhere,
            "select": select,
            "select_scatter": select_scatter, "slice_scatter": slice_scatter,
            "diagonal_scatter": diagonal_scatter}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.put_ = _inplace("put_", put)
Tensor.masked_scatter_ = _inplace("masked_scatter_", masked_scatter)
