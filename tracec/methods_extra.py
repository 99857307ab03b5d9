"""More of PyTorch's tensor API: ``new_*`` constructors, ``__format__``,
``clamp_min clamp_max isinf isfinite isposinf isneginf``, and the Tensor
methods (and in-place forms) of ``rearrange``, ``sorting`` and
``contraction``'s ops.

Invariant: like ``methods``, only binds functions defined elsewhere or
composites of them; ``__format__`` follows PyTorch's rule exactly (a 0-d
tensor formats as its Python number; any other tensor formats as ``str``
for an empty spec and raises ``TypeError`` for any other spec).
"""
from __future__ import annotations

import functools

import numpy as np

from tracec import contraction as C
from tracec import creation, ops
from tracec import dtypes as dt
from tracec import functions as F
from tracec import rearrange as R
from tracec import sorting
from tracec import sparse_compressed as SC
from tracec.methods import _inplace
from tracec.tensor import Tensor

__all__ = ["clamp_min", "clamp_max", "isinf", "isfinite", "isposinf", "isneginf"]


def clamp_min(input, min):  # noqa: A002 - PyTorch's name
    return F.clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    return F.clamp(input, max=max)


def _float_test(x, name, on_float, on_other: bool):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.dtype.is_floating_point:
        return on_float(x)
    return ops.full(tuple(x.shape), on_other, dt.bool_, like=x)


def isinf(x):
    return _float_test(x, "isinf", lambda t: ops.eq(ops.abs_(t), float("inf")), False)


def isfinite(x):
    # NaN compares false, so |x| < inf is false for NaN and the infinities.
    return _float_test(x, "isfinite", lambda t: ops.lt(ops.abs_(t), float("inf")), True)


def isposinf(input):
    return _float_test(input, "isposinf", lambda t: ops.eq(t, float("inf")), False)


def isneginf(input):
    return _float_test(input, "isneginf", lambda t: ops.eq(t, float("-inf")), False)


# --- new_* ---------------------------------------------------------------------------

def _new(self, dtype, device, requires_grad, make, layout=None):
    # (``pin_memory``, which the new_* methods take too, is a no-op: no
    # accelerator pins host memory)
    creation._check_layout(layout)
    d = self.dtype if dtype is None else dt.to_dtype(dtype)
    return make(d, device, requires_grad)


def _new_size(size, kw, fn):
    # PyTorch's ``size`` argument, positional (``*size`` or one sequence) or
    # keyword (``new_ones(size=mask.size())``, as Longformer calls it).
    if kw:
        extra = set(kw) - {"size"}
        if extra:
            raise TypeError(f"{fn}() got an unexpected keyword argument '{extra.pop()}'")
        if size:
            raise TypeError(f"{fn}() got multiple values for argument 'size'")
        if not isinstance(kw["size"], (tuple, list)):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, not "
                            f"{type(kw['size']).__name__}")
        return (tuple(kw["size"]),)
    if not size:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "size"')
    dims = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    if any(isinstance(v, int) and v < 0 for v in dims):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{next(v for v in dims if isinstance(v, int) and v < 0)}: "
                           f"{list(dims)}")
    return size


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False, **kw):
    size = _new_size(size, kw, "new_zeros")
    return _new(self, dtype, device, requires_grad, lambda d, dev, rg: creation.zeros(
        *size, dtype=d, device=dev, requires_grad=rg), layout)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False, **kw):
    size = _new_size(size, kw, "new_ones")
    return _new(self, dtype, device, requires_grad, lambda d, dev, rg: creation.ones(
        *size, dtype=d, device=dev, requires_grad=rg), layout)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False, **kw):
    size = _new_size(size, kw, "new_empty")
    return _new(self, dtype, device, requires_grad, lambda d, dev, rg: creation.empty(
        *size, dtype=d, device=dev, requires_grad=rg), layout)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              layout=None, pin_memory=False):
    return _new(self, dtype, device, requires_grad, lambda d, dev, rg: creation.full(
        size, fill_value, dtype=d, device=dev, requires_grad=rg), layout)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    # A copy with no autograd history, of this tensor's dtype unless told.
    if isinstance(data, Tensor):
        creation.copy_construct_warning("tensor.new_tensor", 2)
        data = data.detach()   # copied by a (recorded) cast in tensor()
    return _new(self, dtype, device, requires_grad, lambda d, dev, rg: creation.tensor_copy(
        data, dtype=d, device=dev, requires_grad=rg))


