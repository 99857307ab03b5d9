"""Creation primitives: ``full`` (a constant-filled tensor) and ``iota``
(0, 1, 2, ... along one axis).  They take no tensor operand, so they are
bound with ``like=`` naming a value of the context they belong to."""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec.ops.core import Primitive


def _full_impl(*, value, shape, dtype):
    if type(value) in (int, bool, float) and value == 0 and math.copysign(1.0, value) > 0:
        # calloc'd: no pass writing zeros, pages mapped when first written
        # (a gather's gradient is a scatter into a large zero tensor whose
        # copy then reads no memory); the same +0 values.
        return np.zeros(shape, dtype=dtype.np)
    return np.full(shape, value, dtype=dtype.np)


full_p = Primitive("full", kind="creation", impl=_full_impl,
                   shape_rule=lambda *, value, shape, dtype: tuple(shape),
                   dtype_rule=lambda *, value, shape, dtype: dtype, vjp=None)


def _iota_impl(*, shape, dtype, axis):
    r = np.arange(shape[axis], dtype=dtype.np)
    return np.broadcast_to(r.reshape([-1 if i == axis else 1 for i in range(len(shape))]),
                           shape).copy()


iota_p = Primitive("iota", kind="creation", impl=_iota_impl,
                   shape_rule=lambda *, shape, dtype, axis: tuple(shape),
                   dtype_rule=lambda *, shape, dtype, axis: dtype, vjp=None)


def full(shape, value, dtype: dt.DType, like):
    return full_p.bind(value=value, shape=tuple(shape), dtype=dtype, like=like)


def zeros(shape, dtype: dt.DType, like):
    return full(shape, 0, dtype, like)


def iota(shape, dtype: dt.DType, axis: int, like):
    return iota_p.bind(shape=tuple(shape), dtype=dtype, axis=axis, like=like)
