"""``linalg.inv`` (``inverse``) and ``linalg.solve`` inside
``tracec.compile``: Gauss-Jordan elimination written with primitives, so a
traced call records it.

Eager calls keep NumPy's LAPACK (``linalg_lapack``); a traced one can read
no values in Python, so it eliminates with partial pivoting as getrf
chooses pivots (the first largest magnitude in the column), one unrolled
step per column, and guards each pivot with a ``check`` (PyTorch's
message for a singular matrix, its batch element and diagonal element).
Invariant: the value is the inverse (the solution) to rounding (a last
bit or so from LAPACK's, not bit-equal); the gradient is PyTorch's
formula, ``-X^T (g X^T)`` (for solve ``gB = A^-T g``, ``gA = -gB X^T``),
through matmuls of the values held fixed (``_with_vjp``, ``_solve_vjp``).
The loop is unrolled, one step per column: ``MAX_N`` bounds the matrices
traced this way (larger ones stay eager, ``linalg_lapack`` says why).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ops

__all__ = ["MAX_N", "batch_iota", "checked", "eye", "inverse", "mT", "partial_pivot", "rows_of", "solve",
           "unchecked_inverse"]

#: the largest n traced (the unrolled elimination records O(n) steps of
#: O(n^2)-element ops: a 64x64 matrix is a trace of ~1500 ops)
MAX_N = 64


def rows_of(M, idx, like_rows):
    """The rows of ``M`` (..., n, m) chosen by ``idx`` (..., ): a masked sum,
    exact (one term, the rest zeros)."""
    pick = ops.eq(like_rows, ops.reshape(idx, tuple(idx.shape) + (1, 1)))
    return ops.reduce_sum(ops.where(pick, M, ops.full((), 0, M.dtype, M)), (M.ndim - 2,))


def eye(n, d, like):
    return ops.cast(ops.eq(ops.iota((n, n), dt.int64, 0, like), ops.iota((n, n), dt.int64, 1, like)), d)


def _eliminate(A, R, message):
    """``A^-1 R`` for ``A`` (..., n, n) and ``R`` (..., n, k) of the same
    batch, no gradient; ``message`` (a format with ``{j}``, the 1-based
    step, and ``{index}``, the batch element) for a zero pivot."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    d = A.dtype
    X = ops.stop_gradient(A)
    k = R.shape[-1]
    M = ops.concatenate([X, ops.stop_gradient(R)], len(batch) + 1)
    rows = ops.iota(batch + (n, 1), dt.int64, len(batch), X)      # each row's index
    batch_index = batch_iota(batch, X)
    for j in range(n):
        M, row_p, pivot, _ = partial_pivot(M, j, rows)
        at_j = ops.eq(rows, j)
        if message is not None:   # (None: unchecked, a zero pivot's infinities and NaNs)
            pivot = _checked(pivot, batch_index, message, j)
        row = ops.div(row_p, ops.reshape(pivot, batch + (1,)))
        factor = ops.where(at_j, ops.full((), 0, d, X),
                           ops.reshape(ops.slice_(M, (0,) * len(batch) + (0, j), batch + (n, j + 1),
                                                  (1,) * (len(batch) + 2)), batch + (n, 1)))
        M = ops.sub(M, ops.mul(factor, ops.reshape(row, batch + (1, n + k))))
        M = ops.where(at_j, ops.reshape(row, batch + (1, n + k)), M)
    return ops.slice_(M, (0,) * len(batch) + (0, n), batch + (n, n + k), (1,) * (len(batch) + 2))


def partial_pivot(M, j, rows):
    """Step ``j`` of getrf's row choice on ``M`` (..., n, m), its first n
    columns the matrix: the row from ``j`` on of the first largest
    magnitude in column ``j`` swapped with row ``j``.  Returns the swapped
    ``M``, that row (..., m), its pivot (...,) and whether it moved
    (a row exchange: (...,) bool); ``rows`` (..., n, 1) each row's index."""
    n, m = M.shape[-2], M.shape[-1]
    batch = tuple(M.shape[:-2])
    nb = len(batch)
    col = ops.reshape(ops.slice_(M, (0,) * nb + (0, j), batch + (n, j + 1), (1,) * (nb + 2)),
                      batch + (n,))
    col_rows = ops.reshape(rows, batch + (n,))
    mag = ops.where(ops.ge(col_rows, j), ops.abs_(col), ops.full((), -1, M.dtype, M))
    p = ops.argmax(mag, nb)
    row_p, row_j = rows_of(M, p, rows), rows_of(M, ops.full(batch, j, dt.int64, M), rows)
    at_j = ops.eq(rows, j)
    at_p = ops.eq(rows, ops.reshape(p, batch + (1, 1)))
    M = ops.where(at_j, ops.reshape(row_p, batch + (1, m)),
                  ops.where(at_p, ops.reshape(row_j, batch + (1, m)), M))
    pivot = ops.reshape(ops.slice_(row_p, (0,) * nb + (j,), batch + (j + 1,), (1,) * (nb + 1)),
                        batch)
    return M, row_p, pivot, ops.ne(p, j)


