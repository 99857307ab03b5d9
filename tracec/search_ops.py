"""Searching sorted data and finding distinct values: ``searchsorted``,
``bucketize``, ``unique``, ``unique_consecutive``, ``histogram``.

Invariant: ``searchsorted`` / ``bucketize`` are composites (an insertion
point is a count of the boundaries below a value: one broadcast compare
and a sum, so they compile, at O(values x boundaries) work); ``unique``,
``unique_consecutive`` and ``histogram`` read the values in Python
(``concrete``: their result sizes depend on them) and have no gradient,
as in PyTorch.
"""
from __future__ import annotations

import builtins

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import promote
from tracec.tensor import Tensor, concrete
from tracec.return_types import structseq

__all__ = ["searchsorted", "bucketize", "unique", "unique_consecutive", "histogram", "histogramdd"]

histogram_result = structseq("histogram", ["hist", "bin_edges"])
histogramdd_result = structseq("histogramdd", ["hist", "bin_edges"])


def _insertion(seq, values, right, out_int32):
    """Per value, the number of entries of ``seq`` (last dim) below it
    (``right``: at or below), with ``seq``'s leading dims matching
    ``values``'s."""
    (seq, values), _ = promote("searchsorted", seq, values)
    cmp = ops.le if right else ops.lt
    v = ops.reshape(values, tuple(values.shape) + (1,))
    s = ops.reshape(seq, tuple(seq.shape[:-1]) + (1, seq.shape[-1])) if seq.ndim > 1 else seq
    hit = cmp(s, v)
    if v.dtype.is_floating_point:   # (PyTorch's binary search puts a NaN value past the end)
        hit = ops.logical_or(hit, ops.ne(v, v))
    hits = ops.cast(hit, dt.int64)
    out = ops.reduce_sum(hits, axes=(hits.ndim - 1,))
    return ops.cast(out, dt.int32) if out_int32 else out


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar:
        input = Tensor._from_data(np.array(input), None)
    if sorted_sequence.ndim > 1 and (input.ndim != sorted_sequence.ndim or tuple(
            input.shape[:-1]) != tuple(sorted_sequence.shape[:-1])):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           "the first N-1 dimensions of boundaries tensor and input value "
                           "tensor must match, but we got boundaries tensor "
                           f"{list(sorted_sequence.shape)} and input value tensor "
                           f"{list(input.shape)}")
    if sorter is not None:
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same "
                               f"size, but got boundary tensor {list(sorted_sequence.shape)}"
                               f"and got sorter tensor {list(sorter.shape)}")
        s = sorter if sorter.dtype is dt.int64 else ops.cast(sorter, dt.int64)
        sorted_sequence = ops.gather(sorted_sequence, s, sorted_sequence.ndim - 1)
    return _insertion(sorted_sequence, input, right, out_int32)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _result(x, values, inverse, counts, return_inverse, return_counts):
    out = [Tensor._from_data(np.ascontiguousarray(values), x.dtype)]
    if return_inverse:
        out.append(Tensor._from_data(inverse.astype(np.int64)))
    if return_counts:
        out.append(Tensor._from_data(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Distinct values (always sorted, as PyTorch's CPU ``unique`` returns
    them), the inverse map and the counts."""
    a = concrete(input, "unique (its result's size depends on the values)")
    if dim is None:
        # (NaN != NaN: PyTorch keeps every NaN, in the order they appear)
        vals, inv, cnt = np.unique(a.reshape(-1), return_inverse=True, return_counts=True,
                                   equal_nan=False)
        return _result(input, vals, inv.reshape(a.shape), cnt, return_inverse, return_counts)
    from tracec.ops.core import normalize_axis
    d = normalize_axis(dim, input.ndim)
    vals, inv, cnt = np.unique(a, return_inverse=True, return_counts=True, axis=d)
    return _result(input, vals, inv.reshape(-1), cnt, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    a = concrete(input, "unique_consecutive (its result's size depends on the values)")
    if dim is None:
        flat = a.reshape(-1)
        starts = np.ones(flat.size, bool)
        starts[1:] = flat[1:] != flat[:-1]
        group = np.cumsum(starts) - 1
        vals = flat[starts]
        inv = group.reshape(a.shape)
    else:
        from tracec.ops.core import normalize_axis
        d = normalize_axis(dim, input.ndim)
        moved = np.moveaxis(a, d, 0)
        n = moved.shape[0]
        starts = np.ones(n, bool)
        if n > 1:
            starts[1:] = (moved[1:] != moved[:-1]).reshape(n - 1, -1).any(axis=1)
        group = np.cumsum(starts) - 1
        vals = np.moveaxis(moved[starts], 0, d)
        inv = group
    idx = np.flatnonzero(starts)
    cnt = np.diff(np.append(idx, starts.size))
    return _result(input, vals, inv, cnt, return_inverse, return_counts)


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    if isinstance(bins, Tensor) and bins.dtype is not input.dtype:
        c = {**dt._C_NAMES, "int64": "long int", "bool": "bool"}
        raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the "
                           f"same dtype, but got input with dtype {c.get(input.dtype.name)} and "
                           f"bins for dimension 0 with dtype {c.get(bins.dtype.name)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for "
                                  f"'{dt.scalar_type_name(input.dtype)}'")
    a = concrete(input, "histogram").reshape(-1)
    w = concrete(weight, "histogram").reshape(-1) if weight is not None else None
    edges = concrete(bins, "histogram") if isinstance(bins, Tensor) else \
        _linear_edges(a, int(bins), range, input.dtype)
    hist = _bin_counts(a, edges, w, input.dtype.np)
    if density:      # (PyTorch's order: over the total, then over each bin's width)
        hist = hist / hist.sum(dtype=hist.dtype)
        hist = hist / np.diff(edges).astype(hist.dtype)
    return histogram_result(Tensor._from_data(hist.astype(input.dtype.np), input.dtype),
                            Tensor._from_data(np.array(edges, input.dtype.np), input.dtype))


def _linear_edges(a: np.ndarray, bins: int, range_, d) -> np.ndarray:
    """PyTorch's ``bins + 1`` equal-width edges: ``linspace`` in the input's
    dtype (its rounding, not NumPy's float64 one) from the range, else the
    values' extremes (widened by 0.5 either side when equal; [0, 1] for no
    values)."""
    from tracec.creation import linspace
    if range_ is not None:
        lo, hi = float(range_[0]), float(range_[1])
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                               f"{lo:g} max {hi:g} for dimension 0")
    elif a.size:
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 1.0
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histogramdd: dimension 0's range [{lo:g}, {hi:g}] is not "
                           "finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return linspace(lo, hi, bins + 1, dtype=d)._data


def _bin_counts(a: np.ndarray, edges: np.ndarray, w, np_dtype) -> np.ndarray:
    """Per bin [e[i], e[i+1]) (the last one closed) the count, or the sum of
    the weights, of ``a``'s values, accumulated in the dtype in order."""
    hist = np.zeros(max(edges.size - 1, 0), np_dtype)
    if not a.size or not hist.size:
        return hist
    inside = (a >= edges[0]) & (a <= edges[-1])
    pos = np.searchsorted(edges, a[inside], side="right") - 1
    pos[pos == edges.size - 1] = edges.size - 2
    np.add.at(hist, pos, np.ones(pos.size, np_dtype) if w is None else w[inside].astype(np_dtype))
    return hist


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """``torch.histogramdd``: the last dim of ``input`` holds each point's
    coordinates; ``bins`` is a count, one count per dim, or one tensor of
    edges per dim; ``range`` is flat ``[lo0, hi0, lo1, hi1, ...]``.  Returns
    ``(hist, bin_edges)`` with ``bin_edges`` a tuple, all in input's dtype
    (NumPy's ``histogramdd`` bins: the same rules, a degenerate range
    widened by 0.5 on each side as PyTorch does)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for "
                                  f"'{dt.scalar_type_name(input.dtype)}'")
    if input.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    a = concrete(input, "histogramdd")
    d = a.shape[-1]
    if isinstance(bins, int):
        b = [bins] * d
    else:
        b = [concrete(e, "histogramdd") if isinstance(e, Tensor) else int(e) for e in bins]
        if len(b) != d:
            raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                               "dimension of the input.")
    pairs = None if range is None else [(float(range[2 * i]), float(range[2 * i + 1]))
                                        for i in builtins.range(d)]
    w = None if weight is None else concrete(weight, "histogramdd").reshape(-1)
    hist, edges = np.histogramdd(a.reshape(-1, d), bins=b, range=pairs, weights=w,
                                 density=density)
    return histogramdd_result(
        Tensor._from_data(hist.astype(input.dtype.np), input.dtype),
        tuple(Tensor._from_data(e.astype(input.dtype.np), input.dtype) for e in edges))


Tensor.unique = unique
Tensor.unique_consecutive = unique_consecutive
Tensor.histogram = histogram
