"""The scatter family: ``scatter`` (a tensor ``src`` or a ``value``,
``reduce=``), ``scatter_reduce`` (sum prod mean amax amin, ``include_self``),
``index_add index_copy index_fill index_put index_reduce``, and their
in-place ``*_`` methods.

Invariant: each is a composite of primitives (``scatter_add``,
``scatter_max/min/mul``, ``index_add``, ``gather``, ``where``, ``iota``),
so gradients and ``tracec.compile`` come for free.  Index values are read
in Python only to check their range (the result never depends on that
read).  Of repeated indices in an overwriting scatter the last write along
``dim`` wins, as on PyTorch's CPU: the writer of each position is the
largest source ordinal aimed at it (one ``scatter_max``).
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import graph, ops
from tracec.functions import _named, user_stacklevel
from tracec.indexing import getitem
from tracec.methods import _inplace
from tracec.ops.core import normalize_axis
from tracec.ops.elementwise import INDEX_ERROR, INDEX_VALUE
from tracec.tensor import RECORDERS, Tensor

__all__ = ["scatter", "scatter_reduce", "index_add", "index_copy", "index_fill",
           "index_put", "index_put_", "index_reduce"]



def _index_dtype(index, name):
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    return index if index.dtype is dt.int64 else ops.cast(index, dt.int64)


def _check_range(index, size, dim, prefix="", error=IndexError, message=None, negative=False):
    """``index``, refused outside ``[0, size)`` with PyTorch's message; its
    kernels raise it as ``error`` (IndexError for index_fill_ / index_copy_,
    RuntimeError for the scatter family and index_add_).  While tracing the
    check is recorded too (the returned index is checked), so that a
    compiled call checks its own indices: its kernels would count a negative
    one from the end.  ``negative``: ``[-size, size)`` is in range (the
    kernels wrap a negative index: index_fill_'s)."""
    lo = -size if negative else 0
    if RECORDERS and index.numel():
        ok = ops.logical_and(ops.ge(index, lo), ops.lt(index, size))
        text = message or (f"{prefix}index {INDEX_VALUE} is out of bounds for dimension {dim} "
                           f"with size {size}")
        index = ops.check(index, ok, (INDEX_ERROR if error is IndexError else "") + text)
    _check_eager_range(index, size, dim, prefix, error, message, lo)
    return index


def _check_eager_range(index, size, dim, prefix, error, message, lo):
    data = index._data  # a range check only: the result does not depend on it
    if data.size and (data.min() < lo or data.max() >= size):
        bad = data[(data < lo) | (data >= size)].flat[0]
        raise error(message or f"{prefix}index {bad} is out of bounds for dimension {dim} "
                    f"with size {size}")


def _fit(t, shape):
    """``t`` cut down to ``shape`` (PyTorch reads only the first
    ``index.size(d)`` entries of a larger ``src``)."""
    if tuple(t.shape) == tuple(shape):
        return t
    return ops.slice_(t, (0,) * t.ndim, tuple(shape), (1,) * t.ndim)


def _scatter_args(name, input, dim, index, src):
    """Checked ``(d, index, src)`` with ``src`` a tensor of ``index``'s
    shape and ``input``'s dtype."""
    index = _index_dtype(index, name)
    d = normalize_axis(dim, input.ndim)
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, Tensor):
        if src.dtype is not input.dtype:
            raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
        bad = any(i > s for i, s in zip(index.shape, src.shape)) or any(
            i > x for k, (i, x) in enumerate(zip(index.shape, input.shape)) if k != d)
        if bad:
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                               f"{list(input.shape)} apart from dimension {d} and to be no "
                               f"larger size than src {list(src.shape)}")
        src = _fit(src, index.shape)
    else:
        src = ops.full(tuple(index.shape), src, input.dtype, like=input)
    index = _check_range(index, input.shape[d] if input.ndim else 1, d, error=RuntimeError)
    if input.ndim == 0:  # a 0-d self: the one element along a unit axis
        return 0, ops.reshape(index, (1,)), ops.reshape(src, (1,))
    return d, index, src


