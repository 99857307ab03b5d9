"""``torch.masked``'s functional reductions and normalizations on dense
tensors with ``mask=`` (PyTorch's ``torch/masked/_ops.py``, strided
layout): masked-out elements are replaced by the reduction's identity
(0 for sum and norm, 1 for prod, -inf / the dtype's minimum for amax and
argmax, +inf / maximum for amin and argmin) before the dense reduction;
mean, var and std divide by the count of masked-in elements (fully
masked-out slices give nan, as PyTorch's do); softmax / log_softmax fill
with amax's identity and softmin with amin's.

Invariant: with ``mask=None`` each equals the dense reduction over
``dim`` (all dimensions when ``dim`` is None); a ``MaskedTensor`` input
is read as its data with its own mask unless ``mask`` is given.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import linalg
from tracec import shape_ops as S
from tracec.creation import ones, tensor
from tracec.ops.core import normalize_axis
from tracec.tensor import Tensor

__all__ = ["sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "norm", "var", "std",
           "softmax", "log_softmax", "softmin", "cumsum", "cumprod", "logsumexp", "logaddexp",
           "median", "normalize"]


def _canonical_dim(dim, ndim: int) -> tuple:
    """``dim`` as a sorted tuple of non-negative dims (all of them for None
    or an empty tuple), refusing repeats as PyTorch does."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        d = normalize_axis(d, builtins.max(ndim, 1))
        if d in out:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        out.append(d)
    return tuple(sorted(out))


def _identity(op: str, input: Tensor, ord=None):
    """The value a masked-out element takes for ``op`` (PyTorch's
    ``_reduction_identity``)."""
    floating = input.dtype.is_floating_point
    if op in ("sum", "norm"):
        return math.inf if op == "norm" and ord == -math.inf else 0
    if op == "prod":
        return 1
    if op == "median":
        return math.nan
    if op in ("amax", "argmax", "logsumexp", "logaddexp"):
        return -math.inf if floating else int(np.iinfo(input.dtype.np).min)
    if op in ("amin", "argmin"):
        return math.inf if floating else int(np.iinfo(input.dtype.np).max)
    raise NotImplementedError(f"identity of {op} on {input.dtype} input")


def _unwrap(input, mask):
    """(data, mask): a MaskedTensor gives its own mask unless one is given."""
    if getattr(input, "is_masked", False):
        return input.get_data(), input.get_mask() if mask is None else mask
    return input, mask


def _input_mask(input: Tensor, mask) -> Tensor:
    """``mask`` as a bool tensor of ``input``'s shape."""
    if not isinstance(mask, Tensor):
        mask = tensor(mask)
    if mask.dtype is not dt.bool_:
        mask = TF.ne(mask, 0)
    if mask.shape != input.shape:
        mask = S.broadcast_to(mask, input.shape)
    return mask