def _format(self, spec: str) -> str:
    if self.ndim == 0 and type(self) is Tensor:
        return format(self.detach().item(), spec)
    return object.__format__(self, spec)


def _identity(self):
    return self


Tensor.new_zeros = _new_zeros
Tensor.new_ones = _new_ones
Tensor.new_empty = _new_empty
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor
Tensor.__format__ = _format
# --- sparse COO tensors: dense data plus their COO indices (tracec.contraction.SPARSE) ---

def _sparse_or_raise(self, name: str):
    info = C.sparse_info(self)
    if info is None:
        raise RuntimeError(f"{name} expected sparse coordinate tensor layout but got "
                           f"{SC.layout_name(self)}")
    return info


def _sparse_values(self, indices):
    """The dense data at each COO index (``[nnz, *dense_dims]``)."""
    sd = indices.shape[0]
    if sd == 0:
        return F.unsqueeze(self, 0) if indices.shape[1] else self[None][:0]
    return self[tuple(indices[d] for d in range(sd))]


def _to_dense(self, dtype=None, *, masked_grad=None):
    if C.raw_record(self) is None:
        return self if dtype is None else self.to(dtype)
    out = F._named(ops.cast(C.pattern_masked(self), self.dtype), "ToDenseBackward0")
    return out if dtype is None else out.to(dtype)


def _coalesce(self):
    info = _sparse_or_raise(self, "coalesce")
    if info[2]:
        return self
    idx = C.coalesced_indices(info[0].numpy(), tuple(self.shape))
    out = F._named(ops.cast(self, self.dtype), "CoalesceBackward0")
    return C.mark_sparse(out, creation.tensor(idx, dtype=dt.int64), None, True)


def _is_coalesced(self) -> bool:
    return _sparse_or_raise(self, "is_coalesced")[2]


def _raw_info(self, op: str):
    """The COO record of ``self`` for ``aten::{op}`` (PyTorch has no strided kernel)."""
    info = C.sparse_info(self)
    if info is None:
        raise NotImplementedError(f"Could not run 'aten::{op}' with arguments from the 'CPU' "
                                  "backend.")
    return info


def _nnz(self) -> int:
    rec = SC.compressed_info(self)
    if rec is not None:
        return int(rec.plain.shape[0])
    return int(_raw_info(self, "_nnz")[0].shape[1])


def _indices_raw(self):
    return _raw_info(self, "_indices")[0]


def _values_raw(self):
    info = _raw_info(self, "_values")
    return info[1] if not info[2] else _sparse_values(self, info[0])


def _coalesced_info(self, what: str, layout: str):
    """The COO record of a coalesced ``self`` (``indices()`` / ``values()``)."""
    info = C.sparse_info(self)
    if info is None:
        raise RuntimeError(f"{what} expected {layout} layout but got {SC.layout_name(self)}")
    if not info[2]:
        raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call "
                           ".coalesce() first")
    return info


def _indices(self):
    return _coalesced_info(self, "indices", "sparse coordinate tensor")[0]


def _values(self):
    rec = SC.compressed_info(self)
    if rec is not None:
        return SC.compressed_values(self, rec)
    return _sparse_values(self, _coalesced_info(self, "values", "sparse tensor")[0])


def _sparse_dim(self) -> int:
    if SC.compressed_info(self) is not None:
        return 2
    info = C.sparse_info(self)
    return 0 if info is None else int(info[0].shape[0])


