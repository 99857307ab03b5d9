"""Samplers: which indices a ``DataLoader`` reads, and in which order.

Random samplers draw from a ``tracec.Generator``; without one they seed a
fresh generator from the default one (as PyTorch does), so the order is
fixed by ``tracec.manual_seed`` yet differs from epoch to epoch.  Eagerly the
orders are PyTorch's (its seed draw, ``randperm`` and ``randint`` streams).
"""
from __future__ import annotations

from typing import Generic, TypeVar

import numpy as np

from tracec import dtypes as dt
from tracec.creation import Generator, default_generator, empty, randint, randperm
from tracec.sorting import multinomial
from tracec.tensor import Tensor, concrete

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def _uniform64(generator, n: int) -> np.ndarray:
    """``n`` float64 draws in [0, 1), 53 random bits each."""
    return concrete(generator.uniform((n,), dt.float64), "a sampler's draw")


def draw_seed(generator=None) -> int:
    """A 63-bit seed drawn from ``generator`` (default: the global one) as
    PyTorch draws it: ``int(torch.empty((), dtype=torch.int64).random_().item())``
    (so an eager run's shuffles are PyTorch's)."""
    t = empty((), dtype=dt.int64).random_(generator=generator or default_generator)
    return int(concrete(t, "drawing a seed"))


def seeded_generator(generator=None) -> Generator:
    """``generator`` itself, or a fresh one seeded from the global generator."""
    if generator is not None:
        return generator
    return Generator().manual_seed(draw_seed())


T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base class: subclasses define ``__iter__`` over indices (and
    ``__len__``); generic, as PyTorch's (``Sampler[int]``)."""

    def __init__(self, data_source=None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (repeated when ``num_samples``
    exceeds the data set), or ``num_samples`` draws with replacement."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None,
                 generator=None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = seeded_generator(self.generator)
        if self.replacement:
            # Drawn 32 at a time, as PyTorch does: num_samples may be huge
            # (minGPT asks for 1e10 and stops when it has trained enough).
            for _ in range(self.num_samples // 32):
                yield from randint(0, n, (32,), dtype=dt.int64, generator=g).tolist()
            yield from randint(0, n, (self.num_samples % 32,), dtype=dt.int64,
                               generator=g).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=g).tolist()
        yield from randperm(n, generator=g).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to
    ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True,
                 generator=None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = np.asarray(concrete(weights, "WeightedRandomSampler(weights)")
                       if isinstance(weights, Tensor) else weights, np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        # (bad weights are refused by the draw, in __iter__, as PyTorch's are)
        self.weights = Tensor._make(w, dt.float64)   # a float64 tensor, as PyTorch's
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        # (the attribute may have been replaced, as PyTorch's may: a tensor
        # or a sequence of weights)
        w = self.weights
        w = np.asarray(concrete(w, "WeightedRandomSampler(weights)") if isinstance(w, Tensor)
                       else w, np.float64)
        # PyTorch's draw: torch.multinomial(weights, num_samples, replacement,
        # generator=self.generator), its stream eagerly
        idx = multinomial(Tensor._make(w, dt.float64), self.num_samples, self.replacement,
                          generator=self.generator)
        yield from idx.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
