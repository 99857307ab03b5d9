"""``torch.distributed._tensor``: PyTorch's old name of
``torch.distributed.tensor``, kept as it keeps it: the package's names, and
its submodules registered under the old path too."""
import sys
from importlib import import_module

from tracec.distributed.tensor import (DTensor, Partial, Placement, Replicate, Shard,  # noqa: F401
                                       distribute_module, distribute_tensor)
from tracec.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: F401

__all__ = ["DTensor", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard",
           "distribute_module", "distribute_tensor", "init_device_mesh"]

for _sub in ("_utils", "experimental"):
    sys.modules[f"{__name__}.{_sub}"] = import_module(f"tracec.distributed.tensor.{_sub}")
