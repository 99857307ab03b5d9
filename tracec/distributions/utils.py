"""Helpers shared by the distributions: broadcasting parameters, lazily
computed parameters, and the probs <-> logits conversions PyTorch uses
(same clamping, so values and gradients agree with it)."""
from __future__ import annotations

import numbers

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec.creation import tensor, zeros_like
from tracec.shape_ops import broadcast_to, cat
from tracec.tensor import Tensor

__all__ = ["broadcast_all", "broadcast_shape", "lazy_property", "clamp_probs",
           "probs_to_logits", "logits_to_probs", "finfo_eps", "finfo_tiny", "sum_rightmost",
           "host_generator", "host_array", "from_host", "tril_matrix_to_vec",
           "vec_to_tril_matrix"]


def broadcast_shape(*shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise RuntimeError(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast "
                           "together") from None


def broadcast_all(*values):
    """Tensors of one broadcast shape; numbers take the dtype of the first
    tensor among ``values`` (the default float dtype if there is none)."""
    for v in values:
        if not isinstance(v, (Tensor, numbers.Number)):
            raise ValueError("Input arguments must all be instances of numbers.Number, "
                             "torch.Tensor or objects implementing __torch_function__.")
    like = next((v for v in values if isinstance(v, Tensor)), None)
    d = like.dtype if like is not None else dt.get_default_dtype()
    ts = [v if isinstance(v, Tensor) else tensor(v, dtype=d) for v in values]
    shape = broadcast_shape(*(t.shape for t in ts))
    return tuple(t if tuple(t.shape) == shape else broadcast_to(t, shape) for t in ts)


class lazy_property:
    """A property computed on first use and then stored on the instance
    (a distribution keeps whichever of probs/logits it was given)."""

    def __init__(self, fn):
        self.wrapped = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def finfo_eps(d: dt.DType) -> float:
    # NumPy has no bfloat16 (stored as float32 here); its epsilon is 2**-7.
    return 2.0 ** -7 if d is dt.bfloat16 else float(np.finfo(d.np).eps)


def finfo_tiny(d: dt.DType) -> float:
    return float(np.finfo(np.float32 if d is dt.bfloat16 else d.np).tiny)


def clamp_probs(probs: Tensor) -> Tensor:
    eps = finfo_eps(probs.dtype)
    return TF.clamp(probs, min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    p = clamp_probs(probs)
    if is_binary:
        return TF.sub(TF.log(p), TF.log1p(TF.neg(p)))
    return TF.log(p)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    if is_binary:
        return TF.sigmoid(logits)
    return TF.softmax(logits, -1)


_HOST_SAMPLING = ("drawing samples on the host (Gamma, Beta, Dirichlet, Poisson, Binomial and "
                  "the distributions built on them sample eagerly only)")


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum over the ``dim`` rightmost dimensions (PyTorch's ``_sum_rightmost``)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def host_generator() -> np.random.Generator:
    """``tracec.random.host_generator`` (the one definition) for the
    distributions' samplers, with their error message."""
    from tracec.random import host_generator as from_default
    return from_default(None, _HOST_SAMPLING)


def host_array(t: Tensor) -> np.ndarray:
    """The values of ``t`` as a float64 NumPy array (sampling parameters)."""
    from tracec.tensor import concrete
    a = concrete(t.detach(), _HOST_SAMPLING)
    a = a.get() if hasattr(a, "get") else np.asarray(a)
    return a.astype(np.float64)


def from_host(a: np.ndarray, like: Tensor) -> Tensor:
    """``a`` as a tensor with ``like``'s dtype and device."""
    return tensor(np.asarray(a).astype(like.dtype.np if like.dtype is not dt.bfloat16
                                       else np.float32), dtype=like.dtype).to(like.device)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    n = mat.shape[-1]
    rows, cols = np.tril_indices(n, k=diag)
    idx = tensor(rows * n + cols)
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return flat[..., idx]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    length = vec.shape[-1]
    n = next((k for k in range(length + abs(diag) + 2)
              if len(np.tril_indices(k, k=diag)[0]) == length), None)
    if n is None:
        raise ValueError("Incorrect size")
    rows, cols = np.tril_indices(n, k=diag)
    # Gather from the vector with a zero appended: positions off the
    # triangle read the zero.
    src = np.full(n * n, length, np.int64)
    src[rows * n + cols] = np.arange(length)
    padded = cat([vec, zeros_like(vec[..., :1])], -1)
    return padded[..., tensor(src)].reshape(tuple(vec.shape[:-1]) + (n, n))


def standard_normal(shape, dtype=None, device=None) -> Tensor:
    """Standard normal draws of ``shape`` (PyTorch's ``_standard_normal``:
    ``empty(shape).normal_()``, the same draws as ``randn(shape)``)."""
    from tracec.creation import randn
    return randn(tuple(shape), dtype=dtype, device=device)


# PyTorch's private names, which some programs import.
_sum_rightmost = sum_rightmost
_standard_normal = standard_normal
