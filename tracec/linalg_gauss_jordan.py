"""``linalg.inv`` (``inverse``) inside ``tracec.compile``: Gauss-Jordan
elimination written with primitives, so a traced call records it.

Eager calls keep NumPy's LAPACK (``linalg_lapack``); a traced one can read
no values in Python, so it eliminates with partial pivoting as getrf
chooses pivots (the first largest magnitude in the column), one unrolled
step per column, and guards each pivot with a ``check`` (PyTorch's
message for a singular matrix, its batch element and diagonal element).
Invariant: the value is the inverse to rounding (a last bit or so from
LAPACK's, not bit-equal); the gradient is PyTorch's formula,
``-X^T (g X^T)``, through matmuls of the value ``X`` (``_with_vjp``).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ops

__all__ = ["inverse"]


def _rows(M, idx, like_rows):
    """The rows of ``M`` (..., n, m) chosen by ``idx`` (..., ): a masked sum,
    exact (one term, the rest zeros)."""
    pick = ops.eq(like_rows, ops.reshape(idx, tuple(idx.shape) + (1, 1)))
    return ops.reduce_sum(ops.where(pick, M, ops.full((), 0, M.dtype, M)), (M.ndim - 2,))


def _eliminate(A, name: str):
    """The inverse of ``A`` (..., n, n), no gradient."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    d = A.dtype
    X = ops.stop_gradient(A)
    eye = ops.cast(ops.eq(ops.iota((n, n), dt.int64, 0, X), ops.iota((n, n), dt.int64, 1, X)), d)
    M = ops.concatenate([X, ops.broadcast_to(eye, batch + (n, n))], len(batch) + 1)
    rows = ops.iota(batch + (n, 1), dt.int64, len(batch), X)      # each row's index
    col_rows = ops.reshape(ops.iota((n,), dt.int64, 0, X), (1,) * len(batch) + (n,))
    batch_index = ops.reshape(ops.iota((_prod(batch),), dt.int64, 0, X), batch) if batch else None
    for j in range(n):
        col = ops.slice_(M, (0,) * len(batch) + (0, j), batch + (n, j + 1), (1,) * (len(batch) + 2))
        col = ops.reshape(col, batch + (n,))
        mag = ops.where(ops.ge(col_rows, j), ops.abs_(col), ops.full((), -1, d, X))
        p = ops.argmax(mag, len(batch))
        row_p, row_j = _rows(M, p, rows), _rows(M, ops.full(batch, j, dt.int64, X), rows)
        at_j = ops.eq(rows, j)
        at_p = ops.eq(rows, ops.reshape(p, batch + (1, 1)))
        M = ops.where(at_j, ops.reshape(row_p, batch + (1, 2 * n)),
                      ops.where(at_p, ops.reshape(row_j, batch + (1, 2 * n)), M))
        pivot = ops.reshape(ops.slice_(row_p, (0,) * len(batch) + (j,), batch + (j + 1,),
                                       (1,) * (len(batch) + 1)), batch)
        pivot = _checked(pivot, batch_index, name, j)
        row = ops.div(row_p, ops.reshape(pivot, batch + (1,)))
        factor = ops.where(at_j, ops.full((), 0, d, X),
                           ops.reshape(ops.slice_(M, (0,) * len(batch) + (0, j), batch + (n, j + 1),
                                                  (1,) * (len(batch) + 2)), batch + (n, 1)))
        M = ops.sub(M, ops.mul(factor, ops.reshape(row, batch + (1, 2 * n))))
        M = ops.where(at_j, ops.reshape(row, batch + (1, 2 * n)), M)
    return ops.slice_(M, (0,) * len(batch) + (0, n), batch + (n, 2 * n), (1,) * (len(batch) + 2))


def _checked(pivot, batch_index, name: str, j: int):
    """``pivot`` guarded by PyTorch's error for a zero pivot (step ``j``):
    the batch element it names is ``batch_index``'s (the checked value,
    which the pivot then depends on, so the check stays)."""
    message = (f"{name}: {'(Batch element {index}): ' if batch_index is not None else ''}"
               f"The diagonal element {j + 1} is zero, the inversion could not be completed "
               "because the input matrix is singular.")
    ok = ops.ne(pivot, 0)
    if batch_index is None:
        return ops.check(pivot, ok, message)
    seen = ops.check(batch_index, ok, message)
    return ops.where(ops.ge(seen, 0), pivot, ops.full((), float("nan"), pivot.dtype, pivot))


def _prod(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def inverse(A, name: str = "linalg.inv"):
    """``A^-1`` for a real (batch of) square matrices while tracing."""
    X = _eliminate(A, name)
    return _with_vjp(X, A)


def _with_vjp(X, A):
    """``X`` (= A^-1, no gradient) whose gradient with respect to ``A`` is
    PyTorch's ``-X^T (g X^T)``: ``X + (l - l)`` where ``l = -(X A) X`` (the
    difference is exactly zero; its VJP, through the matmuls with ``X``
    held fixed, is the formula, in PyTorch's order)."""
    Xt = ops.stop_gradient(X)
    l = ops.neg(ops.matmul(ops.matmul(Xt, A), Xt))
    return ops.add(X, ops.sub(l, ops.stop_gradient(l)))
