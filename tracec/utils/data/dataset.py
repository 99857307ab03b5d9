"""Data sets: ``Dataset``, ``IterableDataset``, ``TensorDataset``,
``ConcatDataset``, ``ChainDataset``, ``Subset`` and ``random_split``, with
PyTorch's names, checks and error messages.

Invariant: these hold only indices and references to user data; nothing is
copied except what ``__getitem__`` returns.
"""
from __future__ import annotations

import bisect
import math
import warnings
from typing import Generic, TypeVar

from tracec.creation import default_generator, randperm
from tracec.tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "StackDataset",
           "Subset", "random_split"]


T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style data set: subclasses define ``__getitem__`` (and usually
    ``__len__``, which samplers need).  Generic, as PyTorch's
    (``Dataset[Tuple[Tensor, Tensor]]`` as a base class or an annotation)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """An iterable-style data set: subclasses define ``__iter__``."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].size(0)
        if any(n != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class ConcatDataset(Dataset):
    """The concatenation of map-style data sets."""

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        if dataset_idx == len(self.datasets):
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length "
                             f"{len(self)}")
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """Iterable data sets chained one after another."""

    def __init__(self, datasets) -> None:
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class StackDataset(Dataset):
    """Datasets of one length side by side: item ``i`` is the tuple (given
    positionally) or dict (given by keyword) of their items ``i``."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(self._length != len(d) for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        # the DataLoader's batched fetch, handed on to a dataset that has one
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[idx] for idx in indices])
        return [self.dataset[self.indices[idx]] for idx in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping ``Subset``s of the given
    ``lengths`` (ints summing to ``len(dataset)``, or fractions summing to 1;
    the remainder of the floors goes round-robin to the first subsets, as
    in PyTorch).  The permutation is drawn from ``generator`` (default: the
    generator ``tracec.manual_seed`` seeds)."""
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(len(dataset) * frac)))
        remainder = len(dataset) - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. "
                              f"This might result in an empty dataset.", stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator or default_generator).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, indices[offset:offset + length]))
        offset += length
    return out
