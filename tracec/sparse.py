"""``tracec.sparse``: PyTorch's sparse entry points over dense stand-ins
(API.md: a sparse tensor may be dense): ``mm`` is a matrix product and the
legacy ``FloatTensor(indices, values, size)`` constructors (``DoubleTensor``,
``LongTensor``, ...: the values keep their dtype, a size alone makes an empty
tensor of the class's dtype) are ``sparse_coo_tensor`` without its invariants
warning, each form warning PyTorch's deprecation once; ``sum`` sums the
dense data, a COO tensor again while sparse dimensions remain; ``addmm`` is
``beta * mat + alpha * mat1 @ mat2``; ``softmax`` / ``log_softmax``
normalize over a COO tensor's specified entries only.
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec import dtypes as dt
from tracec.contraction import (coalesced_indices, mark_sparse, pattern_masked, raw_record,
                                sparse_coo_tensor, sparse_info, spmm)
from tracec.contraction import addmm as _addmm
from tracec.functions import _named, sparse_product
from tracec.creation import tensor as _tensor
from tracec.functions import user_stacklevel

__all__ = ["mm", "addmm", "softmax", "log_softmax", "sum", "FloatTensor", "DoubleTensor",
           "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
           "ByteTensor"]


def mm(mat1, mat2):
    """``torch.sparse.mm``: the dense product; PyTorch computes a sparse
    ``mat1``'s as an addmm (its result's node is ``SparseAddmmBackward0``)."""
    out = spmm(pattern_masked(mat1), mat2)
    if sparse_info(mat1) is not None and sparse_info(mat2) is not None:
        return sparse_product(out, mat1, mat2)
    return _named(out, "SparseAddmmBackward0") if raw_record(mat1) is not None else out


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``torch.sparse.addmm``: ``beta * mat + alpha * (mat1 @ mat2)`` (dense)."""
    return _named(_addmm(mat, pattern_masked(mat1), mat2, beta=beta, alpha=alpha),
                  "SparseAddmmBackward0")


def _masked(input, dim, log: bool, dtype):
    """``torch.sparse.softmax`` / ``log_softmax`` of a COO tensor: over its
    specified entries only (the unspecified ones count as -inf), a COO
    tensor of the same indices; a row without entries stays empty."""
    from tracec import functions as F
    from tracec import ops
    info = sparse_info(input)
    if info is None:
        raise RuntimeError(f"{'log_' if log else ''}softmax: expected a sparse COO tensor "
                           "(tracec: only the COO layout)")
    x = input if dtype is None else input.to(dtype)
    idx = coalesced_indices(info[0].numpy(), tuple(input.shape))
    present = np.zeros(tuple(input.shape[:idx.shape[0]]), bool)
    present[tuple(idx)] = True
    present = present.reshape(present.shape + (1,) * (input.ndim - present.ndim))
    mask = _tensor(np.broadcast_to(present, tuple(input.shape)).copy())
    d = dim % input.ndim
    empty = _tensor(~np.broadcast_to(present, tuple(input.shape)).any(axis=d, keepdims=True))
    filled = ops.where(mask, x, float("-inf"))
    filled = ops.where(empty, 0.0, filled)       # (an empty row: no NaN, nothing kept)
    y = (F.log_softmax if log else F.softmax)(filled, d)
    out = _named(ops.where(mask, y, 0.0), "LogSoftmaxBackward0" if log else "SoftmaxBackward0")
    return mark_sparse(out, _tensor(idx, dtype=dt.int64), None, True)


def softmax(input, dim, *, dtype=None):
    return _masked(input, dim, False, dtype)


def log_softmax(input, dim, *, dtype=None):
    return _masked(input, dim, True, dtype)


