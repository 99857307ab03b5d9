"""``torch.distributed.fsdp``: tracec does not shard parameters (its data
parallelism is ``tracec.distributed``'s process groups with replicated
modules).  The policy types are PyTorch's value types; wrapping a module
(``FullyShardedDataParallel``, ``fully_shard``) refuses with
``NotImplementedError``; ``isinstance(m, FSDPModule)`` is false for every
tracec module."""
from __future__ import annotations

import dataclasses

__all__ = ["FullyShardedDataParallel", "fully_shard", "FSDPModule", "MixedPrecisionPolicy",
           "OffloadPolicy", "CPUOffloadPolicy"]


def _missing(what: str):
    raise NotImplementedError(f"{what}: tracec.distributed has no fully sharded data "
                              "parallelism (FSDP)")


@dataclasses.dataclass(frozen=True)
class MixedPrecisionPolicy:
    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclasses.dataclass
class OffloadPolicy:
    """No offloading."""


@dataclasses.dataclass
class CPUOffloadPolicy(OffloadPolicy):
    pin_memory: bool = True


class FSDPModule:
    """The class ``fully_shard`` mixes into a module: never made by tracec."""

    def __new__(cls, *args, **kwargs):
        _missing("torch.distributed.fsdp.FSDPModule")


class FullyShardedDataParallel:
    def __new__(cls, *args, **kwargs):
        _missing("torch.distributed.fsdp.FullyShardedDataParallel")


def fully_shard(module, *args, **kwargs):
    _missing("torch.distributed.fsdp.fully_shard")
