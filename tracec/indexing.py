"""``Tensor.__getitem__`` / ``__setitem__``: basic indexing (ints, slices,
None, Ellipsis) as ``slice`` + ``reshape`` views, integer-array indexing
as ``take`` on (merged) axes, boolean masks through their nonzero indices.

Invariant: basic indexing returns a view sharing storage with its base
(NumPy's and PyTorch's rule); advanced indexing returns a copy.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.tensor import Tensor


def _is_adv(k):
    return isinstance(k, (Tensor, np.ndarray, list))


def _to_index_tensor(k):
    if isinstance(k, Tensor):
        return k
    arr = np.asarray(k)
    if arr.dtype.kind == "f":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return Tensor._from_data(arr)


def _expand_key(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for k in key:
        if isinstance(k, (bool, np.bool_)):
            k = Tensor._from_data(np.array(k))
        if isinstance(k, (float, np.floating)) or (isinstance(k, Tensor) and
                                                     k.dtype.is_floating_point):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and "
                             "long or byte Variables are valid indices (got "
                             f"{type(k).__name__})")
        if isinstance(k, Tensor) and k.dtype is dt.bool_:
            # A mask selects where it is true: its nonzero indices, one per dim.
            nz = np.nonzero(_concrete(k))
            if k.ndim == 0:
                raise IndexError("0-d boolean indices are not supported")
            items.extend(Tensor._from_data(i.astype(np.int64)) for i in nz)
            continue
        if _is_adv(k) and not isinstance(k, Tensor):
            k = _to_index_tensor(k)
            if k.dtype is dt.bool_:
                items.extend(Tensor._from_data(i.astype(np.int64))
                             for i in np.nonzero(k._data))
                continue
        if not (k is None or k is Ellipsis or isinstance(k, (slice, numbers.Integral, Tensor))):
            raise TypeError(f"invalid index of type {type(k).__name__}")
        items.append(k)
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in [k for k in items if not isinstance(k, Tensor)]:
        i = next(i for i, k in enumerate(items) if k is Ellipsis)
        items[i:i + 1] = [slice(None)] * (x.ndim - used)
    else:
        items += [slice(None)] * (x.ndim - used)
    return items


def _concrete(t: Tensor) -> np.ndarray:
    from tracec.tensor import concrete
    return concrete(t, "boolean-mask indexing")


def getitem(x: Tensor, key):
    items = _expand_key(x, key)
    starts, stops, steps = [], [], []
    out_shape, adv = [], []  # adv: (position in out_shape, index tensor)
    dim = 0
    for k in items:
        if k is None:
            out_shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            if k.step is not None and int(k.step) <= 0:
                raise ValueError("step must be greater than zero")
            a, b, c = k.indices(size)
            b = max(b, a)
            starts.append(a), stops.append(b), steps.append(c)
            out_shape.append(len(range(a, b, c)))
        elif isinstance(k, Tensor):
            if k.dtype.category != 1:
                raise IndexError("tensors used as indices must be long, int or bool tensors")
            starts.append(0), stops.append(size), steps.append(1)
            adv.append((len(out_shape), k))
            out_shape.append(size)
        else:
            i = int(k)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            i %= size
            starts.append(i), stops.append(i + 1), steps.append(1)
        dim += 1
    y = x
    if any(a != 0 or b != s or c != 1 for a, b, c, s in zip(starts, stops, steps, x.shape)):
        y = ops.slice_(y, starts, stops, steps)
    if tuple(out_shape) != tuple(y.shape):
        y = ops.reshape(y, tuple(out_shape))
    if not adv:
        if y is x:
            y = ops.reshape(x, x.shape)  # a fresh view, as x[...] in PyTorch
        return y
    return _advanced(y, adv)


def _advanced(y, adv):
    positions = [p for p, _ in adv]
    idx = [i if i.dtype is dt.int64 else ops.cast(i, dt.int64) for _, i in adv]
    bshape = np.broadcast_shapes(*[i.shape for i in idx])
    idx = [ops.broadcast_to(i, bshape) if i.shape != bshape else i for i in idx]
    # Normalize negative indices with primitives (indices may be traced).
    idx = [ops.where(ops.lt(i, 0), ops.add(i, y.shape[p]), i) for p, i in zip(positions, idx)]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    if not adjacent:
        rest = [d for d in range(y.ndim) if d not in positions]
        y = ops.transpose(y, positions + rest)
        positions = list(range(len(positions)))
    p0 = positions[0]
    sizes = [y.shape[p] for p in positions]
    if len(positions) > 1:
        y = ops.reshape(y, y.shape[:p0] + (math.prod(sizes),) + y.shape[p0 + len(sizes):])
        flat = idx[0]
        for i, s in zip(idx[1:], sizes[1:]):
            _check_range(i, s)
            flat = ops.add(ops.mul(flat, s), i)
        _check_range(idx[0], sizes[0])
        idx = [flat]
    return ops.take(y, idx[0], p0)


def _check_range(i, size):
    data = i._data
    if data.size and (data.min() < 0 or data.max() >= size):
        bad = data[(data < 0) | (data >= size)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for dimension with size {size}")


def setitem(x: Tensor, key, value):
    if isinstance(value, (list, tuple, np.ndarray)):
        value = Tensor._from_data(np.asarray(value), dtype=x.dtype)
    if not isinstance(value, (Tensor, numbers.Number, np.number, np.bool_)):
        raise TypeError(f"can't assign a {type(value).__name__} to a tensor")
    items = key if isinstance(key, tuple) else (key,)
    if any(_is_adv(k) or isinstance(k, (bool, np.bool_)) for k in items):
        return _setitem_advanced(x, key, value)
    view = getitem(x, key)
    new = value if isinstance(value, Tensor) else Tensor._from_data(np.array(value),
                                                                     dtype=x.dtype)
    if new.dtype is not x.dtype:
        new = ops.cast(new, x.dtype)
    if tuple(new.shape) != tuple(view.shape):
        try:
            new = ops.broadcast_to(_drop_leading_ones(new, view.ndim), view.shape)
        except Exception:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(new.shape)} cannot "
                               f"be broadcast to indexing result of shape "
                               f"{list(view.shape)}") from None
    view._assign(new, "setitem")


def _drop_leading_ones(t, ndim):
    while t.ndim > ndim and t.shape[0] == 1:
        t = ops.reshape(t, t.shape[1:])
    return t


def _setitem_advanced(x, key, value):
    from tracec import graph
    from tracec.tensor import RECORDERS
    vdata = value._data if isinstance(value, Tensor) else value
    if RECORDERS or (graph.is_grad_enabled() and (
            x.requires_grad or (isinstance(value, Tensor) and value.requires_grad))):
        raise NotImplementedError("index assignment with integer-array or mask indices is "
                                  "supported only outside autograd and tracing; use "
                                  "where()/masked_fill() or scatter_add() instead")
    np_key = tuple(k._data if isinstance(k, Tensor) else k for k in
                   (key if isinstance(key, tuple) else (key,)))
    try:
        x._data[np_key] = vdata
    except (IndexError, ValueError) as e:
        raise IndexError(str(e)) from None
    x._version[0] += 1
