"""LAPACK's LU factorization and solve (getrf / getrs) in NumPy: the
factorization behind ``torch.linalg.lu`` / ``lu_factor``, and the solve for
the matrices NumPy's ``inv`` / ``solve`` refuse: exactly singular ones.

PyTorch factors with getrf and reports ``info`` (the 1-based index of the
first zero pivot, 0 for none) instead of raising in ``inv_ex`` /
``solve_ex``, finishing the solve anyway: its result there is the
infinities and NaNs of dividing by that zero pivot.  This module repeats
those steps (partial pivoting, unit-lower then upper triangular solves,
nothing skipped for zero entries, as the optimized BLAS kernels skip
nothing), so the same inf / NaN pattern comes out.  Invariant: for a
nonsingular matrix the result equals the solve to rounding; callers use
it only where NumPy raised.
"""
from __future__ import annotations

import numpy as np

__all__ = ["getrf", "lu_solve", "lu_inverse"]


def getrf(a: np.ndarray):
    """(LU, 1-based int32 pivots, int32 info) of a batch of m x n matrices:
    getrf's row choice (the first largest magnitude) and layout."""
    m, n = a.shape[-2:]
    k = min(m, n)
    work = np.array(a, dtype=np.float64 if a.dtype == np.float64 else np.float32)
    batch = work.reshape((-1, m, n))
    piv = np.zeros((batch.shape[0], k), np.int32)
    info = np.zeros(batch.shape[0], np.int32)
    rows = np.arange(batch.shape[0])
    for j in range(k):
        p = np.argmax(np.abs(batch[:, j:, j]), axis=1) + j
        piv[:, j] = p + 1
        top = batch[rows, j, :].copy()
        batch[rows, j, :] = batch[rows, p, :]
        batch[rows, p, :] = top
        pivot = batch[:, j, j]
        zero = pivot == 0
        info = np.where(zero & (info == 0), j + 1, info)
        # (getf2 scales by the reciprocal of the pivot: float32 rounds so)
        scale = (1 / np.where(zero, 1.0, pivot)).astype(batch.dtype)
        batch[:, j + 1:, j] *= scale[:, None]
        batch[:, j + 1:, j + 1:] -= batch[:, j + 1:, j, None] * batch[:, j, None, j + 1:]
    lead = a.shape[:-2]
    return work, piv.reshape(lead + (k,)), info.reshape(lead)


def lu_solve(lu: np.ndarray, piv: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``X`` with ``A X = b`` from one matrix's ``getrf`` factors (b: n x k):
    getrs's row swaps, then the unit-lower and upper triangular solves."""
    x = np.array(b, dtype=np.result_type(lu, b), copy=True)
    n = lu.shape[-1]
    with np.errstate(all="ignore"):
        for j, p in enumerate(piv - 1):
            x[[j, p]] = x[[p, j]]
        for i in range(1, n):                     # L y = P b (unit lower)
            x[i] -= lu[i, :i] @ x[:i]
        for k in range(n - 1, -1, -1):            # U x = y, column by column
            x[k] /= lu[k, k]
            x[:k] -= np.outer(lu[:k, k], x[k])
    return x


def lu_inverse(a: np.ndarray):
    """``(inverse, info)`` over a batch of square matrices (info int32)."""
    lu, piv, info = getrf(a)
    n = a.shape[-1]
    flat_lu, flat_piv = lu.reshape((-1, n, n)), piv.reshape((-1, n))
    eye = np.eye(n, dtype=lu.dtype)
    out = np.stack([lu_solve(m, p, eye) for m, p in zip(flat_lu, flat_piv)]) if len(flat_lu) \
        else np.empty(flat_lu.shape, lu.dtype)
    return out.reshape(a.shape), info
