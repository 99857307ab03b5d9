"""``tracec.nn.parallel``: ``DistributedDataParallel`` (PyTorch's name)."""
from tracec.nn.parallel.distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DistributedDataParallel"]
