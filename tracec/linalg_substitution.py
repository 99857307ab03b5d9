"""``linalg.solve_triangular`` and ``linalg.cholesky`` inside
``tracec.compile``: substitution and the Cholesky recurrence written with
primitives, one unrolled step per row (column), so a traced call records
them (eager calls keep NumPy's LAPACK, ``linalg_lapack``).

Invariants: the values are LAPACK's to rounding (a last bit or so, not
bit-equal: the sums run in another order).  A triangular solve never
raises (a zero on the diagonal gives PyTorch's infinities and NaNs); a
Cholesky pivot that is not positive (or NaN, as LAPACK's ``potrf``)
raises PyTorch's message, its batch element and the order of the leading
minor, at the user's line.  The gradients are PyTorch's formulas through
matmuls of values held fixed (``X + (l - l)``, the difference exactly
zero, as ``linalg_gauss_jordan``): ``solve_triangular``'s
``gB = T^-T g``, ``gA = tri(-gB X^T)``; ``cholesky``'s
``L^-T Sym(Phi(L^T gL)) L^-1``.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ops
from tracec.linalg_gauss_jordan import checked, eye, mT

__all__ = ["cholesky", "cholesky_solve", "solve_triangular"]


def _zero(like):
    return ops.full((), 0, like.dtype, like)


def _tri_mask(n, upper: bool, strict: bool, like):
    """The (n, n) bool mask of the triangle a triangular solve reads."""
    r, c = ops.iota((n, n), dt.int64, 0, like), ops.iota((n, n), dt.int64, 1, like)
    if upper:
        return ops.lt(r, c) if strict else ops.le(r, c)
    return ops.gt(r, c) if strict else ops.ge(r, c)


def _row(M, i, batch):
    """Row ``i`` of ``M`` (..., n, m), kept as (..., 1, m)."""
    nb = len(batch)
    return ops.slice_(M, (0,) * nb + (i, 0), batch + (i + 1, M.shape[-1]), (1,) * (nb + 2))


def _substitute(T, R, upper: bool, unit: bool):
    """``T^-1 R`` for triangular ``T`` (..., n, n) (its other triangle
    zero) and ``R`` (..., n, m) of the same batch, no gradient: a row a
    step, from the first (lower) or the last (upper)."""
    n = T.shape[-1]
    batch = tuple(T.shape[:-2])
    T, R = ops.stop_gradient(T), ops.stop_gradient(R)
    rows = ops.iota(batch + (n, 1), dt.int64, len(batch), T)
    X = ops.broadcast_to(_zero(R), tuple(R.shape))
    for i in (range(n - 1, -1, -1) if upper else range(n)):
        t = _row(T, i, batch)                                  # (..., 1, n)
        # (X's rows still to solve are zeros: the product sums the solved ones)
        x = ops.sub(_row(R, i, batch), ops.matmul(t, X))
        if not unit:
            nb = len(batch)
            d = ops.slice_(t, (0,) * nb + (0, i), batch + (1, i + 1), (1,) * (nb + 2))
            x = ops.div(x, d)
        X = ops.where(ops.eq(rows, i), x, X)
    return X


def _masked(A, upper: bool, unit: bool):
    """The triangle of ``A`` a solve reads (unit: ones on the diagonal)."""
    n = A.shape[-1]
    T = ops.where(_tri_mask(n, upper, unit, A), A, _zero(A))
    return ops.add(T, eye(n, A.dtype, A)) if unit else T


def solve_triangular(A, B, upper: bool, unit: bool):
    """``T^-1 B`` (``T`` the triangle of real ``A`` (..., n, n)) for ``B``
    (..., n, k), batches broadcast, while tracing; left-sided (the caller
    transposes for a right-sided solve)."""
    n, k = A.shape[-1], B.shape[-1]
    batch = tuple(ops.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    T = _masked(A, upper, unit)
    R = ops.concatenate([ops.broadcast_to(eye(n, A.dtype, A), batch + (n, n)),
                         ops.broadcast_to(B, batch + (n, k))], len(batch) + 1)
    R = _substitute(ops.broadcast_to(T, batch + (n, n)), R, upper, unit)
    last = len(batch) + 1
    Tinv = ops.slice_(R, (0,) * last + (0,), batch + (n, n), (1,) * (last + 1))
    X = ops.slice_(R, (0,) * last + (n,), batch + (n, n + k), (1,) * (last + 1))
    # l = T^-1 (B - T X), T^-1 and X fixed: gB = T^-T g, gA = mask(-gB X^T)
    Xf, If = ops.stop_gradient(X), ops.stop_gradient(Tinv)
    l = ops.matmul(If, ops.sub(B, ops.matmul(T, Xf)))
    d = ops.sub(l, ops.stop_gradient(l))
    # (a zero on T's diagonal: X's infinities make l NaN everywhere through
    # T^-1; X keeps PyTorch's values there, the gradient is lost where NaN)
    return ops.add(X, ops.where(ops.eq(d, d), d, _zero(d)))


def _not_pd(name: str, batched: bool, order: int) -> str:
    return (f"{name}: {'(Batch element {index}): ' if batched else ''}The factorization "
            "could not be completed because the input is not positive-definite (the leading "
            f"minor of order {order} is not positive-definite).")


def _factor(A, name):
    """The lower Cholesky factor of ``A`` (..., n, n), reading its lower
    triangle, no gradient: column ``j`` a step, ``c = A[:, j] - L L[j]^T``
    (L's columns from ``j`` on still zeros).  ``name`` None: no check,
    ``(L, info)`` as potrf leaves them (``_partial``)."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    nb = len(batch)
    A = ops.stop_gradient(A)
    rows = ops.iota(batch + (n, 1), dt.int64, nb, A)
    cols = ops.iota(batch + (1, n), dt.int64, nb + 1, A)
    info = ops.full(batch, 0, dt.int64, A)
    failed_pivot = ops.broadcast_to(_zero(A), batch)
    L = ops.broadcast_to(_zero(A), tuple(A.shape))
    for j in range(n):
        a = ops.slice_(A, (0,) * nb + (0, j), batch + (n, j + 1), (1,) * (nb + 2))
        lj = mT(_row(L, j, batch))
        c = ops.sub(a, ops.matmul(L, lj))                         # (..., n, 1)
        d = ops.reshape(ops.slice_(c, (0,) * nb + (j, 0), batch + (j + 1, 1), (1,) * (nb + 2)),
                        batch)
        # (not d > 0: a NaN pivot fails too, as potrf's check)
        first_failure = ops.logical_and(ops.eq(info, 0), ops.logical_not(ops.gt(d, 0)))
        info = ops.where(first_failure, ops.full((), j + 1, dt.int64, A), info)
        failed_pivot = ops.where(first_failure, d, failed_pivot)
        s = ops.reshape(ops.sqrt(d), batch + (1, 1))
        col = ops.where(ops.gt(rows, j), ops.div(c, s), ops.where(ops.eq(rows, j), s, _zero(A)))
        L = ops.where(ops.eq(cols, j), col, L)
    if name is None:
        return _partial(L, info, failed_pivot, A), info
    return _checked_info(L, info, name)


def _partial(L, info, failed_pivot, A):
    """What potrf leaves where it stops (``info`` the order, 0 if none):
    L's columns before the failing one, the failing pivot unrooted on the
    diagonal, and ``A``'s lower triangle from there on (as eager
    ``linalg_lapack._partial_cholesky``)."""
    n = A.shape[-1]
    batch = tuple(info.shape)
    nb = len(batch)
    rows = ops.iota(batch + (n, 1), dt.int64, nb, A)
    cols = ops.iota(batch + (1, n), dt.int64, nb + 1, A)
    stop = ops.reshape(ops.where(ops.eq(info, 0), ops.full((), n, dt.int64, A),
                                 ops.sub(info, ops.full((), 1, dt.int64, A))), batch + (1, 1))
    rest = ops.where(ops.logical_and(ops.eq(rows, cols), ops.eq(cols, stop)),
                     ops.reshape(failed_pivot, batch + (1, 1)),
                     ops.where(ops.ge(rows, cols), A, _zero(A)))
    return ops.where(ops.lt(cols, stop), L, rest)


def _checked_info(L, info, name: str):
    """``L`` guarded by PyTorch's error for the first batch element whose
    ``info`` (first failing leading minor, 0 if none) is not 0: one scalar
    check per order (a check names one value, here the batch element)."""
    n = L.shape[-1]
    batch = tuple(info.shape)
    size = 1
    for s in batch:
        size *= s
    flat = ops.reshape(info, (size,))
    failed = ops.gt(flat, 0)
    first = ops.argmax(ops.cast(failed, dt.int32), 0)              # (0-d) the first failing element
    order = ops.reduce_sum(ops.where(ops.eq(ops.iota(tuple(flat.shape), dt.int64, 0, L), first),
                                     flat, ops.full((), 0, dt.int64, L)), (0,))
    seen = first
    for k in range(1, n + 1):
        seen = checked(seen, ops.ne(order, k), None, _not_pd(name, bool(batch), k))
    return ops.where(ops.ge(seen, 0), L, ops.full((), float("nan"), L.dtype, L))


def cholesky(A, name):
    """The lower Cholesky factor of real ``A`` (..., n, n) while tracing
    (``name`` None: unchecked, ``(L, info)``, cholesky_ex's),
    with PyTorch's gradient: ``X + (l - l)``, ``l = L Psi(L^-1 A L^-T)``
    (L and L^-1 fixed), ``Psi(N) = (tril(N) + tril(N^T, -1)) / 2``, whose
    VJP is ``L^-T ((P + tril(P, -1)^T) / 2) L^-1``, ``P = tril(L^T g)``."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    L = _factor(A, name)
    info = None
    if name is None:
        L, info = L
    Linv = _substitute(L, ops.broadcast_to(eye(n, A.dtype, A), batch + (n, n)), False, False)
    Lf, If = ops.stop_gradient(L), ops.stop_gradient(Linv)
    IfT = mT(If)
    N = ops.matmul(If, ops.matmul(A, IfT))
    Nt = mT(N)
    psi = ops.add(ops.where(_tri_mask(n, False, False, A), N, _zero(A)),
                  ops.where(_tri_mask(n, False, True, A), Nt, _zero(A)))
    l = ops.matmul(Lf, ops.mul(psi, ops.full((), 0.5, A.dtype, A)))
    diff = ops.sub(l, ops.stop_gradient(l))
    if info is None:
        return ops.add(L, diff)
    # (a partial factor's NaNs in l: the value keeps potrf's, no gradient there)
    return ops.add(L, ops.where(ops.eq(diff, diff), diff, _zero(diff))), info


def cholesky_solve(B, L):
    """``(L L^T)^-1 B`` for the lower triangle of real ``L`` (..., n, n)
    (the caller transposes an upper factor) and ``B`` (..., n, k), batches
    broadcast, while tracing: two substitutions.  Gradients PyTorch's
    (``CholeskySolveBackward0``: through every entry of the factor):
    ``gB = (L L^T)^-1 g``, ``gL = -(gB X^T + X gB^T) L``, the VJP of
    ``l = C^-1 (B - (L Lf^T + Lf L^T) X)`` (``C^-1``, ``Lf``, ``X`` fixed)."""
    n, k = L.shape[-1], B.shape[-1]
    batch = tuple(ops.broadcast_shapes(tuple(L.shape[:-2]), tuple(B.shape[:-2])))
    T = ops.broadcast_to(_masked(L, False, False), batch + (n, n))
    R = ops.concatenate([ops.broadcast_to(eye(n, L.dtype, L), batch + (n, n)),
                         ops.broadcast_to(B, batch + (n, k))], len(batch) + 1)
    R = _substitute(T, R, False, False)
    last = len(batch) + 1
    Linv = ops.slice_(R, (0,) * last + (0,), batch + (n, n), (1,) * (last + 1))
    X = _substitute(mT(T), ops.slice_(R, (0,) * last + (n,), batch + (n, n + k),
                                       (1,) * (last + 1)), True, False)
    # (Lf the whole factor, not its triangle: PyTorch's gL multiplies by it)
    Xf, Lf = ops.stop_gradient(X), ops.stop_gradient(L)
    Cinv = ops.stop_gradient(ops.matmul(mT(Linv), Linv))
    C = ops.add(ops.matmul(L, mT(Lf)), ops.matmul(Lf, mT(L)))
    l = ops.matmul(Cinv, ops.sub(B, ops.matmul(C, Xf)))
    return ops.add(X, ops.sub(l, ops.stop_gradient(l)))
