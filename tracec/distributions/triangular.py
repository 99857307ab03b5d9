"""Cholesky factorization and lower-triangular solves for
``MultivariateNormal`` and friends: LAPACK (``tracec.linalg``) in eager
mode; while ``tracec.compile`` records (LAPACK cannot be recorded), tensor
ops, one column or row per step, for event sizes up to ``SMALL``, which
autodiff differentiates.

Invariant: the same arithmetic as textbook Cholesky-Banachiewicz and
forward substitution, so results agree with LAPACK to rounding."""
from __future__ import annotations

from tracec import linalg
from tracec.shape_ops import stack
from tracec.tensor import CONCRETE_CHECKS, Tensor

__all__ = ["SMALL", "cholesky", "solve_lower"]

SMALL = 16


def _use_ops(n: int) -> bool:
    # A trace being recorded is the only thing that registers a concrete
    # check (it refuses LAPACK's reading of values).
    return bool(CONCRETE_CHECKS) and n <= SMALL


def cholesky(A: Tensor) -> Tensor:
    """The lower Cholesky factor of ``A`` (batched)."""
    n = A.shape[-1]
    if not _use_ops(n):
        return linalg.cholesky(A)
    # Read through the symmetric part, so the gradient is symmetric as
    # PyTorch's cholesky backward makes it (the value is unchanged).
    A = (A + A.transpose(-2, -1)) * 0.5
    cols = []                       # cols[j]: column j of L, shape (..., n)
    for j in range(n):
        # A[:, j] - sum_{k<j} L[:, k] L[j, k]
        v = A[..., :, j]
        for k in range(j):
            v = v - cols[k] * cols[k][..., j:j + 1]
        d = v[..., j:j + 1].sqrt()
        col = v / d
        # Zero above the diagonal, the diagonal itself is sqrt(v_j).
        mask = A.new_tensor([0.0] * j + [1.0] * (n - j))
        cols.append(col * mask)
    return stack(cols, -1)


def solve_lower(L: Tensor, B: Tensor) -> Tensor:
    """``X`` with ``L @ X = B`` for lower-triangular ``L``; ``B`` is
    ``(..., n, k)`` and broadcasts with ``L``."""
    n = L.shape[-1]
    if not _use_ops(n):
        return linalg.solve_triangular(L, B, upper=False)
    rows = []                       # rows[i]: row i of X, shape (..., k)
    for i in range(n):
        r = B[..., i, :]
        for k in range(i):
            r = r - L[..., i, k:k + 1] * rows[k]
        rows.append(r / L[..., i, i:i + 1])
    return stack(rows, -2)
