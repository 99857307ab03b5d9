"""``tracec.nn.parallel``: PyTorch's names: ``DistributedDataParallel``
(over MPI), and ``DataParallel`` / ``data_parallel`` (one CPU device: the
module itself)."""
from tracec.nn.modules.data_parallel import DataParallel, data_parallel  # noqa: F401
from tracec.nn.parallel.distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
