"""``argsort``: the permutation that sorts a value along one axis.

It is the one data-dependent ordering primitive: ``sort``, ``topk``,
``argsort`` and sampling without replacement are composites of it and
``gather`` (values, with their gradient) in ``tracec.sorting``.

Invariant: the order is stable (equal values keep their original order,
in both directions) and NaN sorts as the largest value, as PyTorch's CPU
``sort(stable=True)`` does.  The result is int64 indices of ``x``'s shape,
with no gradient.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.ops.core import Primitive, ShapeError


def _argsort_shape(s, *, axis, descending):
    if s and not 0 <= axis < len(s):
        raise ShapeError(f"argsort: axis {axis} out of range for shape {tuple(s)}")
    return tuple(s)


def _argsort_impl(x, *, axis, descending):
    if x.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64)
    # Descending and stable: sort the reversed axis ascending (equal values
    # then come in reverse order, NaN last), and read the result backwards.
    n = x.shape[axis]
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - idx, axis).astype(np.int64)


argsort_p = Primitive("argsort", kind="index", impl=_argsort_impl, shape_rule=_argsort_shape,
                      dtype_rule=lambda d, **_: dt.int64, vjp=None)


def argsort(x, axis: int, descending: bool = False):
    return argsort_p.bind(x, axis=axis, descending=bool(descending))