def _on(input, fn):
    """``fn`` applied to ``input`` seen as 1-d when it is 0-d."""
    if input.ndim:
        return fn(input)
    return ops.reshape(fn(ops.reshape(input, (1,))), ())


def _wide(input, index, d):
    """``index`` padded with out-of-the-way rows where it is smaller than
    ``input`` off ``dim``: those positions are gathered from nowhere, so
    the primitives (which want equal shapes off ``dim``) see full-size
    operands.  Returns ``(index, keep)`` where keep marks real entries."""
    want = tuple(s if k == d else input.shape[k] for k, s in enumerate(index.shape))
    if want == tuple(index.shape):
        return index, None
    high = tuple(w - s for w, s in zip(want, index.shape))
    zero = (0,) * index.ndim
    keep = ops.pad(ops.full(tuple(index.shape), True, dt.bool_, like=index), zero, high, zero,
                   False)
    return ops.pad(index, zero, high, zero, 0), keep


def _padded_src(src, keep, fill):
    if keep is None:
        return src
    zero = (0,) * src.ndim
    high = tuple(a - b for a, b in zip(keep.shape, src.shape))
    return ops.pad(src, zero, high, zero, fill)


def _hits(input, index, keep, d):
    """Int64 count of the entries aimed at each position of ``input``."""
    ones = ops.full(tuple(index.shape), 1, dt.int64, like=input)
    if keep is not None:
        ones = ops.where(keep, ones, 0)
    return ops.scatter_add(ops.zeros(tuple(input.shape), dt.int64, like=input), index, ones, d)


def _overwrite(input, d, index, src):
    index, keep = _wide(input, index, d)
    src = _padded_src(src, keep, 0)
    order = ops.iota(tuple(index.shape), dt.int64, d, like=input)
    if keep is not None:
        order = ops.where(keep, order, -1)
    writer = ops.scatter_max(ops.full(tuple(input.shape), -1, dt.int64, like=input), index,
                             order, d)
    wins = ops.eq(ops.gather(writer, index, d), order)
    # A losing write adds src - src: zero, yet its gradient is the output's
    # gradient at its target, as PyTorch's scatter backward (gather) gives
    # every src entry.
    lose = ops.sub(src, src.detach()) if input.dtype.is_floating_point else \
        ops.zeros((), input.dtype, like=input)
    written = ops.scatter_add(ops.zeros(tuple(input.shape), input.dtype, like=input), index,
                              ops.where(wins, src, lose), d)
    return ops.where(ops.ge(writer, 0), written, input)


def _identity(reduce, d: dt.DType):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    big = float("inf") if d.is_floating_point else (
        True if d is dt.bool_ else int(np.iinfo(d.np).max))
    small = -big if d.is_floating_point else (False if d is dt.bool_ else int(
        np.iinfo(d.np).min))
    return small if reduce == "amax" else big


_COMBINE = {"sum": ops.scatter_add, "prod": ops.scatter_mul, "mean": ops.scatter_add,
            "amax": ops.scatter_max, "amin": ops.scatter_min}


