"""Distances between rows: ``pairwise_distance`` and ``pdist`` (PyTorch's
formulas: ``pairwise_distance`` adds ``eps`` to the difference before the
norm).

Invariant: composites of primitives only; ``pdist`` picks its row pairs
with ``take`` and an index table computed from the shape.
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import ops
from tracec import shape_ops as S
from tracec.nn._basic import _tensor
from tracec.tensor import Tensor

__all__ = ["pairwise_distance", "pdist"]


def _pnorm(d: Tensor, p: float, dim: int, keepdim: bool = False) -> Tensor:
    # roots through _safe_root: equal rows get gradient 0 (PyTorch's), not NaN
    if p == 2:
        return TF._safe_root(TF.sum(TF.mul(d, d), dim, keepdim=keepdim), 2)
    if p == 1:
        return TF.sum(TF.abs(d), dim, keepdim=keepdim)
    if p == math.inf:
        return TF.amax(TF.abs(d), dim, keepdim=keepdim)
    if p == 0:       # a count: zero gradient, but the history kept (PyTorch's)
        count = TF.sum(ops.cast(ops.ne(d, 0.0), d.dtype), dim, keepdim=keepdim)
        if not d.requires_grad:
            return count
        return TF.add(count, TF.sum(S.masked_fill(d, Tensor._make(np.array(True), dt.bool_), 0.0),
                                    dim, keepdim=keepdim))
    return TF._safe_root(TF.sum(TF.pow(TF.abs(d), p), dim, keepdim=keepdim), p)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``||x1 - x2 + eps||_p`` over the last dimension."""
    _tensor(x1, "pairwise_distance")
    nd = max(x1.ndim, x2.ndim)
    d = TF.add(TF.sub(x1, x2), eps)
    if nd == 0:
        return TF.abs(d)
    return _pnorm(d, p, -1, keepdim)


def pdist(input, p: float = 2):
    """The ``p``-norm distance between every pair of rows ``i < j`` of an
    ``[N, M]`` input, in row-major order of the pairs: ``[N * (N - 1) / 2]``."""
    x = _tensor(input, "pdist")
    if x.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)     # no pair (n < 2): an empty result that keeps x's history
    a = ops.take(x, Tensor._make(i.astype(np.int64), dt.int64), 0)
    b = ops.take(x, Tensor._make(j.astype(np.int64), dt.int64), 0)
    return TF._named(_pnorm(TF.sub(a, b), p, 1), "PdistBackward0")
