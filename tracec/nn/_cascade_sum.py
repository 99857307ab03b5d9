"""The sums of PyTorch's CPU ``nll_loss`` / ``nll_loss2d`` kernels for
float16 / bfloat16 input, reproduced bit for bit in eager mode.

PyTorch's kernel reduces the picked losses (``-x[i, t_i] * w[t_i]``) and
their weights with a cascade sum in the input's dtype: eight partial sums,
the element added to the first, and after the element at linear index
``b`` (of the flattened target; ignored targets skipped, and not flushing)
partial ``j`` added into partial ``j + 1`` and cleared for each ``j`` while
the ``j``-th group of four bits of ``b`` is zero; at the end the partials
are added in order to 0.  Each addition rounds to the half dtype, so the
order shows in the result (tracec's float32-accumulated sum was one unit
off on a large share of batches; a mean then divides by a differently
rounded total weight, and the gradient ``-(g / total_weight) * w`` with it).

Invariant: ``exact_value`` returns ``y``'s graph (its gradient) with the
kernel's value; where the value cannot be put on that graph exactly it
returns ``y`` unchanged.  Eager only: a traced call keeps the plain sum.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.tensor import Tensor

__all__ = ["cascade_sum", "exact_value"]

_LEVELS = 8


def _rounder(d: dt.DType):
    """float32 -> float32 rounded to ``d`` (one of the half dtypes)."""
    if d is dt.bfloat16:
        return dt.round_bfloat16
    return lambda a: a.astype(np.float16).astype(np.float32)


def _flush_depth(idx: np.ndarray) -> np.ndarray:
    """How many partials the element at linear index ``idx`` flushes: the
    count of its low zero nibbles (at most ``_LEVELS - 1``; index 0 all)."""
    depth = np.zeros(idx.shape, np.int64)
    alive = np.ones(idx.shape, bool)
    for j in range(_LEVELS - 1):
        alive &= ((idx >> (4 * j)) & 15) == 0
        depth += alive
    return depth


def _fold_segments(v: np.ndarray, ends: np.ndarray, rnd):
    """Sequential rounded sums of the runs of ``v`` that end where ``ends``
    is True: (the closed runs' sums in order, the open last run's sum)."""
    n = v.shape[0]
    if n == 0:
        return v, np.float32(0.0)
    seg = np.concatenate([[0], np.cumsum(ends)[:-1]])
    nseg = int(seg[-1]) + 1
    start = np.searchsorted(seg, np.arange(nseg))
    pos = np.arange(n) - start[seg]
    grid = np.zeros((nseg, int(pos.max()) + 1), np.float32)
    used = np.zeros(grid.shape, bool)
    grid[seg, pos] = v
    used[seg, pos] = True
    acc = np.zeros(nseg, np.float32)
    for k in range(grid.shape[1]):
        m = used[:, k]
        acc[m] = rnd(acc[m] + grid[m, k])
    closed = int(ends.sum())
    return acc[:closed], (acc[closed] if closed < nseg else np.float32(0.0))


def cascade_sum(values: np.ndarray, idx: np.ndarray, d: dt.DType) -> np.float32:
    """PyTorch's cascade sum of ``values`` (float32 holding ``d`` values),
    the elements at the ascending linear indices ``idx``, rounded to ``d``
    at each addition."""
    rnd = _rounder(d)
    items, at = values.astype(np.float32).reshape(-1), idx.reshape(-1)
    partials = []
    for j in range(_LEVELS):
        ends = _flush_depth(at) >= j + 1 if j + 1 < _LEVELS else np.zeros(at.shape, bool)
        items, left = _fold_segments(items, ends, rnd)
        partials.append(left)
        at = at[ends]
    total = np.float32(0.0)
    for p in partials:
        total = rnd(np.asarray(total + p, np.float32))
    return np.float32(total)


def exact_value(y: Tensor, value) -> Tensor:
    """``y`` (0-d, a half dtype) with ``value``: ``y + (value - y)`` in
    float32, the difference a constant (so the gradient is ``y``'s)."""
    have = np.float32(y._data)
    want = np.float32(value)
    if have == want or (np.isnan(have) and np.isnan(want)) or not np.isfinite(have):
        return y
    step = np.float32(want - have)
    if _rounder(y.dtype)(np.asarray(have + step, np.float32)) != want:
        return y
    up = ops.add(ops.cast(y, dt.float32), Tensor._make(np.asarray(step), dt.float32))
    return ops.cast(up, y.dtype)
