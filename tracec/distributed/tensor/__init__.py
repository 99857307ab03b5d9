"""``torch.distributed.tensor``: the DTensor type, for the ``isinstance(p,
DTensor)`` checks that libraries make on parameters (Accelerate's
``model_has_dtensor``).  tracec has no sharded tensors, so no DTensor is
ever made here: ``DTensor.from_local`` and ``distribute_tensor`` raise
``NotImplementedError`` saying so."""
from __future__ import annotations

from tracec.tensor import Tensor

__all__ = ["DTensor", "DeviceMesh", "distribute_tensor", "Shard", "Replicate", "Partial"]

_NONE = "tracec has no distributed (sharded) tensors: torch.distributed.tensor.{} is not supported"


class DTensor(Tensor):
    """A tensor sharded over a device mesh (none exist in tracec)."""

    # a type to test against, outside the __torch_function__ protocol
    __torch_function__ = Tensor.__dict__.get("_disabled_torch_function_impl") or \
        Tensor.__torch_function__

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(_NONE.format("DTensor"))

    @classmethod
    def from_local(cls, *args, **kwargs):
        raise NotImplementedError(_NONE.format("DTensor.from_local"))


class Placement:
    """How a DTensor lies over one mesh dimension."""


class Shard(Placement):
    def __init__(self, dim: int):
        self.dim = dim


class Replicate(Placement):
    pass


class Partial(Placement):
    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op


class DeviceMesh:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_NONE.format("DeviceMesh"))


def distribute_tensor(*args, **kwargs):
    raise NotImplementedError(_NONE.format("distribute_tensor"))
