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
from tracec.utils.data.fetch import _IterableDatasetFetcher, _MapDatasetFetcher
from tracec.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,
                                       SequentialSampler)
from tracec.utils.data.workers import Workers, current

__all__ = ["DataLoader", "get_worker_info"]


class _DatasetKind:
    """PyTorch's two kinds of data set (``loader._dataset_kind``) and the
    fetcher that reads each (``fetch.py``)."""
    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
        cls = _MapDatasetFetcher if kind == _DatasetKind.Map else _IterableDatasetFetcher
        return cls(dataset, auto_collation, collate_fn, drop_last)


def _warn_pin_memory(loader):
    # PyTorch warns as each iterator starts (not at construction), from
    # one place inside the library, so the default filter shows it once.
    if loader.pin_memory and loader.pin_memory_device:
        warnings.warn("pin_memory_device is deprecated, the current accelerator will be used "
                      f"as the device,ignore pin_memory_device='{loader.pin_memory_device}'.")
    if loader.pin_memory:
        warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                      "then device pinned memory won't be used.")


class _BaseDataLoaderIter:
    """The iterator ``iter(loader)`` returns, with PyTorch's names and
    PyTorch's reading of the loader: only its torch-named attributes
    (``dataset``, ``_dataset_kind``, ``_index_sampler``, ``_auto_collation``,
    ``collate_fn``, ``drop_last``, ``num_workers``, ``generator``, ...), so a
    library may drive it with a loader-like object of its own (fastai's
    DataLoader iterates ``_SingleProcessDataLoaderIter(its _FakeLoader)``;
    PyG's loaders wrap ``_get_iterator()``'s result and call ``_reset``).
    Making one draws the workers' base seed from the loader's generator (or
    the global one), with or without workers, as PyTorch's does;
    ``_reset(loader)`` starts a new epoch of a persistent loader's iterator;
    ``_num_yielded`` counts this epoch's batches."""

    def __init__(self, loader):
        self._dataset = loader.dataset
        self._shared_seed = None
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._world_size, self._rank = 1, 0
        _warn_pin_memory(loader)
        self._pin_memory = False            # (no accelerator pins host memory)
        self._pin_memory_device = None
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = int(concrete(creation.empty((), dtype=dt.int64).random_(
            generator=loader.generator), "a DataLoader's base seed"))
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter: bool = False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)          # may raise StopIteration

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if (self._dataset_kind == _DatasetKind.Iterable
                and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            msg = (f"Length of IterableDataset {self._dataset} was reported to be "
                   f"{self._IterableDataset_len_called}(when accessing len(dataloader)), but "
                   f"{self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly "
                        "configuring the IterableDataset replica at each worker. Please see "
                        "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset"
                        " for examples.")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled", self.__class__.__name__)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """``iter(loader)`` of a loader with ``num_workers=0``: each index of the
    loader's sampler fetched in this process."""

    def __init__(self, loader):
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        if self._num_workers != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires num_workers == 0")
        self._dataset_fetcher = _DatasetKind.create_fetcher(
            self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn,
            self._drop_last)

    def _next_data(self):
        index = self._next_index()
        return self._dataset_fetcher.fetch(index)


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """``iter(loader)`` of a loader with workers, emulated (``workers.py``):
    index ``i`` goes to the next worker still reading, in turn (batch ``i``
    of a map-style data set from worker ``i % num_workers``), each fetching
    from its own data set copy with its own random state; a worker whose
    iterable data set ends leaves the turn.  A persistent loader's iterator
    keeps its workers (their random state, data set copies) across
    ``_reset``."""

    def __init__(self, loader):
        super().__init__(loader)
        self._workers = Workers(loader, self._base_seed)
        self._start()

    def _start(self):
        for w in self._workers.workers:
            with w.active():
                w.fetcher = _DatasetKind.create_fetcher(
                    self._dataset_kind, w.info.dataset, self._auto_collation, self._collate_fn,
                    self._drop_last)
        self._live = list(self._workers.workers)
        self._turn = 0

    def _reset(self, loader, first_iter: bool = False):
        super()._reset(loader, first_iter)
        if not first_iter:
            self._start()

    def _next_data(self):
        while self._live:
            index = self._next_index()
            self._turn %= len(self._live)
            w = self._live[self._turn]
            try:
                with w.active():
                    data = w.fetcher.fetch(index)
            except StopIteration:
                del self._live[self._turn]          # this worker's data ran out
                continue
            self._turn += 1
            return data
        raise StopIteration


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
        self._dataset_kind = _DatasetKind.Iterable if self._iterable else _DatasetKind.Map
        self._IterableDataset_len_called = None
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

    def __len__(self) -> int:
        if self._iterable:
            n = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)
