"""``torch.distributed.fsdp``: see ``fully_sharded_data_parallel``."""
from tracec.distributed.fsdp.fully_sharded_data_parallel import (  # noqa: F401
    BackwardPrefetch, CPUOffload, FullyShardedDataParallel, MixedPrecision, ShardingStrategy,
    StateDictType)

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "StateDictType", "BackwardPrefetch",
           "MixedPrecision", "CPUOffload"]
