"""``torch.distributed._composable.fsdp``: ``tracec.distributed.fsdp``'s."""
from tracec.distributed.fsdp import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy,  # noqa: F401
                                     OffloadPolicy, fully_shard)
