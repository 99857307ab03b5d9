"""``torch.distributed.device_mesh``: tracec has no device mesh (its data
parallelism is ``tracec.distributed``'s process groups); the names exist
for libraries that import them and refuse when used."""
from __future__ import annotations

__all__ = ["init_device_mesh", "DeviceMesh"]


class DeviceMesh:
    """Never made by tracec."""

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError("torch.distributed.device_mesh.DeviceMesh: tracec.distributed "
                                  "has no device meshes")


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    raise NotImplementedError("torch.distributed.device_mesh.init_device_mesh: tracec.distributed "
                              "has no device meshes")
