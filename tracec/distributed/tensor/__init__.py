"""``torch.distributed.tensor`` (DTensor) as far as tracec has it.

The placement types are real (``placement_types``).  tracec has no device
mesh and no DTensor: ``DTensor``, ``distribute_tensor`` and
``distribute_module`` exist so that libraries importing them (and testing
``isinstance(t, DTensor)``, false for every tracec tensor) load, and
refuse with ``NotImplementedError`` naming what is missing when called.
"""
from __future__ import annotations

from tracec.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard
from tracec.subclass_dispatch import disabled_torch_function_impl
from tracec.tensor import Tensor

__all__ = ["DTensor", "distribute_tensor", "distribute_module", "Shard", "Replicate", "Partial",
           "Placement"]


def _missing(what: str):
    raise NotImplementedError(f"{what}: tracec.distributed has no DTensor or DeviceMesh "
                              "(data parallelism is tracec.distributed's process groups)")


class DTensor(Tensor):
    """A tensor laid over a device mesh: never made by tracec."""

    # no __torch_function__ of its own: defining the class must not turn the
    # protocol on for the process (tracec.subclass_dispatch)
    __torch_function__ = disabled_torch_function_impl

    def __new__(cls, *args, **kwargs):
        _missing("torch.distributed.tensor.DTensor")

    @staticmethod
    def from_local(*args, **kwargs):
        _missing("DTensor.from_local")


def distribute_tensor(tensor, device_mesh=None, placements=None, **kwargs):
    _missing("torch.distributed.tensor.distribute_tensor")


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None,
                      output_fn=None):
    _missing("torch.distributed.tensor.distribute_module")
