"""``torch.distributed.constants``: the default collective timeouts."""
from datetime import timedelta

__all__ = ["default_pg_timeout", "default_pg_nccl_timeout"]

#: PyTorch's default for init_process_group(timeout=...): 30 minutes
default_pg_timeout = timedelta(minutes=30)
default_pg_nccl_timeout = None   # (None in a build without NCCL, as here)