def _combine(op: str, input, mask, ord=None):
    """``input`` with masked-out elements replaced by ``op``'s identity."""
    input, mask = _unwrap(input, mask)
    if mask is None:
        return input
    fill = tensor(_identity(op, input, ord), dtype=input.dtype)
    return TF.where(_input_mask(input, mask), input, fill)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001
    data = _combine("sum", input, mask)
    return TF.sum(data, _canonical_dim(dim, data.ndim), keepdim=bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    data = _combine("prod", input, mask)
    if dtype is not None:
        data = data.to(dtype)
    for d in reversed(_canonical_dim(dim, data.ndim)):
        data = data.prod(d, keepdim=bool(keepdim))
    return data


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    data = _combine("amax", input, mask)
    return data.amax(_canonical_dim(dim, data.ndim), keepdim=bool(keepdim))


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    data = _combine("amin", input, mask)
    return data.amin(_canonical_dim(dim, data.ndim), keepdim=bool(keepdim))


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest masked-in element, in ``dtype`` (by
    default the input's: PyTorch's masked argmax of floats is a float)."""
    data = _combine("argmax", input, mask)
    return TF.argmax(data, dim, bool(keepdim)).to(dtype or data.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    data = _combine("argmin", input, mask)
    return TF.argmin(data, dim, bool(keepdim)).to(dtype or data.dtype)


def _count(data, mask, dims, keepdim):
    """How many elements each reduced slice has masked in (int64)."""
    if mask is None:
        return TF.sum(ones(tuple(data.shape), dtype=dt.int64), dims, keepdim=keepdim)
    return TF.sum(_input_mask(data, mask), dims, keepdim=keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    data, mask = _unwrap(input, mask)
    dtype = dt.to_dtype(dtype) if dtype is not None else data.dtype
    if not dtype.is_floating_point:
        source = "Input" if dtype is data.dtype else "Optional"
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    dims = _canonical_dim(dim, data.ndim)
    total = sum(data, dims, keepdim=keepdim, dtype=dtype, mask=mask)
    return TF.div(total, _count(data, mask, dims, bool(keepdim)))


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    data = _combine("norm", input, mask, ord)
    return linalg.vector_norm(data, ord, _canonical_dim(dim, data.ndim), bool(keepdim),
                              dtype=dtype)


def _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt):
    data, mask = _unwrap(input, mask)
    if unbiased is not None and correction is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    corr = 1.0 if unbiased is None and correction is None else (
        float(correction) if correction is not None else (1.0 if unbiased else 0.0))
    dtype = dt.to_dtype(dtype) if dtype is not None else (
        data.dtype if data.dtype.is_floating_point else dt.float32)
    dims = _canonical_dim(dim, data.ndim)
    count = _count(data, mask, dims, True)
    mean_ = TF.div(sum(data, dims, keepdim=True, dtype=dtype, mask=mask), count)
    x = TF.sub(data, mean_)
    total = sum(TF.mul(x, x), dims, keepdim=keepdim, dtype=dtype, mask=mask)
    if not keepdim:
        count = count.reshape(total.shape)
    if corr != 0:
        count = TF.sub(count.to(dtype), corr)
        count = TF.maximum(count, count.new_zeros([]))
    out = TF.div(total, count).to(dtype)
    return TF.sqrt(out) if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


def softmax(input, dim, *, dtype=None, mask=None):
    data = _combine("amax", input, mask)
    return TF.softmax(data, _canonical_dim(dim, data.ndim)[0], dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    data = _combine("amax", input, mask)
    return TF.log_softmax(data, _canonical_dim(dim, data.ndim)[0], dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    data = _combine("amin", input, mask)
    return TF.softmax(TF.neg(data), _canonical_dim(dim, data.ndim)[0], dtype=dtype)


def cumsum(input, dim, *, dtype=None, mask=None):
    data = _combine("sum", input, mask)
    dtype = data.dtype if dtype is None else dt.to_dtype(dtype)
    return data.cumsum(_canonical_dim(dim, data.ndim)[0], dtype=dtype).to(dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    data = _combine("prod", input, mask)
    dtype = data.dtype if dtype is None else dt.to_dtype(dtype)
    return data.cumprod(_canonical_dim(dim, data.ndim)[0], dtype=dtype).to(dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    data = _combine("logsumexp", input, mask)
    dtype = data.dtype if dtype is None else dt.to_dtype(dtype)
    return TF.logsumexp(data, _canonical_dim(dim, data.ndim), keepdim=bool(keepdim)).to(dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    a = _combine("logaddexp", input, input_mask)
    b = _combine("logaddexp", other, other_mask)
    dtype = a.dtype if dtype is None else dt.to_dtype(dtype)
    return a.logaddexp(b).to(dtype)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The median of the masked-in elements (``nanmedian`` with the others
    NaN); an integer input's, computed in float32, back in its dtype
    unless a slice is fully masked out (PyTorch's ValueError)."""
    data, mask = _unwrap(input, mask)
    dtype = data.dtype if dtype is None else dt.to_dtype(dtype)
    is_float = data.dtype.is_floating_point
    if not is_float:
        data = data.to(dt.float32)
    data = _combine("median", data, mask)
    out = data.nanmedian(_canonical_dim(dim, data.ndim)[0], bool(keepdim)).values
    if is_float:
        return out
    if bool(TF.isnan(out).any()):
        raise ValueError("masked median expects no fully masked out rows if dtype is not "
                         "floating point")
    return out.to(dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    data = _combine("sum", input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return TF.div(data, TF.maximum(nrm, nrm.new_full([], eps)))
