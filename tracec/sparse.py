"""``tracec.sparse``: PyTorch's sparse entry points over dense stand-ins
(API.md: a sparse tensor may be dense): ``mm`` is a matrix product and the
legacy ``FloatTensor(indices, values, size)`` constructor is
``sparse_coo_tensor``; ``sum`` sums the dense data, a COO tensor again while
sparse dimensions remain.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.contraction import coalesced_indices, mark_sparse, sparse_coo_tensor, sparse_info, spmm
from tracec.creation import tensor as _tensor

__all__ = ["mm", "FloatTensor", "sum"]


def mm(mat1, mat2):
    return spmm(mat1, mat2)


def FloatTensor(indices, values, size=None):  # noqa: N802 - PyTorch's name
    return sparse_coo_tensor(indices, values, size, dtype=dt.float32)


def sum(input, dim=None, dtype=None):  # noqa: A001 - PyTorch's name
    """``torch.sparse.sum``: a dense tensor once every sparse dimension is
    summed (all of them when ``dim`` is None), else a coalesced COO tensor."""
    info = sparse_info(input)
    if info is None:
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    if dim is None:
        return input.sum(dtype=dtype)
    dims = tuple(d % input.ndim for d in ((dim,) if isinstance(dim, int) else dim))
    out = input.sum(dims, dtype=dtype)
    keep = [d for d in range(info[0].shape[0]) if d not in dims]
    if not keep:
        return out
    idx = coalesced_indices(info[0].numpy()[keep], tuple(input.shape[d] for d in keep))
    return mark_sparse(out, _tensor(np.asarray(idx), dtype=dt.int64), None, True)
