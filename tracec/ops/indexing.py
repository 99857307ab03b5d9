"""Integer-index primitives.

* ``take(x, idx, axis)``: ``x`` indexed by an integer array along one axis;
  the result has shape ``x.shape[:axis] + idx.shape + x.shape[axis+1:]``.
* ``index_add(x, idx, src, axis)``: the adjoint of ``take``: ``x`` plus
  ``src`` accumulated at those positions (repeated indices add up).
* ``gather(x, idx, axis)``: PyTorch's ``gather`` / NumPy's
  ``take_along_axis`` where ``idx`` matches ``x`` off the axis.
* ``scatter_add(x, idx, src, axis)``: its adjoint.
* ``scatter_max`` / ``scatter_min`` / ``scatter_mul`` ``(x, idx, src, axis)``:
  ``scatter_add`` with another combine (PyTorch's ``scatter_reduce``
  ``amax`` / ``amin`` / ``prod`` with ``include_self=True``).  Their VJPs
  follow PyTorch's: a max/min gradient is shared evenly by every element
  equal to the result; a product's gradient is exact when factors are zero.

Invariant: indices are int64 and checked against the indexed size (negative
indices count from the end); out-of-range indices raise ``IndexError``.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.ops.core import Primitive, ShapeError
from tracec.ops import creation, elementwise as ew  # noqa: F401  (call-time use)


def _check_index(idx, size, what):
    if idx.size and (idx.min() < -size or idx.max() >= size):
        bad = idx[(idx < -size) | (idx >= size)].flat[0]
        raise IndexError(f"{what}: index {bad} is out of bounds for dimension with size {size}")


def _int_idx(d):
    if d.category != 1:
        raise ShapeError(f"indices must be an integer tensor, got {d}")


def _take_shape(xs, ids, *, axis):
    if not 0 <= axis < len(xs):
        raise ShapeError(f"take: axis {axis} out of range for shape {tuple(xs)}")
    return tuple(xs[:axis]) + tuple(ids) + tuple(xs[axis + 1:])


def _take_dtype(xd, idd, *, axis):
    _int_idx(idd)
    return xd


def _take_impl(x, idx, *, axis):
    # np.take checks the range itself (negative indices count from the end,
    # as here): the reductions of ``_check_index`` only to word the error.
    try:
        return np.take(x, idx, axis=axis)
    except IndexError:
        _check_index(idx, x.shape[axis], "index")
        raise


take_p = Primitive(
    "take", kind="index", impl=_take_impl, shape_rule=_take_shape, dtype_rule=_take_dtype,
    vjp=lambda g, x, idx, out, *, axis: (
        index_add(creation.zeros(x.shape, x.dtype, like=g), idx, g, axis), None),
    save=(1,), nondiff_argnums=(1,))


def _index_add_shape(xs, ids, ss, *, axis):
    want = _take_shape(xs, ids, axis=axis)
    if tuple(ss) != want:
        raise ShapeError(f"index_add: source shape {tuple(ss)} should be {want} "
                         f"(destination {tuple(xs)}, index {tuple(ids)}, axis {axis})")
    return tuple(xs)


def _index_add_dtype(xd, idd, sd, *, axis):
    _int_idx(idd)
    if xd is not sd:
        raise ShapeError(f"index_add: dtypes differ ({xd} vs {sd})")
    return xd


def _index_add_impl(x, idx, src, *, axis):
    _check_index(idx, x.shape[axis], "index_add")
    out = x.copy()
    np.add.at(out, (slice(None),) * axis + (idx,), src)
    return out


index_add_p = Primitive(
    "index_add", kind="index", impl=_index_add_impl, shape_rule=_index_add_shape,
    dtype_rule=_index_add_dtype,
    vjp=lambda g, x, idx, src, out, *, axis: (g, None, take(g, idx, axis)),
    save=(1,), nondiff_argnums=(1,))


def _gather_shape(xs, ids, *, axis):
    if len(xs) != len(ids) or not 0 <= axis < len(xs) or any(
            a != b for i, (a, b) in enumerate(zip(xs, ids)) if i != axis):
        raise ShapeError(f"gather: index shape {tuple(ids)} does not match input shape "
                         f"{tuple(xs)} outside dimension {axis}")
    return tuple(ids)


def _gather_impl(x, idx, *, axis):
    _check_index(idx, x.shape[axis], "gather")
    return np.take_along_axis(x, idx, axis=axis)


gather_p = Primitive(
    "gather", kind="index", impl=_gather_impl, shape_rule=_gather_shape,
    dtype_rule=_take_dtype,
    vjp=lambda g, x, idx, out, *, axis: (
        scatter_add(creation.zeros(x.shape, x.dtype, like=g), idx, g, axis), None),
    save=(1,), nondiff_argnums=(1,))


def _scatter_shape(xs, ids, ss, *, axis):
    if tuple(ids) != tuple(ss):
        raise ShapeError(f"scatter_add: index shape {tuple(ids)} and source shape "
                         f"{tuple(ss)} differ")
    _gather_shape(xs, ids, axis=axis)
    return tuple(xs)


def _scatter_impl(x, idx, src, *, axis):
    _check_index(idx, x.shape[axis], "scatter_add")
    out = x.copy()
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    np.add.at(out, tuple(grid), src)
    return out


scatter_add_p = Primitive(
    "scatter_add", kind="index", impl=_scatter_impl, shape_rule=_scatter_shape,
    dtype_rule=_index_add_dtype,
    vjp=lambda g, x, idx, src, out, *, axis: (g, None, gather(g, idx, axis)),
    save=(1,), nondiff_argnums=(1,))


_COMBINE = {"scatter_max": np.maximum, "scatter_min": np.minimum, "scatter_mul": np.multiply}


def _scatter_combine_impl(name):
    def impl(x, idx, src, *, axis):
        _check_index(idx, x.shape[axis], name)
        out = x.copy()
        grid = list(np.indices(idx.shape, sparse=True))
        grid[axis] = idx
        _COMBINE[name].at(out, tuple(grid), src)
        return out
    return impl


def _scatter_extremum_vjp(g, x, idx, src, out, *, axis):
    fd = g.dtype
    at_self = ew.cast(ew.eq(x, out), fd)
    at_src = ew.cast(ew.eq(src, gather(out, idx, axis)), fd)
    count = scatter_add(at_self, idx, at_src, axis)
    share = ew.div(g, count)
    return ew.mul(share, at_self), None, ew.mul(gather(share, idx, axis), at_src)


def _scatter_mul_vjp(g, x, idx, src, out, *, axis):
    # d out / d v is the product of the other factors of v's slot: out / v
    # where v != 0; where v is a slot's only zero, the product of the
    # nonzero factors; else 0.
    fd = g.dtype
    x0, s0 = ew.eq(x, 0), ew.eq(src, 0)
    zeros = scatter_add(ew.cast(x0, fd), idx, ew.cast(s0, fd), axis)
    nonzero_prod = scatter_mul(ew.where(x0, 1, x), idx, ew.where(s0, 1, src), axis)
    g_out, g_nz = ew.mul(g, out), ew.mul(g, nonzero_prod)
    only = ew.eq(zeros, 1)
    gx = ew.where(x0, ew.where(only, g_nz, 0), ew.div(g_out, ew.where(x0, 1, x)))
    gs = ew.where(s0, ew.where(gather(only, idx, axis), gather(g_nz, idx, axis), 0),
                  ew.div(gather(g_out, idx, axis), ew.where(s0, 1, src)))
    return gx, None, gs


def _scatter_combine(name, vjp):
    return Primitive(name, kind="index", impl=_scatter_combine_impl(name),
                     shape_rule=_scatter_shape, dtype_rule=_index_add_dtype, vjp=vjp,
                     save=(0, 1, 2), save_out=True, nondiff_argnums=(1,))


scatter_max_p = _scatter_combine("scatter_max", _scatter_extremum_vjp)
scatter_min_p = _scatter_combine("scatter_min", _scatter_extremum_vjp)
scatter_mul_p = _scatter_combine("scatter_mul", _scatter_mul_vjp)


def take(x, idx, axis): return take_p.bind(x, idx, axis=axis)
def index_add(x, idx, src, axis): return index_add_p.bind(x, idx, src, axis=axis)
def gather(x, idx, axis): return gather_p.bind(x, idx, axis=axis)
def scatter_add(x, idx, src, axis): return scatter_add_p.bind(x, idx, src, axis=axis)
def scatter_max(x, idx, src, axis): return scatter_max_p.bind(x, idx, src, axis=axis)
def scatter_min(x, idx, src, axis): return scatter_min_p.bind(x, idx, src, axis=axis)
def scatter_mul(x, idx, src, axis): return scatter_mul_p.bind(x, idx, src, axis=axis)
