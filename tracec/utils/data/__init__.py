"""``tracec.utils.data``: PyTorch's data-loading API (data sets, samplers,
``DataLoader``, collation).  The package's own demo data lives elsewhere,
in ``tracec.data``."""
from tracec.utils.data.collate import default_collate, default_convert  # noqa: F401
from tracec.utils.data.dataloader import DataLoader, get_worker_info  # noqa: F401
from tracec.utils.data.workers import WorkerInfo  # noqa: F401
from tracec.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset,  # noqa: F401
                                       IterableDataset, StackDataset, Subset, TensorDataset,
                                       random_split)
from tracec.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,  # noqa: F401
                                       SequentialSampler, SubsetRandomSampler,
                                       WeightedRandomSampler)
from tracec.utils.data import distributed  # noqa: F401
from tracec.utils.data.distributed import DistributedSampler  # noqa: F401
