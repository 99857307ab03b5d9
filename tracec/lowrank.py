"""``torch.svd_lowrank``, ``torch.pca_lowrank`` and their
``get_approximate_basis``: Halko, Martinsson and
Tropp's randomized range finder (Algorithm 4.4 with ``niter`` power
iterations, then Algorithm 5.1), written as PyTorch writes it
(``torch/_lowrank.py``), over tracec's matmul, QR and SVD.

Invariant: the random test matrix comes from tracec's generator (a
different stream than torch's), so a result equals torch's exactly only
where the decomposition is unique: for an input of rank at most ``q``,
U S V^T reproduces the input and S equals torch's to rounding.
"""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as F
from tracec.linalg_lapack import qr, svd

__all__ = ["svd_lowrank", "pca_lowrank", "get_approximate_basis"]


def _mH(x):
    return x.mT


def get_approximate_basis(A, q, niter=2, M=None):
    """An ``(*, m, q)`` matrix Q with orthonormal columns whose range
    approximates A's (A - M's when ``M`` is given)."""
    niter = 2 if niter is None else niter
    dtype = A.dtype if A.dtype.is_floating_point else dt.float32
    R = creation.randn(A.shape[-1], q, dtype=dtype)
    X = F.matmul(A, R)
    if M is not None:
        X = X - F.matmul(M, R)
    Q = qr(X).Q
    for _ in range(niter):
        X = F.matmul(_mH(A), Q)
        if M is not None:
            X = X - F.matmul(_mH(M), Q)
        Q = qr(X).Q
        X = F.matmul(A, Q)
        if M is not None:
            X = X - F.matmul(M, Q)
        Q = qr(X).Q
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """``(U, S, V)`` of rank ``q`` with A ~ U diag(S) V^T (A - M with ``M``)."""
    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.size())
    if m < n:               # work on the tall one
        A = _mH(A)
        if M is not None:
            M = _mH(M)
    Q = get_approximate_basis(A, q, niter=niter, M=M)
    B = F.matmul(_mH(Q), A)
    if M is not None:
        B = B - F.matmul(_mH(Q), M)
    U, S, Vh = svd(B, full_matrices=False)
    V = _mH(Vh)
    U = F.matmul(Q, U)
    if m < n:
        U, V = V, U
    return U, S, V


def pca_lowrank(A, q=None, center=True, niter=2):
    """``svd_lowrank`` of A with its column means removed (``center``)."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (q >= 0 and q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not (niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter, M=None)
    C = A.mean(dim=(-2,), keepdim=True)
    return svd_lowrank(A - C, q, niter=niter, M=None)
