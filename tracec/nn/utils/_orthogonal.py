"""``parametrizations.orthogonal``: a matrix (or batch) kept orthogonal,
PyTorch's ``_Orthogonal`` with the ``matrix_exp`` and ``householder`` maps.

Invariants (PyTorch's):
  * with ``use_trivialization=True`` (default) registering stores the
    orthogonalized weight as the buffer ``base`` (``parametrizations.weight.0.base``)
    and sets ``original`` to ``-I``, which every map sends to ``I``, so the
    parametrized weight starts equal to ``base``; the value is ``base @ Q(X)``;
  * ``matrix_exp``: ``Q = exp(A)`` with ``A = X.tril() - X.tril()^T``
    (padded square for tall matrices, first ``k`` columns kept);
    ``householder``: the product of the reflectors in the strictly lower
    part of ``X`` with ``tau = 2 / (1 + |v|^2)``, column signs from
    ``diag(X)``; wide matrices are handled transposed.

Both maps are composites over matmuls, so gradients come from autograd.
``matrix_exp`` is a degree-18 Taylor series with scaling and squaring (the
scale read from the matrix norm, so it runs eagerly); ``cayley`` solves
``(I - A/2) Q = I + A/2`` with ``linalg.solve``.
"""
from __future__ import annotations


import numpy as np

from tracec import creation
from tracec import functions as TF
from tracec import graph
from tracec import linalg_lapack
from tracec import shape_ops as S
from tracec.nn.modules.module import Module
from tracec.nn.utils import parametrize
from tracec.tensor import Tensor

__all__ = ["orthogonal"]

_MAPS = ("matrix_exp", "cayley", "householder")


def _mT(x: Tensor) -> Tensor:
    return S.transpose(x, -2, -1)


def _eye(n: int, like: Tensor) -> Tensor:
    return creation.eye(n, dtype=like.dtype, device=like.device)


def _matrix_exp(a: Tensor) -> Tensor:
    """``exp(a)`` of square matrices: Taylor to degree 18 on ``a / 2^s``
    (``||a / 2^s||_1 <= 1/2``), then ``s`` squarings."""
    norm = TF.amax(TF.sum(TF.abs(a.detach()), -2))
    # The smallest s with norm / 2^s <= 1/2, found by decisions on the norm
    # (not a read of it): traced, each is speculated and checked at run
    # time, so a compiled step keeps its code while s stays the same.
    s = 0
    while bool(norm > 0.5 * 2 ** s):
        s += 1
    x = TF.mul(a, 1.0 / (2 ** s))
    eye = _eye(a.shape[-1], a)
    result, term = eye, eye
    for k in range(1, 19):
        term = TF.mul(TF.matmul(term, x), 1.0 / k)
        result = TF.add(result, term)
    for _ in range(s):
        result = TF.matmul(result, result)
    return result


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """``H_1 ... H_k`` restricted to its first ``k`` columns, ``H_i = I -
    tau_i v_i v_i^T`` with ``v_i`` column ``i`` of ``a`` below the diagonal
    and 1 on it (``a`` is ``[..., n, k]``, strictly lower triangular)."""
    n, k = a.shape[-2], a.shape[-1]
    v = TF.add(a, _eye(n, a)[:, :k])
    y = S.expand(_eye(n, a)[:, :k], *(tuple(a.shape[:-2]) + (n, k)))
    for i in range(k - 1, -1, -1):
        vi = v[..., :, i:i + 1]                                    # [..., n, 1]
        proj = TF.matmul(_mT(vi), y)                               # [..., 1, k]
        y = TF.sub(y, TF.mul(S.unsqueeze(S.unsqueeze(tau[..., i], -1), -1),
                             TF.matmul(vi, proj)))
    return y


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * float(np.finfo(q.dtype.np).eps)
    qq = q.detach().cpu().numpy()
    return bool(np.allclose(np.swapaxes(qq, -1, -2) @ qq, np.eye(k), atol=eps, rtol=1e-5))


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of ``a = QR`` with columns signed so that ``diag(R) >= 0``."""
    q, r = np.linalg.qr(a.detach().cpu().numpy())
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    q = q * np.where(d == 0, 1, d)[..., None, :]
    return creation.tensor(q, dtype=a.dtype, device=a.device)


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = _mT(X)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                pad = creation.zeros(*(tuple(X.shape[:-2]) + (n, n - k)), dtype=X.dtype,
                                     device=X.device)
                X = S.cat([X, pad], -1)
            A = TF.sub(X, _mT(X))
            if self.orthogonal_map == "matrix_exp":
                Q = _matrix_exp(A)
            else:   # the Cayley retraction (I + A/2)(I - A/2)^{-1}
                eye = _eye(n, A)
                half = TF.mul(A, 0.5)
                Q = linalg_lapack.solve(TF.sub(eye, half), TF.add(eye, half))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = TF.div(2.0, TF.add(1.0, TF.sum(TF.mul(A, A), -2)))
            Q = _householder_product(A, tau)
            sign = S.unsqueeze(X.diagonal(dim1=-2, dim2=-1).int(), -2)
            Q = TF.mul(Q, sign.to(Q.dtype))
        if hasattr(self, "base"):
            Q = TF.matmul(self.base, Q)
        return _mT(Q) if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        with graph.no_grad():
            if tuple(Q.shape) != tuple(self.shape):
                raise ValueError(f"Expected a matrix or batch of matrices of shape "
                                 f"{self.shape}. Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            if n < k:
                Q = _mT(Q)
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in ("cayley", "matrix_exp"):
                    raise NotImplementedError("It is not possible to assign to the matrix "
                                              "exponential or the Cayley parametrizations when "
                                              "use_trivialization=False.")
                raise NotImplementedError("orthogonal(householder, use_trivialization=False): "
                                          "assigning needs geqrf, which tracec does not have")
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = creation.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
                Q = _make_orthogonal(S.cat([Q, N], -1))
            self.base = Q
            neg_id = creation.zeros_like(Q_init)
            m = min(neg_id.shape[-2], neg_id.shape[-1])
            neg_id[..., range(m), range(m)] = -1.0
            return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Keep ``module.<name>`` orthogonal (see the module docstring)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
