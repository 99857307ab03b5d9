"""``DistributedSampler``: each of ``num_replicas`` processes reads its own
shard of a data set (PyTorch's arithmetic: padded by repeating indices, or
truncated with ``drop_last``; shuffled per epoch from ``seed + epoch``).

``num_replicas`` and ``rank`` default to the default process group's
(``tracec.distributed``).  The index arithmetic is PyTorch's exactly; the
shuffled order is not PyTorch's numbers: ``randperm`` draws from tracec's
counter-based generator (SplitMix64, seeded with ``seed + epoch``), not
PyTorch's Mersenne Twister.  Every rank draws the same permutation, so the
shards are disjoint and cover the data set.
"""
from __future__ import annotations

import math

from tracec import distributed as dist
from tracec.creation import Generator, randperm
from tracec.utils.data.sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                missing = " and ".join(n for n, v in (("num_replicas", num_replicas),
                                                       ("rank", rank)) if v is None)
                raise RuntimeError(f"DistributedSampler: {missing} must be given when no "
                                   "process group is initialized (call tracec.distributed."
                                   "init_process_group() first, or pass them)")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
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
