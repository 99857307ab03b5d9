"""``torch.nn.modules.batchnorm``: where PyTorch programs import the batch
norms' bases from (``from torch.nn.modules.batchnorm import _BatchNorm``, as
davda54/sam's bypass_bn.py does to find every batch norm).  The classes are
defined once, in ``normalization.py`` and ``lazy.py``; this module names
them as PyTorch's does."""
from tracec.nn.modules.lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from tracec.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm,
                                             _BatchNorm, _NormBase)

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d", "_BatchNorm", "_NormBase"]
