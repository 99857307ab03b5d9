"""Counting values into bins: ``histc bincount`` (``histogram searchsorted
bucketize``: ``search_ops``).

Invariant: ``histc`` is a composite of comparisons and sums (so it traces;
the bin of each element is found by comparing it with every bin number:
memory is elements x bins), with no gradient (as PyTorch's); ``bincount``'s
output length is the input's largest value, so it reads the values: eager
only (``concrete``, a ``TraceError`` inside ``tracec.compile``).
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import tensor_arg
from tracec.tensor import Tensor, concrete

__all__ = ["histc", "bincount"]

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
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for "
                                  f"'{names[x.dtype.name]}'")
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


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """Eager only: the output's length is the input's largest value + 1."""
    x = tensor_arg(input, "bincount")
    # PyTorch's order: the input's dtype (its dispatch), minlength, the
    # input's rank and values, then the weights' shape
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype is dt.bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for "
                                  f"'{dt.scalar_type_name(x.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if x.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    a = concrete(x, "bincount() (eager only: its size depends on the values)")
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return Tensor._make(np.bincount(a, minlength=minlength).astype(np.int64), dt.int64)
    if weights.ndim != 1 or weights.shape[0] != a.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    w = concrete(weights, "bincount() (eager only)")
    # float32 weights count in float32; any other dtype in float64
    d = dt.float32 if weights.dtype is dt.float32 else dt.float64
    return Tensor._make(np.bincount(a, weights=w.astype(np.float64), minlength=minlength)
                        .astype(d.np), d)


Tensor.histc = histc
Tensor.bincount = bincount
