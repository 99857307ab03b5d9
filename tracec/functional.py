"""``torch.functional``: the Python-level functions PyTorch defines in
``torch/functional.py`` (re-exported at the top level, where tracec defines
them); ``torch.functional.F`` is ``torch.nn.functional``, as in PyTorch."""
from __future__ import annotations

from tracec import (atleast_1d, atleast_2d, atleast_3d, block_diag,  # noqa: F401
                    broadcast_shapes, broadcast_tensors, cartesian_prod, cdist, chain_matmul,
                    einsum, istft, lu, meshgrid, norm, pca_lowrank, split, stft, svd_lowrank,
                    tensordot, unique, unique_consecutive, unravel_index)
from tracec.nn import functional as F  # noqa: F401  (torch.functional.F)

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu",
           "norm", "meshgrid", "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot",
           "unique", "unique_consecutive", "unravel_index"]