def _reduce(input, d, index, src, reduce, include_self):
    index, keep = _wide(input, index, d)
    src = _padded_src(src, keep, _identity(reduce, input.dtype))
    if keep is not None:
        src = ops.where(keep, src, ops.full((), _identity(reduce, input.dtype), input.dtype,
                                            like=input))
    if include_self and reduce != "mean":
        return _COMBINE[reduce](input, index, src, d)
    count = _hits(input, index, keep, d)
    hit = ops.ne(count, 0)
    identity = ops.full((), _identity(reduce, input.dtype), input.dtype, like=input)
    base = input if include_self else ops.where(hit, identity, input)
    if not include_self and reduce in ("amax", "amin") and input.dtype.is_floating_point \
            and (src.requires_grad or input.requires_grad):
        # PyTorch's backward shares a target's gradient among the entries
        # equal to the result counting `input` too, though it was left out
        # (and then drops input's share): a max of zeros scattered onto
        # zeros gives each of n sources 1 / (n + 1).  So the left-out input
        # joins the reduction, detached, exactly where it ties the result.
        with graph.no_grad():
            alone = _COMBINE[reduce](base, index, src, d)
        ties = ops.logical_and(hit, ops.eq(input, alone))
        base = ops.where(ties, input.detach(), base)
    out = _COMBINE[reduce](base, index, src, d)
    if reduce == "mean":
        n = ops.add(count, 1) if include_self else ops.where(hit, count, 1)
        if input.dtype.is_floating_point:
            out = ops.div(out, ops.cast(n, input.dtype))
        else:
            n = ops.cast(n, input.dtype)
            q = ops.div(out, n)  # truncates; PyTorch's integer mean floors (n > 0)
            out = ops.where(ops.lt(ops.sub(out, ops.mul(q, n)), 0), ops.sub(q, 1), q)
    if not include_self:
        out = ops.where(hit, out, input)
    return out


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    d, index, src = _scatter_args("scatter", input, dim, index, src)
    if reduce is None:
        return _named(_on(input, lambda x: _overwrite(x, d, index, src)), "ScatterBackward0")
    if reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    r = "sum" if reduce == "add" else "prod"
    return _named(_on(input, lambda x: _reduce(x, d, index, src, r, True)),
                  "ScatterReduceBackward0")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # PyTorch's aliases
    if reduce not in _COMBINE:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' must be Tensor, not "
                        f"{type(src).__name__}")
    d, index, src = _scatter_args("scatter_reduce", input, dim, index, src)
    return _named(_on(input, lambda x: _reduce(x, d, index, src, reduce, include_self)),
                  "ScatterReduceBackward0")


def _scatter_add(input, dim, index, src):
    d, index, src = _scatter_args("scatter_add", input, dim, index, src)
    return _named(_on(input, lambda x: _reduce(x, d, index, src, "sum", True)),
                  "ScatterAddBackward0")


# --- index_* : a 1-d index along one dimension ---------------------------------------

def _along(name, input, dim, index, source=None, alpha=1):
    """Checked ``(d, index)`` for the ``index_*`` ops (``index`` 1-d int64,
    in range; ``source`` shaped like ``input`` with ``dim`` of
    ``len(index)``).  Each op refuses bad input with PyTorch's own words,
    which differ between them (its checks live in each op's kernel)."""
    _check_index_arg(name, index)
    d = normalize_axis(dim, input.ndim)
    index = ops.reshape(index, (index.numel(),)) if index.ndim == 0 else index
    index = index if index.dtype is dt.int64 else ops.cast(index, dt.int64)
    n = input.shape[d] if input.ndim else 1
    if source is not None:
        _check_source(name, input, d, index, source)
    if name == "index_copy_":
        index = _check_range(index, n, d, "index_copy_(): ")
    elif name in ("index_add_", "index_reduce_") and (
            input.ndim <= 1 or (not isinstance(alpha, Tensor) and alpha != 1)):
        # (PyTorch's index_add_ with an alpha checks in its slower loop,
        # with that loop's words, as for a vector)
        index = _check_range(index, n, d, message="index out of range in self")
    elif name in ("index_add_", "index_reduce_"):
        index = _check_range(index, n, d, error=RuntimeError)
    else:       # index_fill_ counts a negative index from the end, as PyTorch
        index = _check_range(index, n, d, negative=name == "index_fill_")
    return d, index


