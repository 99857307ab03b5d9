"""``torch.distributed.fsdp.fully_sharded_data_parallel``: the FSDP
wrapper's type and its option enums, for the ``isinstance(model, FSDP)``
checks libraries make while unwrapping models (Accelerate's
``extract_model_from_parallel``).  tracec does not shard parameters:
constructing ``FullyShardedDataParallel`` raises ``NotImplementedError``
saying so (DistributedDataParallel is tracec's data-parallel wrapper)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from tracec.nn.modules.module import Module

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "StateDictType", "BackwardPrefetch",
           "MixedPrecision", "CPUOffload"]


class FullyShardedDataParallel(Module):
    """A module whose parameters are sharded over ranks (not in tracec)."""

    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(
            "tracec does not shard parameters: FullyShardedDataParallel is not supported "
            "(use torch.nn.parallel.DistributedDataParallel)")


class ShardingStrategy(enum.Enum):
    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()
    HYBRID_SHARD = enum.auto()
    _HYBRID_SHARD_ZERO2 = enum.auto()


class StateDictType(enum.Enum):
    FULL_STATE_DICT = enum.auto()
    LOCAL_STATE_DICT = enum.auto()
    SHARDED_STATE_DICT = enum.auto()


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


@dataclass
class MixedPrecision:
    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True


@dataclass
class CPUOffload:
    offload_params: bool = False
