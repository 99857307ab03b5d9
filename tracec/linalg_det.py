"""``linalg.det`` and ``linalg.slogdet`` (``logdet``) inside
``tracec.compile``: the diagonal of getrf's LU (partial pivoting, the first
largest magnitude; a zero pivot column skipped, as getrf) written with
primitives, one unrolled step per column.

Invariants: ``det`` is the permutation's sign times the pivots' product,
``slogdet`` that sign times the pivots' signs and the sum of their log
magnitudes (a singular matrix: 0 and -inf, as PyTorch), to rounding.  The
gradients are PyTorch's for an invertible matrix, ``g det A^-T`` and
``g A^-T`` (``A^-1`` by Gauss-Jordan, held fixed); ``logabsdet``'s at a
singular matrix has PyTorch's infinities / NaNs, while ``det``'s there
(PyTorch's SVD formula) is not traced: a traced ``det`` of a singular
matrix that requires grad raises, naming why.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ops
from tracec.linalg_gauss_jordan import batch_iota, checked, mT, partial_pivot, unchecked_inverse

__all__ = ["det", "slogdet"]


def _lu_diagonal(A):
    """getrf's pivots (a list of n (...,) values) and its row permutation's
    sign (...,) for ``A`` (..., n, n), no gradient."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    nb = len(batch)
    d = A.dtype
    M = ops.stop_gradient(A)
    zero, one = ops.full((), 0, d, M), ops.full((), 1, d, M)
    rows = ops.iota(batch + (n, 1), dt.int64, nb, M)
    sign = ops.broadcast_to(one, batch)
    pivots = []
    for j in range(n):
        M, row_p, pivot, moved = partial_pivot(M, j, rows)
        sign = ops.where(moved, ops.neg(sign), sign)
        pivots.append(pivot)
        # (a zero pivot: its column below is zero too, getrf skips the step)
        safe = ops.reshape(ops.where(ops.eq(pivot, 0), one, pivot), batch + (1, 1))
        below = ops.slice_(M, (0,) * nb + (0, j), batch + (n, j + 1), (1,) * (nb + 2))
        factor = ops.where(ops.gt(rows, j), ops.div(below, safe), zero)
        M = ops.sub(M, ops.mul(factor, ops.reshape(row_p, batch + (1, n))))
    return pivots, sign


def _with_inverse_vjp(value, scale, A):
    """``value`` whose gradient is ``g scale A^-T`` (``scale`` fixed):
    ``value + (l - l)``, ``l = scale * sum(A^-T * A)`` (A^-1 fixed)."""
    inv_t = ops.stop_gradient(mT(unchecked_inverse(A)))
    l = ops.reduce_sum(ops.mul(inv_t, A), (A.ndim - 2, A.ndim - 1))
    if scale is not None:
        l = ops.mul(l, ops.stop_gradient(scale))
    diff = ops.sub(l, ops.stop_gradient(l))
    # (a singular A: l is NaN; the value keeps -inf, the gradient PyTorch's NaNs)
    return ops.add(value, ops.where(ops.eq(diff, diff), diff, ops.full((), 0, diff.dtype, diff)))


def det(A, name: str, needs_grad: bool):
    """``det(A)`` of real ``A`` (..., n, n) while tracing."""
    pivots, value = _lu_diagonal(A)
    for p in pivots:
        value = ops.mul(value, p)
    if not needs_grad:
        return value
    batch = tuple(A.shape[:-2])
    message = (f"{name}: {'(Batch element {index}): ' if batch else ''}the matrix is singular: "
               "tracec.compile differentiates det of invertible matrices only (PyTorch's "
               "gradient there goes through an SVD, which tracec computes eagerly); call it "
               "outside the compiled function")
    value = checked(value, ops.ne(value, 0), batch_iota(batch, A), message)
    return _with_inverse_vjp(value, value, A)


def slogdet(A, needs_grad: bool):
    """``(sign, logabsdet)`` of real ``A`` (..., n, n) while tracing."""
    pivots, sign = _lu_diagonal(A)
    lad = ops.broadcast_to(ops.full((), 0, A.dtype, A), tuple(A.shape[:-2]))
    for p in pivots:
        sign = ops.mul(sign, ops.sign(p))
        lad = ops.add(lad, ops.log(ops.abs_(p)))
    if needs_grad:
        lad = _with_inverse_vjp(lad, None, A)
    return ops.add(sign, ops.full((), 0, sign.dtype, sign)), lad      # (-0 -> 0, as PyTorch)
