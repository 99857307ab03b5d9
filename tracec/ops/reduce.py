"""Reductions: ``reduce_sum``, ``reduce_max``, ``reduce_min`` over a tuple
of axes, and ``argmax`` / ``argmin`` over one axis.

Invariant: ``axes`` are normalized (non-negative, sorted, unique) and the
reduced axes are removed from the result (the front end reshapes for
``keepdim``).  A full reduction of a 0-d value is the identity.  Eager
results are row-major whatever the input's strides, as PyTorch allocates a
reduction's output (NumPy's would follow a permuted input's order, and a
``view`` of it would fail where torch's succeeds).
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.ops.core import Primitive, ShapeError
from tracec.ops import elementwise as ew, movement  # noqa: F401  (call-time use)


def _reduce_shape(s, *, axes):
    for a in axes:
        if not 0 <= a < max(len(s), 1):
            raise ShapeError(f"reduction axis {a} out of range for shape {tuple(s)}")
    return tuple(d for i, d in enumerate(s) if i not in axes)


def _keep_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _row_major(a):
    return a if a.flags.c_contiguous else a.copy(order="C")


def _sum_impl(x, *, axes):
    if ew._IGNORE_FP is None:
        with ew.quiet_fp():   # (inf + -inf is NaN silently, as PyTorch's)
            return _sum(x, axes)
    # (quiet_fp's own steps, without a context manager object per call)
    token = ew._set_fp(ew._IGNORE_FP)
    try:
        return _sum(x, axes)
    finally:
        ew._reset_fp(token)


def _sum(x, axes):
    # bool sums count (int64), as the dtype rule says; others keep their dtype.
    # (dtype.char: '?' is bool, 'e' float16; cheaper than comparing dtypes)
    c = x.dtype.char
    acc = np.int64 if c == "?" else x.dtype
    if x.ndim == 0:
        return x.astype(acc)
    if c == "e":
        # In float32, rounded once, as PyTorch (and the compiled kernels) do:
        # NumPy's float16 sum along an outer axis rounds at every step.
        return _row_major(np.add.reduce(x, axis=axes, dtype=np.float32).astype(np.float16))
    if len(axes) == x.ndim:
        # every axis: into a 0-d array (NumPy's own result array, which it
        # would unwrap to a scalar for the caller to wrap again)
        return np.add.reduce(x, axis=axes, dtype=acc, out=np.empty((), acc))
    return _row_major(np.add.reduce(x, axis=axes, dtype=acc))


def _sum_dtype(d, *, axes):
    return dt.int64 if d is dt.bool_ else d


def _sum_vjp(g, x, out, *, axes):
    shape = tuple(x.shape)
    if not shape:
        return (g,)
    return (movement.broadcast_to(movement.reshape(g, _keep_shape(shape, axes)), shape),)


def _extreme_vjp(g, x, out, *, axes):
    # Ties share the gradient evenly (PyTorch's amax/amin and full max()).
    shape = tuple(x.shape)
    if not shape:
        return (g,)
    keep = _keep_shape(shape, axes)
    mask = ew.eq(x, movement.broadcast_to(movement.reshape(out, keep), shape))
    maskf = ew.cast(mask, dtype=x.dtype)
    count = reduce_sum(maskf, axes=axes)
    share = movement.broadcast_to(movement.reshape(ew.div(g, count), keep), shape)
    return (ew.mul(share, maskf),)


def _extreme_impl(f):
    def impl(x, *, axes):
        if x.ndim == 0:
            return x.copy()
        if x.size == 0 and any(x.shape[a] == 0 for a in axes):
            raise RuntimeError("max/min(): cannot reduce over a zero-size dimension")
        return _row_major(f(x, axis=axes))
    return impl


reduce_sum_p = Primitive("reduce_sum", kind="reduce", impl=_sum_impl, shape_rule=_reduce_shape,
                         dtype_rule=_sum_dtype, vjp=_sum_vjp, save=())
reduce_max_p = Primitive("reduce_max", kind="reduce", impl=_extreme_impl(np.max),
                         shape_rule=_reduce_shape, dtype_rule=lambda d, **_: d,
                         vjp=_extreme_vjp, save=(0,), save_out=True)
reduce_min_p = Primitive("reduce_min", kind="reduce", impl=_extreme_impl(np.min),
                         shape_rule=_reduce_shape, dtype_rule=lambda d, **_: d,
                         vjp=_extreme_vjp, save=(0,), save_out=True)


def _arg_shape(s, *, axis):
    if not s:
        return ()
    if not 0 <= axis < len(s):
        raise ShapeError(f"argmax/argmin axis {axis} out of range for shape {tuple(s)}")
    if s[axis] == 0:
        raise ShapeError("argmax/argmin: cannot reduce over a zero-size dimension")
    return tuple(d for i, d in enumerate(s) if i != axis)


def _arg_impl(f):
    def impl(x, *, axis):
        if x.ndim == 0:
            return np.zeros((), np.int64)
        return _row_major(f(x, axis=axis).astype(np.int64))
    return impl


argmax_p = Primitive("argmax", kind="reduce", impl=_arg_impl(np.argmax), shape_rule=_arg_shape,
                     dtype_rule=lambda d, **_: dt.int64, vjp=None)
argmin_p = Primitive("argmin", kind="reduce", impl=_arg_impl(np.argmin), shape_rule=_arg_shape,
                     dtype_rule=lambda d, **_: dt.int64, vjp=None)


def reduce_sum(x, axes): return reduce_sum_p.bind(x, axes=tuple(axes))
def reduce_max(x, axes): return reduce_max_p.bind(x, axes=tuple(axes))
def reduce_min(x, axes): return reduce_min_p.bind(x, axes=tuple(axes))
def argmax(x, axis): return argmax_p.bind(x, axis=axis)
def argmin(x, axis): return argmin_p.bind(x, axis=axis)
