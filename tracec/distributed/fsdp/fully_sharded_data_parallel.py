"""``torch.distributed.fsdp.fully_sharded_data_parallel``: see
``tracec.distributed.fsdp``."""
from tracec.distributed.fsdp import FullyShardedDataParallel  # noqa: F401
