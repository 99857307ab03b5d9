"""Selecting from and stacking COO tensors (tracec's dense stand-in for
them: ``tracec.contraction``), as PyTorch's sparse kernels do.

Invariants (measured on torch 2.13): ``select`` / integer indexing /
``unbind`` / iteration along a sparse dim of a COO tensor with more than
one sparse dim give a COO tensor of the entries at that index (their
order kept, the dim's index row dropped); along the only sparse dim the
result is dense.  ``stack`` of COO tensors along a dim up to their sparse
dim count is a COO tensor of every operand's entries in turn, with the
operand's number as the new index row.  Either result is marked coalesced
only when it holds at most one entry, as PyTorch's are.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.contraction import mark_sparse, sparse_entries, sparse_info
from tracec.tensor import Tensor

__all__ = ["sparse_selected", "sparse_stacked"]


def sparse_selected(out: Tensor, input: Tensor, dim: int, index: int) -> Tensor:
    """``out`` (``input.select(dim, index)``, dense data) as PyTorch's result
    when ``input`` is a COO tensor."""
    info = sparse_info(input)
    if info is None:
        return out
    idx, vals = sparse_entries(input, info)
    if idx.shape[0] <= 1 or dim >= idx.shape[0]:
        return out          # the only sparse dim (dense result), or a dense dim: not done
    keep = idx[dim] == index % input.shape[dim]
    rows = np.delete(idx[:, keep], dim, axis=0)
    return mark_sparse(out, Tensor._make(np.ascontiguousarray(rows), dt.int64),
                       Tensor._make(np.ascontiguousarray(vals[keep]), out.dtype),
                       int(keep.sum()) <= 1)


def sparse_stacked(out: Tensor, tensors, dim: int) -> Tensor:
    """``out`` (``stack(tensors, dim)``, dense data) as PyTorch's result when
    every operand is a COO tensor."""
    infos = [sparse_info(t) for t in tensors]
    if any(i is None for i in infos) or dim > np.asarray(infos[0][0]._data).shape[0]:
        return out
    all_idx, all_vals = [], []
    for k, (t, info) in enumerate(zip(tensors, infos)):
        idx, vals = sparse_entries(t, info)
        all_idx.append(np.insert(idx, dim, k, axis=0))
        all_vals.append(vals)
    idx = np.concatenate(all_idx, axis=1).astype(np.int64)
    vals = np.concatenate(all_vals, axis=0).astype(out._data.dtype)
    return mark_sparse(out, Tensor._make(idx, dt.int64), Tensor._make(vals, out.dtype),
                       idx.shape[1] <= 1)
