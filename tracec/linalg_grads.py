"""Vector-Jacobian products of the spectral factorizations, in NumPy:
``eigh``, ``svd``, ``qr`` (reduced) and ``pinv``, as PyTorch's
``FunctionsManual.cpp`` writes them (``linalg_eig_backward`` for the
Hermitian case, ``svd_backward``, ``linalg_qr_backward``, ``pinv_backward``)
for real matrices (``svd`` for complex ones too), batched over leading
dimensions.

Invariant: each takes the forward's outputs and the incoming gradients
(``None`` for an output no gradient reached, which selects PyTorch's cheaper
and better-defined branch: the eigenvalues or singular values alone are
differentiable even where they repeat) and returns the input's gradient.
Eigenvectors and singular vectors are defined up to sign (and to rotation
within a repeated eigenvalue): a loss that depends on that choice has no
gradient, here as in PyTorch (the formulas divide by eigenvalue gaps).
"""
from __future__ import annotations

import numpy as np

__all__ = ["eigh_vjp", "svd_vjp", "qr_vjp", "pinv_vjp"]


def _mT(a):
    # (``.mT``: a NumPy array's or a tensor's, so that ``pinv_vjp``, which
    # needs nothing else, also runs on tensors for a create_graph backward)
    return a.mT


def _mH(a):
    """The conjugate transpose (the transpose of a real array)."""
    return np.conj(np.swapaxes(a, -1, -2)) if np.iscomplexobj(a) else np.swapaxes(a, -1, -2)


def _diag_embed(d):
    out = np.zeros(d.shape + d.shape[-1:], d.dtype)
    i = np.arange(d.shape[-1])
    out[..., i, i] = d
    return out


def _set_diag(a, value):
    i = np.arange(a.shape[-1])
    a[..., i, i] = value
    return a


def eigh_vjp(w, v, gw, gv):
    """``A = V diag(w) V^T``: ``gA = V (diag(gw) + skew(V^T gV) / 2 / E) V^T``
    with ``E_ij = w_j - w_i`` (1 on the diagonal)."""
    if gv is None:
        return (v * gw[..., None, :]) @ _mT(v)
    vtgv = _mT(v) @ gv
    ret = 0.5 * (vtgv - _mT(vtgv))
    e = w[..., None, :] - w[..., :, None]
    ret = ret / _set_diag(e, 1.0)
    _set_diag(ret, 0.0 if gw is None else gw)
    return v @ ret @ _mT(v)


def svd_vjp(u, s, vh, gu, gs, gvh):
    """The reduced SVD ``A = U diag(S) Vh`` (``U`` m x k, ``Vh`` k x n),
    real or complex (conjugate transposes; for a complex ``A`` PyTorch's
    extra term ``diag(diag(U^H gU - gU^H U) / 2S)``, and its refusal of a
    loss that depends on the singular vectors' phases)."""
    m, n = u.shape[-2], vh.shape[-1]
    if gu is None and gvh is None:
        g = np.zeros_like(s) if gs is None else gs
        return (u * g[..., None, :]) @ vh
    s2 = s * s
    e = _set_diag(s2[..., None, :] - s2[..., :, None], 1.0)
    if gu is not None:
        utgu = _mH(u) @ gu
        utgu = utgu - _mH(utgu)
    if gvh is not None:
        gv = _mH(gvh)
        vtgv = vh @ gv
        vtgv = vtgv - _mH(vtgv)
    if np.iscomplexobj(u):
        im_u = np.zeros_like(s) if gu is None else np.diagonal(utgu, 0, -2, -1).imag
        im_v = np.zeros_like(s) if gvh is None else np.diagonal(vtgv, 0, -2, -1).imag
        if not np.allclose(im_u, -im_v, rtol=1e-2, atol=1e-2):
            raise RuntimeError(
                "svd_backward: The singular vectors in the complex case are specified up to "
                "multiplication by e^{i phi}. The specified loss function depends on this "
                "phase term, making it ill-defined.")
    with np.errstate(all="ignore"):   # (a repeated singular value: inf / NaN silently)
        if gu is not None and gvh is not None:
            ret = (utgu * s[..., None, :] + s[..., :, None] * vtgv) / e
        elif gu is not None:
            ret = (utgu / e) * s[..., None, :]
        else:
            ret = s[..., :, None] * (vtgv / e)
    if gs is not None:
        ret = ret + _diag_embed(gs)
    if np.iscomplexobj(u) and gu is not None and gvh is not None:
        ret = ret + _diag_embed(np.diagonal(utgu, 0, -2, -1) / (2 * s))
    if m > n and gu is not None:
        ga = u @ ret
        gu_sinv = gu / s[..., None, :]
        ga = ga + gu_sinv - u @ (_mH(u) @ gu_sinv)
        return ga @ vh
    if m < n and gvh is not None:
        ga = ret @ vh
        sinv_gvh = gvh / s[..., :, None]
        ga = ga + sinv_gvh - (sinv_gvh @ _mH(vh)) @ vh
        return u @ ga
    return u @ ret @ vh


def _copyltu(m):
    """The symmetric matrix whose lower triangle is ``m``'s."""
    low = np.tril(m, -1)
    return low + _mT(low) + _diag_embed(np.diagonal(m, axis1=-2, axis2=-1))


def _qr_square_or_tall(q, r, gq, gr):
    # A = QR with m >= n: gA = (gQ + Q copyltu(M)) R^{-T}, M = R gR^T - gQ^T Q.
    mm = r @ _mT(gr) - _mT(gq) @ q
    b = gq + q @ _copyltu(mm)
    # b R^{-T}: solve R X^T = b^T (R upper triangular, full rank).
    return _mT(np.linalg.solve(r, _mT(b)))


def qr_vjp(q, r, gq, gr):
    """The reduced QR ``A = Q R`` (Q m x k, R k x n, k = min(m, n)), full
    rank.  For m < n, ``A = [X | Y]`` with ``X = Q U`` square: the square
    formula on X with ``gQ + Y gV^T``, and ``gY = Q gV``."""
    m, n = q.shape[-2], r.shape[-1]
    gq = np.zeros_like(q) if gq is None else gq
    gr = np.zeros_like(r) if gr is None else gr
    if m >= n:
        return _qr_square_or_tall(q, r, gq, gr)
    x_r, gu, gv = r[..., :, :m], gr[..., :, :m], gr[..., :, m:]
    y = q @ r[..., :, m:]
    gx = _qr_square_or_tall(q, x_r, gq + y @ _mT(gv), gu)
    return np.concatenate([gx, q @ gv], axis=-1)


def pinv_vjp(g, pinv_a, a):
    """PyTorch's ``pinv_backward`` (exact where the rank is locally constant)."""
    m, n = a.shape[-2], a.shape[-1]
    pinv_ah = _mT(pinv_a)
    gh = _mT(g)
    if m <= n:
        k = gh @ pinv_a
        k_pinv_ah = k @ pinv_ah
        return (-_mT(pinv_a @ k) + k_pinv_ah - (a @ pinv_a) @ k_pinv_ah
                + (pinv_ah @ pinv_a) @ (gh - k @ a))
    k = pinv_a @ gh
    pinv_ah_k = pinv_ah @ k
    return (-_mT(k @ pinv_a) + (gh - a @ k) @ pinv_a @ pinv_ah + pinv_ah_k
            - pinv_ah_k @ pinv_a @ a)