def _check_index_arg(name, index):
    kind = dt.scalar_type_name(index.dtype) if isinstance(index, Tensor) else \
        type(index).__name__
    if name == "index_copy_":
        if not isinstance(index, Tensor) or index.dtype is not dt.int64:
            raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {kind}")
        if index.ndim > 1:
            raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                             f"{index.ndim})")
    elif name == "index_fill_":
        if not isinstance(index, Tensor) or index.dtype is not dt.int64:
            raise IndexError("index_fill_(): Expected dtype int64 for index.")
        if index.ndim > 1:
            raise RuntimeError("Index has to be a vector/scalar")
    else:   # index_add_, index_reduce_
        if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
            raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index but got: {kind}")
        if index.ndim > 1:
            raise IndexError(f"{name}(): Index is supposed to be a vector, but got dim: "
                             f"{index.ndim} with type: {kind} and size: {list(index.shape)}")


def _check_source(name, input, d, index, source):
    k = index.shape[0]
    scalar = input.ndim == 0 and source.numel() == 1
    if name == "index_copy_":
        if source.ndim and input.ndim and source.ndim != input.ndim:
            raise IndexError(f"index_copy_(): When source and destination are not scalars, "
                             f"their dimensionality must match. Source dimensionality "
                             f"({source.ndim}), destination dimensionality ({input.ndim})")
        if source.ndim and k != source.shape[d]:
            raise IndexError(f"index_copy_(): Number of indices ({k}) should be equal to "
                             f"source.size(dim) ({source.shape[d]})")
        rest = [s for j, s in enumerate(input.shape) if j != d]
        src_rest = [s for j, s in enumerate(source.shape) if j != d]
        if not scalar and rest != src_rest:
            raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                               f"shapes. Destination slice shape: {' '.join(map(str, rest))} "
                               f"at dimension {d} and source slice shape: "
                               f"{' '.join(map(str, src_rest))} at dimension 0.")
        if source.dtype is not input.dtype:
            raise RuntimeError(f"index_copy_(): self and source expected to have the same "
                               f"dtype, but got (self) {dt.scalar_type_name(input.dtype)} and "
                               f"(source) {dt.scalar_type_name(source.dtype)}")
        return
    if source.ndim and d < source.ndim and k != source.shape[d]:
        raise RuntimeError(f"{name}(): Number of indices ({k}) should be equal to "
                           f"source.size(dim): ({source.shape[d]}), for dim: {d}")
    want = tuple(k if j == d else s for j, s in enumerate(input.shape))
    if tuple(source.shape) != want and not scalar:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding "
                           f"the specified dimension. Got self.shape = "
                           f"{list(input.shape)} source.shape = {list(source.shape)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"{name}(): self ({dt.scalar_type_name(input.dtype)}) and source "
                           f"({dt.scalar_type_name(source.dtype)}) must have the same scalar "
                           f"type")


def _expanded(index, source, d):
    """The 1-d ``index`` broadcast to ``source``'s shape along ``d``."""
    view = tuple(index.shape[0] if k == d else 1 for k in range(source.ndim))
    return ops.broadcast_to(ops.reshape(index, view), tuple(source.shape))


def index_add(input, dim, index, source, *, alpha=1):
    d, index = _along("index_add_", input, dim, index, source, alpha)
    if alpha != 1:
        source = ops.mul(source, alpha)
    if input.ndim == 0:
        return _named(ops.reshape(ops.index_add(ops.reshape(input, (1,)), index,
                                                ops.reshape(source, (1,)), 0), ()),
                      "IndexAddBackward0")
    return _named(ops.index_add(input, index, source, d), "IndexAddBackward0")


def index_copy(input, dim, index, source):
    d, index = _along("index_copy_", input, dim, index, source)
    if input.ndim == 0:
        return _named(ops.cast(ops.reshape(source, ()), input.dtype), "IndexCopyBackward0")
    return _named(_overwrite(input, d, _expanded(index, source, d), source),
                  "IndexCopyBackward0")


