"""``torch.nn.modules.instancenorm``: where PyTorch programs import the
instance norms' base from (``from torch.nn.modules.instancenorm import
_InstanceNorm``).  The classes are defined once, in ``normalization.py`` and
``lazy.py``; this module names them as PyTorch's does."""
from tracec.nn.modules.lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d
from tracec.nn.modules.normalization import (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
                                             _InstanceNorm, _NormBase)

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d", "_InstanceNorm", "_NormBase"]
