"""Counting values into bins: ``histc histogram bincount searchsorted
bucketize``.

Invariant: ``histc histogram searchsorted bucketize`` are composites of
comparisons and sums (so they trace; the bin of each element is found by
comparing it with every edge: memory is elements x bins), with no gradient
(as PyTorch's); ``bincount``'s output length is the input's largest value,
so it reads the values: eager only (``concrete``, a ``TraceError`` inside
``tracec.compile``).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import promote, tensor_arg
from tracec.tensor import Tensor, concrete

__all__ = ["histc", "histogram", "bincount", "searchsorted", "bucketize"]

HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def _range(flat, lo, hi, widen):
    """(lo, hi) as 0-d tensors: the data's min and max when lo == hi, widened
    by ``widen`` on each side when those are equal too."""
    if lo == hi and flat.shape[0]:
        lo_t, hi_t = ops.reduce_min(flat, (0,)), ops.reduce_max(flat, (0,))
        same = ops.eq(lo_t, hi_t)
        return (ops.where(same, ops.sub(lo_t, widen), lo_t),
                ops.where(same, ops.add(hi_t, widen), hi_t))
    pad = widen if lo == hi else 0.0
    return (ops.full((), float(lo) - pad, flat.dtype, like=flat),
            ops.full((), float(hi) + pad, flat.dtype, like=flat))


def _uniform_bins(flat, lo, hi, bins):
    """Each element's bin among ``bins`` equal ones on [lo, hi] (-1 outside)."""
    inside = ops.logical_and(ops.ge(flat, lo), ops.le(flat, hi))
    b = ops.cast(ops.mul(ops.div(ops.sub(flat, lo), ops.sub(hi, lo)), float(bins)), dt.int64)
    b = ops.where(ops.eq(b, bins), bins - 1, b)
    return ops.where(inside, b, -1)


def _count(b, bins, weight, like):
    edges = ops.iota((1, bins), dt.int64, 1, like=like)
    hits = ops.cast(ops.eq(ops.reshape(b, (b.shape[0], 1)), edges), like.dtype)
    if weight is not None:
        hits = ops.mul(hits, ops.reshape(weight, (b.shape[0], 1)))
    return ops.reduce_sum(hits, (0,))


def _float_input(x, name):
    x = tensor_arg(x, name)
    if not x.dtype.is_floating_point:
        names = {"int64": "Long", "int32": "Int", "bool": "Bool"}
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{names[x.dtype.name]}'")
    return x


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    x = _float_input(input, "histc")
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for bins")
    if min > max:
        raise RuntimeError("torch.histc(): max must be larger than min")
    flat = ops.reshape(x.detach(), (x.numel(),))
    lo, hi = _range(flat, min, max, 1.0)
    return _count(_uniform_bins(flat, lo, hi, bins), bins, None, flat)


def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """``(hist, bin_edges)``: ``bins`` equal bins over ``range`` (default the
    data's min and max), or the given increasing edges."""
    x = _float_input(input, "histogram")
    flat = ops.reshape(x.detach(), (x.numel(),))
    w = None if weight is None else ops.reshape(tensor_arg(weight, "histogram").detach(),
                                                (x.numel(),))
    if isinstance(bins, Tensor):
        edges = bins.detach()
        if edges.ndim != 1 or edges.shape[0] < 2:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension and "
                               "at least 2 elements")
        nb = edges.shape[0] - 1
        lower = ops.slice_(edges, (0,), (nb,), (1,))
        # The bin is the number of lower edges at or below x, minus one; the
        # last edge closes the last bin.
        b = ops.sub(ops.reduce_sum(ops.cast(ops.ge(ops.reshape(flat, (flat.shape[0], 1)),
                                                   ops.reshape(lower, (1, nb))), dt.int64),
                                   (1,)), 1)
        last = ops.reshape(ops.slice_(edges, (nb,), (nb + 1,), (1,)), ())
        first = ops.reshape(ops.slice_(edges, (0,), (1,), (1,)), ())
        inside = ops.logical_and(ops.ge(flat, first), ops.le(flat, last))
        b = ops.where(inside, ops.where(ops.eq(flat, last), nb - 1, b), -1)
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for bins")
        nb = int(bins)
        lo, hi = _range(flat, *(range if range is not None else (0.0, 0.0)), 0.5)
        if range is not None and range[0] > range[1]:
            raise RuntimeError("torch.histogram(): min should not exceed max, but got min "
                               f"{range[0]} max {range[1]}")
        steps = ops.div(ops.iota((nb + 1,), x.dtype, 0, like=x), float(nb))
        edges = ops.add(lo, ops.mul(steps, ops.sub(hi, lo)))
        b = _uniform_bins(flat, lo, hi, nb)
    hist = _count(b, nb, w, flat)
    if density:
        widths = ops.sub(ops.slice_(edges, (1,), (nb + 1,), (1,)),
                         ops.slice_(edges, (0,), (nb,), (1,)))
        hist = ops.div(hist, ops.mul(ops.reduce_sum(hist, (0,)), widths))
    return HistogramResult(hist, edges)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """Eager only: the output's length is the input's largest value + 1."""
    x = tensor_arg(input, "bincount")
    if x.ndim != 1 or x.dtype.is_floating_point or x.dtype is dt.bool_:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    a = concrete(x, "bincount() (eager only: its size depends on the values)")
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return Tensor._make(np.bincount(a, minlength=minlength).astype(np.int64), dt.int64)
    w = concrete(weights, "bincount() (eager only)")
    d = weights.dtype if weights.dtype.is_floating_point else dt.float64
    return Tensor._make(np.bincount(a, weights=w, minlength=minlength).astype(d.np), d)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,  # noqa: A002
                 sorter=None):
    """Insertion points of ``input`` in the last dimension of
    ``sorted_sequence``: how many of its elements are < each value (<= with
    ``right`` or ``side="right"``)."""
    seq = tensor_arg(sorted_sequence, "searchsorted")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites,"
                               " got side of left while right was True")
        right = side == "right"
    if sorter is not None:
        seq = ops.gather(seq, sorter, seq.ndim - 1)
    scalar = not isinstance(input, Tensor)
    v = Tensor._make(np.asarray(input, dtype=seq.dtype.np), seq.dtype) if scalar else input
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(v.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           "the first N-1 dimensions of boundaries tensor and input value "
                           "tensor must match")
    v = v.detach()
    if v.dtype is not seq.dtype:
        (seq, v), _ = promote("searchsorted", seq, v)
    m = seq.shape[-1]
    if seq.ndim == 1:
        s = ops.reshape(seq.detach(), (1,) * v.ndim + (m,))
    else:
        s = ops.reshape(seq.detach(), tuple(seq.shape[:-1]) + (1, m))
    cmp = ops.le if right else ops.lt
    r = ops.reduce_sum(ops.cast(cmp(s, ops.reshape(v, tuple(v.shape) + (1,))), dt.int64),
                       (v.ndim,))
    return ops.cast(r, dt.int32) if out_int32 else r


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    b = tensor_arg(boundaries, "bucketize")
    if b.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right)


Tensor.histc = histc
Tensor.histogram = histogram
Tensor.bincount = bincount