def index_fill(input, dim, index, value):
    d, index = _along("index_fill_", input, dim, index)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        value = value if value.dtype is input.dtype else ops.cast(value, input.dtype)
    if input.ndim == 0:
        hit = ops.reshape(ops.gt(ops.reduce_sum(ops.add(ops.mul(index, 0), 1), axes=(0,)), 0),
                          ())
        return _named(ops.where(hit, value, input), "IndexFillBackward0")
    n = input.shape[d]
    count = ops.index_add(ops.zeros((n,), dt.int64, like=input), index,
                          ops.full(tuple(index.shape), 1, dt.int64, like=input), 0)
    hit = ops.reshape(ops.gt(count, 0), tuple(n if k == d else 1 for k in range(input.ndim)))
    return _named(ops.where(hit, value, input), "IndexFillBackward0")


_BETA_WARNED: list = []


def _warn_beta_once() -> None:
    """PyTorch's once-per-process note that ``index_reduce`` is in beta,
    attributed to the first caller's line outside tracec."""
    if _BETA_WARNED:
        return
    _BETA_WARNED.append(True)
    import warnings
    warnings.warn("index_reduce() is in beta and the API may change at any time. (Triggered "
                  "internally at /__w/pytorch/pytorch/aten/src/ATen/native/"
                  "TensorAdvancedIndexing.cpp:1523.)", UserWarning, stacklevel=user_stacklevel())


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    _warn_beta_once()
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d, index = _along("index_reduce_", input, dim, index, source)
    if input.ndim == 0:
        input, source = ops.reshape(input, (1,)), ops.reshape(source, (1,))
        return ops.reshape(_reduce(input, 0, index, source, reduce, include_self), ())
    return _named(_reduce(input, d, _expanded(index, source, d), source, reduce,
                          include_self), "IndexReduceBackward0")


# --- index_put / put: positions chosen by advanced indices ------------------------

def _flat_positions(input, indices):
    """The flat positions ``input[indices]`` reads, as an int64 tensor of
    the indexing result's shape (an index of an ``iota``, made without
    autograd)."""
    with graph.no_grad():
        lin = ops.reshape(ops.iota((input.numel(),), dt.int64, 0, like=input),
                          tuple(input.shape))
        return getitem(lin, indices)


def _put_flat(input, pos, values, accumulate):
    """``input`` with ``values`` written (or added) at flat positions
    ``pos`` (same shape as ``values``)."""
    n = input.numel()
    flat = ops.reshape(input, (n,))
    k = pos.numel()
    pos, values = ops.reshape(pos, (k,)), ops.reshape(values, (k,))
    out = ops.index_add(flat, pos, values, 0) if accumulate else _overwrite(flat, 0, pos, values)
    return ops.reshape(out, tuple(input.shape))


def _values_for(input, values, shape, name):
    if not isinstance(values, Tensor):
        values = ops.full((), values, input.dtype, like=input)
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{dt.scalar_type_name(input.dtype)} for the destination and "
                           f"{dt.scalar_type_name(values.dtype)} for the source.")
    if tuple(values.shape) != tuple(shape):
        try:
            values = ops.broadcast_to(values, tuple(shape))
        except Exception:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} "
                               f"cannot be broadcast to indexing result of shape "
                               f"{list(shape)}") from None
    return values


def index_put(input, indices, values, accumulate=False):
    indices = tuple(indices)
    if len(indices) > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim} "
                         f"(got {len(indices)})")
    pos = _flat_positions(input, indices)
    values = _values_for(input, values, pos.shape, "index_put")
    return _named(_put_flat(input, pos, values, accumulate), "IndexPutBackward0")


def index_put_(input, indices, values, accumulate=False):
    return input._assign(index_put(input, indices, values, accumulate), "index_put_")


_METHODS = {"scatter": scatter, "scatter_reduce": scatter_reduce, "index_add": index_add,
            "index_copy": index_copy, "index_fill": index_fill, "index_put": index_put,
            "index_reduce": index_reduce}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
    setattr(Tensor, _name + "_", _inplace(_name + "_", _fn))
Tensor.scatter_add = _scatter_add
Tensor.scatter_add_ = _inplace("scatter_add_", _scatter_add)
scatter_add = _scatter_add