def mT(x):
    """The transpose of a (batch of) matrices."""
    nb = x.ndim - 2
    return ops.transpose(x, tuple(range(nb)) + (nb + 1, nb))


def _inverse_message(name: str, batched: bool) -> str:
    return (f"{name}: {'(Batch element {index}): ' if batched else ''}"
            "The diagonal element {j} is zero, the inversion could not be completed "
            "because the input matrix is singular.")


def _checked(pivot, batch_index, message: str, j: int):
    """``pivot`` guarded by PyTorch's error for a zero pivot (step ``j``)."""
    return checked(pivot, ops.ne(pivot, 0), batch_index, message.replace("{j}", str(j + 1)))


def checked(value, ok, batch_index, message: str):
    """``value`` guarded by ``ok`` (its shape, the batch's): where false,
    the call raises ``message`` at the user's line, ``{index}`` there the
    batch element ``batch_index`` (an iota over the batch, or None
    unbatched: the checked value, which ``value`` then depends on, so the
    check stays in the trace)."""
    if batch_index is None:
        return ops.check(value, ok, message)
    seen = ops.check(batch_index, ok, message)
    return ops.where(ops.ge(seen, 0), value, ops.full((), float("nan"), value.dtype, value))


def batch_iota(batch, like):
    """Each batch element's flat index (None for no batch)."""
    return ops.reshape(ops.iota((_prod(batch),), dt.int64, 0, like), batch) if batch else None


def _prod(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def inverse(A, name: str = "linalg.inv"):
    """``A^-1`` for a real (batch of) square matrices while tracing."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    X = _eliminate(A, ops.broadcast_to(eye(n, A.dtype, A), batch + (n, n)),
                   _inverse_message(name, bool(batch)))
    return _with_vjp(X, A)


def solve(A, B, message: str):
    """``A^-1 B`` for real ``A`` (..., n, n) and ``B`` (..., n, k), batches
    broadcast, while tracing; ``message`` as ``_eliminate``'s."""
    n, k = A.shape[-1], B.shape[-1]
    batch = tuple(ops.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    Ab = ops.broadcast_to(A, batch + (n, n))
    R = ops.concatenate([ops.broadcast_to(eye(n, A.dtype, A), batch + (n, n)),
                         ops.broadcast_to(B, batch + (n, k))], len(batch) + 1)
    R = _eliminate(Ab, R, message)
    last = len(batch) + 1
    inv_ = ops.slice_(R, (0,) * last + (0,), batch + (n, n), (1,) * (last + 1))
    X = ops.slice_(R, (0,) * last + (n,), batch + (n, n + k), (1,) * (last + 1))
    return _solve_vjp(X, inv_, A, B)


def _with_vjp(X, A):
    """``X`` (= A^-1, no gradient) whose gradient with respect to ``A`` is
    PyTorch's ``-X^T (g X^T)``: ``X + (l - l)`` where ``l = -(X A) X`` (the
    difference is exactly zero; its VJP, through the matmuls with ``X``
    held fixed, is the formula, in PyTorch's order)."""
    Xt = ops.stop_gradient(X)
    l = ops.neg(ops.matmul(ops.matmul(Xt, A), Xt))
    return ops.add(X, ops.sub(l, ops.stop_gradient(l)))


def _solve_vjp(X, inv_, A, B):
    """``X`` (= A^-1 B, no gradient) whose gradients are PyTorch's
    ``gB = A^-T g`` and ``gA = -gB X^T``: ``X + (l - l)`` where
    ``l = A^-1 (B - A X)`` with ``A^-1`` and ``X`` held fixed (a zero
    difference whose VJP is the formula; broadcast batches sum back)."""
    Xt, It = ops.stop_gradient(X), ops.stop_gradient(inv_)
    l = ops.matmul(It, ops.sub(B, ops.matmul(A, Xt)))
    return ops.add(X, ops.sub(l, ops.stop_gradient(l)))


def unchecked_inverse(A):
    """``A^-1`` (no gradient, no check: a singular ``A`` gives infinities
    and NaNs), for the gradients of ``det`` and ``slogdet``."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    return _eliminate(A, ops.broadcast_to(eye(n, A.dtype, A), batch + (n, n)), None)