_LEGACY_WARNED: set = set()
_LEGACY_FORMS = {
    "ivs": ("torch.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated.  Please use "
            "torch.sparse_coo_tensor(indices, values, shape, dtype=, device=). (Triggered internally at "
            "/__w/pytorch/pytorch/torch/csrc/utils/tensor_new.cpp:653.)"),
    "iv": ("torch.sparse.SparseTensor(indices, values, *, device=) is deprecated.  Please use "
           "torch.sparse_coo_tensor(indices, values, dtype=, device=). (Triggered internally at "
           "/__w/pytorch/pytorch/torch/csrc/utils/tensor_new.cpp:642.)"),
    "s": ("torch.sparse.SparseTensor(shape, *, device=) is deprecated.  Please use "
          "torch.sparse_coo_tensor(shape, dtype=, device=). (Triggered internally at "
          "/__w/pytorch/pytorch/torch/csrc/utils/tensor_new.cpp:684.)"),
}


def _legacy_warn(form):
    if form not in _LEGACY_WARNED:         # TORCH_WARN_ONCE: once per process and form
        _LEGACY_WARNED.add(form)
        warnings.warn(_LEGACY_FORMS[form], UserWarning, stacklevel=user_stacklevel())


def _legacy(name, dtype):
    from tracec.tensor import Tensor

    def ctor(*args, device=None):
        if len(args) in (2, 3) and isinstance(args[0], Tensor) and isinstance(args[1], Tensor):
            _legacy_warn("ivs" if len(args) == 3 else "iv")
            size = tuple(args[2]) if len(args) == 3 else None
            return sparse_coo_tensor(args[0], args[1], size, device=device, check_invariants=False)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args) or (
                len(args) == 1 and isinstance(args[0], (tuple, list))):
            size = tuple(args[0]) if len(args) == 1 and not isinstance(args[0], int) else tuple(args)
            size = size or (0,)
            _legacy_warn("s")
            idx = _tensor(np.zeros((len(size), 0), np.int64), dtype=dt.int64)
            return sparse_coo_tensor(idx, _tensor(np.zeros((0,)), dtype=dtype), size, device=device,
                                     check_invariants=False)
        got = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args)
        raise TypeError(
            f"new() received an invalid combination of arguments - got ({got}), but expected one of:\n"
            " * (*, torch.device device = None)\n"
            " * (Tensor indices, Tensor values, *, torch.device device = None)\n"
            " * (Tensor indices, Tensor values, tuple of ints size, *, torch.device device = None)\n"
            " * (tuple of ints size, *, torch.device device = None)\n")
    ctor.__name__ = ctor.__qualname__ = name
    ctor.__doc__ = f"The legacy ``torch.sparse.{name}`` constructor (a COO tensor)."
    return ctor


FloatTensor = _legacy("FloatTensor", dt.float32)
DoubleTensor = _legacy("DoubleTensor", dt.float64)
HalfTensor = _legacy("HalfTensor", dt.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", dt.bfloat16)
LongTensor = _legacy("LongTensor", dt.int64)
IntTensor = _legacy("IntTensor", dt.int32)
ShortTensor = _legacy("ShortTensor", dt.int16)
CharTensor = _legacy("CharTensor", dt.int8)
ByteTensor = _legacy("ByteTensor", dt.uint8)


def sum(input, dim=None, dtype=None):  # noqa: A001 - PyTorch's name
    """``torch.sparse.sum``: a dense tensor once every sparse dimension is
    summed (all of them when ``dim`` is None), else a coalesced COO tensor."""
    info = sparse_info(input)
    if info is None:
        from tracec.sparse_compressed import layout_name
        name = layout_name(input)
        if dim is not None and name.startswith("SparseCs"):
            # PyTorch's COO-only kernel; CSR and CSC share one dispatch key
            raise NotImplementedError("Could not run 'aten::_indices' with arguments from the "
                                      "'SparseCsrCPU' backend.")
        raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got {name}")
    if dim is None:
        return pattern_masked(input).sum(dtype=dtype)
    dims = tuple(d % input.ndim for d in ((dim,) if isinstance(dim, int) else dim))
    out = pattern_masked(input).sum(dims, dtype=dtype)
    keep = [d for d in range(info[0].shape[0]) if d not in dims]
    if not keep:
        return out
    idx = coalesced_indices(info[0].numpy()[keep], tuple(input.shape[d] for d in keep))
    return mark_sparse(out, _tensor(np.asarray(idx), dtype=dt.int64), None, True)
