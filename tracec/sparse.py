"""``tracec.sparse``: PyTorch's sparse entry points over dense stand-ins
(API.md: a sparse tensor may be dense): ``mm`` is a matrix product and the
legacy ``FloatTensor(indices, values, size)`` constructor is
``sparse_coo_tensor``.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.contraction import sparse_coo_tensor, spmm

__all__ = ["mm", "FloatTensor"]


def mm(mat1, mat2):
    return spmm(mat1, mat2)


def FloatTensor(indices, values, size=None):  # noqa: N802 - PyTorch's name
    return sparse_coo_tensor(indices, values, size, dtype=dt.float32)
