"""``DataLoader``: batches of samples from a data set, with PyTorch's
arguments, defaults and argument checks.

Loading always happens in the calling process.  ``num_workers > 0`` is
emulated there with PyTorch's observable semantics (``workers.py``: a data
set copy, ``worker_init_fn``, ``get_worker_info()`` and random state per
worker, PyTorch's batch order, an iterable data set read by every worker),
so no worker can hang or die.  ``pin_memory`` is a no-op
(tensors live in host memory).  ``timeout`` and ``prefetch_factor`` are
checked and otherwise unused.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Generic, TypeVar

from tracec import creation
from tracec import dtypes as dt
from tracec.tensor import concrete

from tracec.utils.data.collate import default_collate, default_convert
from tracec.utils.data.dataset import IterableDataset
from tracec.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,
                                       SequentialSampler)
from tracec.utils.data.workers import Workers, current

__all__ = ["DataLoader", "get_worker_info"]


class _BaseDataLoaderIter:
    """The iterator ``iter(loader)`` returns, with PyTorch's names, which
    subclasses of ``DataLoader`` and libraries built on it use (PyG's
    loaders wrap ``_get_iterator()``'s result and call ``_reset``).
    ``_reset(loader)`` starts a new epoch (a persistent loader's iterator is
    reset, not remade); ``_num_yielded`` counts this epoch's batches."""

    def __init__(self, loader):
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter: bool = False):
        self._loader = loader
        self._dataset = loader.dataset
        self._num_yielded = 0
        self._batches = loader._epoch()

    def __iter__(self):
        return self

    def _next_data(self):
        return next(self._batches)

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data

    def __len__(self) -> int:
        return len(self._loader)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """``iter(loader)`` of a loader with ``num_workers=0``."""


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """``iter(loader)`` of a loader with workers (emulated: see the module
    docstring)."""


def get_worker_info():
    """The current (emulated) worker's ``WorkerInfo``; ``None`` in the main
    process, as in PyTorch."""
    return current()


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable data set: keys carry no information."""

    def __iter__(self):
        while True:
            yield None


#: The attributes PyTorch's DataLoader refuses to have set after __init__
#: (its iterators were built from them).
_FIXED_AFTER_INIT = frozenset(["batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                               "persistent_workers"])


T_co = TypeVar("T_co", covariant=True)
_T = TypeVar("_T")
#: PyTorch's annotation aliases, which libraries import (opacus: _collate_fn_t)
_worker_init_fn_t = Callable[[int], None]
_collate_fn_t = Callable[[list[_T]], Any]


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches (see the module docstring);
    generic, as PyTorch's (``DataLoader[Tensor]`` annotations)."""

    __initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        #: The emulated workers kept across epochs with ``persistent_workers``.
        self._workers = None
        self._iterator = None
        self.__initialized = True

    def __setattr__(self, attr, val):
        # (collate_fn and the rest may change: deepspeech.pytorch's
        # AudioDataLoader sets self.collate_fn after super().__init__)
        if self.__initialized and attr in _FIXED_AFTER_INIT:
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _warn_pin_memory(self):
        # PyTorch warns as each iterator starts (not at construction), from
        # one place inside the library, so the default filter shows it once.
        if self.pin_memory and self.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used "
                          f"as the device,ignore pin_memory_device='{self.pin_memory_device}'.")
        if self.pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.")

    def _get_iterator(self) -> _BaseDataLoaderIter:
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self) -> _BaseDataLoaderIter:
        # PyTorch keeps a persistent loader's one iterator and resets it
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def _epoch(self):
        """A generator of one epoch's batches (the iterators' source)."""
        persistent = self.persistent_workers and self.num_workers > 0
        if persistent and self._workers is not None:
            # PyTorch keeps one iterator for the loader's life and resets it:
            # no new base seed, and the workers go on with their own random
            # state (and data set copies) from the previous epoch.
            workers = self._workers
        else:
            self._warn_pin_memory()
            # PyTorch's iterator draws its workers' base seed when it is made,
            # with or without workers: the global stream advances as PyTorch's.
            base = int(concrete(creation.empty((), dtype=dt.int64).random_(
                generator=self.generator), "a DataLoader's base seed"))
            workers = Workers(self, base) if self.num_workers > 0 else None
            if persistent:
                self._workers = workers
        if self._iterable:
            return self._iter_iterable(workers)
        return self._iter_map(workers)

    def _fetch(self, dataset, index):
        if self._auto_collation:
            fetch = getattr(dataset, "__getitems__", None)
            samples = fetch(index) if fetch else [dataset[i] for i in index]
        else:
            samples = dataset[index]
        return self.collate_fn(samples)

    def _iter_map(self, workers):
        if workers is not None:
            yield from workers.map_batches(self, self._fetch)
            return
        for index in self._index_sampler:
            yield self._fetch(self.dataset, index)

    def _next_batch(self, it):
        """The next batch from a data set iterator, or None at its end."""
        if not self._auto_collation:
            for sample in it:
                return self.collate_fn(sample)
            return None
        batch = []
        for sample in it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                return self.collate_fn(batch)
        if batch and not self.drop_last:
            return self.collate_fn(batch)
        return None

    def _iter_iterable(self, workers):
        if workers is not None:
            yield from workers.iterable_batches(self._next_batch)
            return
        it = iter(self.dataset)
        while (batch := self._next_batch(it)) is not None:
            yield batch

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)