def _dense_dim(self) -> int:
    return self.ndim - _sparse_dim(self)


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``x.to_sparse()``: the coalesced COO tensor of ``x``'s non-zero entries
    (over its first ``sparse_dim`` dims); only the COO layout."""
    from tracec.tensor_meta import sparse_coo, sparse_csc, sparse_csr
    if sparse_dim is not None:
        if layout is not None or blocksize is not None or dense_dim is not None:
            raise RuntimeError("to_sparse(): sparse_dim cannot be given together with "
                               "layout, blocksize or dense_dim")
        if not 0 <= int(sparse_dim) <= self.ndim:
            raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{self.ndim}] "
                               f"range, but {int(sparse_dim)} is given")
    elif layout is sparse_csr:
        return SC.to_sparse_csr(self)
    elif layout is sparse_csc:
        return SC.to_sparse_csc(self)
    elif layout is not None and layout is not sparse_coo:
        raise NotImplementedError(f"tracec: to_sparse(layout={layout}) (COO, CSR and CSC only)")
    rec = SC.compressed_info(self)
    if rec is not None:
        return SC.compressed_to_coo(self, rec)
    if C.sparse_info(self) is not None:
        return self
    sd = self.ndim if sparse_dim is None else int(sparse_dim)
    a = self.detach().numpy()
    nz = a.reshape(a.shape[:sd] + (-1,)).any(-1) if sd < a.ndim else a != 0
    idx = np.stack(np.nonzero(nz)).astype(np.int64).reshape(sd, -1)
    out = F._named(ops.cast(self, self.dtype), "ToSparseBackward0")
    return C.mark_sparse(out, creation.tensor(idx, dtype=dt.int64), None, True)


def _to_sparse_coo(self):
    return _to_sparse(self)


def _sparse_mask(self, mask):
    """``x.sparse_mask(mask)``: a COO tensor with ``mask``'s indices (as
    they are, coalesced or not) and ``x``'s values at them."""
    info = C.sparse_info(mask)
    if info is None:
        raise NotImplementedError("Could not run 'aten::sparse_mask' with arguments from the "
                                  "'CPU' backend.")
    if tuple(mask.shape) != tuple(self.shape):
        raise RuntimeError("sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    idx = info[0]
    values = self[tuple(idx[d] for d in range(idx.shape[0]))]
    return C.sparse_coo_tensor(idx, values, tuple(self.shape), check_invariants=False,
                               is_coalesced=info[2])


Tensor.to_dense = _to_dense
Tensor.coalesce = _coalesce
Tensor.is_coalesced = _is_coalesced
Tensor._nnz = _nnz
Tensor._indices = _indices_raw
Tensor._values = _values_raw
Tensor.indices = _indices
Tensor.values = _values
Tensor.sparse_dim = _sparse_dim
Tensor.dense_dim = _dense_dim
Tensor.to_sparse = _to_sparse
Tensor.to_sparse_coo = _to_sparse_coo
Tensor.sparse_mask = _sparse_mask

_METHODS = {
    "clamp_min": clamp_min, "clamp_max": clamp_max, "isinf": isinf, "isfinite": isfinite,
    "isposinf": isposinf, "isneginf": isneginf,
    "narrow": R.narrow, "index_select": R.index_select, "repeat": R.repeat,
    "repeat_interleave": R.repeat_interleave, "flip": R.flip_method, "fliplr": R.fliplr,
    "flipud": R.flipud, "roll": R.roll, "tril": R.tril, "triu": R.triu, "diag": R.diag,
    "cumsum": R.cumsum, "cumprod": R.cumprod,
    "sort": sorting.sort, "argsort": sorting.argsort, "topk": sorting.topk,
    "msort": sorting.msort, "multinomial": sorting.multinomial,
    "addmm": C.addmm, "baddbmm": C.baddbmm,
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

def _same_shape_inplace(fn):
    """``fn`` for a structured in-place kernel (``addmm_``, ``baddbmm_``):
    PyTorch refuses a ``self`` that only broadcasts to the result, after
    the operands' own checks, with its resize words (an elementwise
    ``add_`` says "doesn't match the broadcast shape" instead)."""
    @functools.wraps(fn)     # (its signature: PyTorch's keyword names)
    def checked(self, *args, **kwargs):
        new = fn(self, *args, **kwargs)
        if tuple(new.shape) != tuple(self.shape):
            raise RuntimeError(f"Bad in-place call: input tensor size {list(self.shape)} and "
                               f"output tensor size {list(new.shape)} should match")
        return new
    return checked


for _name, _fn in {"clamp_min_": clamp_min, "clamp_max_": clamp_max, "tril_": R.tril,
                   "triu_": R.triu, "cumsum_": R.cumsum, "cumprod_": R.cumprod,
                   "addmm_": _same_shape_inplace(C.addmm),
                   "baddbmm_": _same_shape_inplace(C.baddbmm)}.items():
    setattr(Tensor, _name, _inplace(_name, _fn))
