"""``DistributedSampler``: each of ``num_replicas`` processes reads its own
shard of a data set (PyTorch's arithmetic: padded by repeating indices, or
truncated with ``drop_last``; shuffled per epoch from ``seed + epoch``).

tracec has no default process group this module could ask, so
``num_replicas`` and ``rank`` must be given.
"""
from __future__ import annotations

import math

from tracec.creation import Generator, randperm
from tracec.utils.data.sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            missing = " and ".join(n for n, v in (("num_replicas", num_replicas),
                                                   ("rank", rank)) if v is None)
            raise RuntimeError(f"DistributedSampler: {missing} must be given explicitly "
                               "(tracec.utils.data cannot query a default process group); "
                               "pass num_replicas=<world size> and rank=<this rank>")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle differently (and identically on every rank) each epoch."""
        self.epoch = epoch
