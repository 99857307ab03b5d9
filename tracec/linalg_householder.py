"""``torch.linalg.householder_product`` (alias ``torch.orgqr``).

Invariant: a composite of primitives (matmuls and elementwise ops), so it
differentiates (PyTorch's ``LinalgHouseholderProductBackward0``) and
compiles; the argument checks and their messages are PyTorch's.
"""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as F
from tracec import shape_ops as S
from tracec.functions import _named, tensor_arg
from tracec.rearrange import tril

__all__ = ["householder_product"]

_NAME = "torch.linalg.householder_product"


def _check(A, tau) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{_NAME}: input must have at least 2 dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{_NAME}: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1]")
    if tau.ndim and n < tau.shape[-1]:
        raise RuntimeError(f"{_NAME}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{_NAME}: Expected tau to have one dimension less than input, but "
                           f"got tau.ndim equal to {tau.ndim} and input.ndim is equal to {A.ndim}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{_NAME}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{_NAME}: tau dtype {dt.scalar_type_name(tau.dtype)} does not match "
                           f"input dtype {dt.scalar_type_name(A.dtype)}")


def householder_product(A, tau, *, out=None):
    """The first ``n`` columns of ``H_1 ... H_k`` for ``A`` of shape
    ``[..., m, n]`` and ``tau`` of shape ``[..., k]``: ``H_i = I - tau_i v_i
    v_i^H``, ``v_i`` column ``i`` of ``A`` below the diagonal with 1 on it
    (LAPACK's ``orgqr`` / ``ungqr``)."""
    A, tau = tensor_arg(A, "A"), tensor_arg(tau, "tau")
    _check(A, tau)
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    eye = creation.eye(m, dtype=A.dtype, device=A.device)
    v = F.add(tril(A, -1)[..., :, :k], eye[:, :k])
    y = S.expand(eye[:, :n], *(tuple(A.shape[:-2]) + (m, n)))
    for i in range(k - 1, -1, -1):
        vi = v[..., :, i:i + 1]                                      # [..., m, 1]
        vh = vi.conj().transpose(-2, -1) if A.dtype.is_complex else vi.transpose(-2, -1)
        t = S.unsqueeze(S.unsqueeze(tau[..., i], -1), -1)
        y = F.sub(y, F.mul(t, F.matmul(vi, F.matmul(vh, y))))
    y = _named(y if y.is_contiguous() else y.contiguous(), "LinalgHouseholderProductBackward0")
    if out is not None:
        out.resize_(tuple(y.shape)).copy_(y)
        return out
    return y


def orgqr(input, input2):
    """``torch.orgqr`` / ``Tensor.orgqr``: ``householder_product`` under
    PyTorch's argument names for it (``input``, ``input2``)."""
    return householder_product(input, input2)
