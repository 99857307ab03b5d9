"""``num_workers > 0`` emulated in the calling process, with PyTorch's
observable semantics: each worker has its own (deep, as a fork's) copy of the data set, its
``worker_init_fn(id)`` call, its own ``get_worker_info()`` (``id``,
``num_workers``, ``seed``, ``dataset``) and its own random state (tracec's,
NumPy's global and Python's ``random``, seeded from ``base_seed + id`` as
PyTorch's workers are).  The loader's iterator
(``dataloader._MultiProcessingDataLoaderIter``) deals the indices: batch
``i`` comes from worker ``i % num_workers`` (``in_order``), and an iterable
data set is read by every worker, each filling its own batches, round-robin
until all are exhausted.  A worker that
shards its data with ``get_worker_info()`` (PyTorch's documented pattern)
therefore gives PyTorch's batches in PyTorch's order.

Written by hand: no process runs, so no worker can hang, die or need
pickling; the cost is that loading does not overlap training.
"""
from __future__ import annotations

import contextlib
import copy
import random

import numpy as np

from tracec import creation

__all__ = ["WorkerInfo", "current", "Workers"]

_current: list = [None]


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


def current():
    return _current[0]


@contextlib.contextmanager
def _sharing_array_data():
    """``copy.deepcopy`` inside keeps plain tensors and NumPy arrays as they
    are (a forked worker shares their pages copy-on-write): copying a data
    set of 60,000 images held in memory once per worker per epoch doubled
    its memory and cost a fraction of a second each time.  Only the Python
    objects around them are the worker's own.  (Exact types only, as
    ``copy``'s dispatch table is consulted: a Tensor subclass is still
    copied.)"""
    import numpy as np

    from tracec.tensor import Tensor
    table = copy._deepcopy_dispatch       # (no public hook for this in copy)
    saved = {t: table.get(t) for t in (np.ndarray, Tensor)}
    for t in saved:
        table[t] = lambda x, memo: x
    try:
        yield
    finally:
        for t, f in saved.items():
            if f is None:
                table.pop(t, None)
            else:
                table[t] = f


class _Worker:
    def __init__(self, wid, n, seed, dataset):
        # A forked worker's copy of the data set: whatever it (or its
        # worker_init_fn) changes stays its own, down to the objects it
        # holds (fastai's worker_init_fn sets the shard of the DataLoader
        # its fake loader holds: shared, every worker read the last one's
        # shard).  A data set deepcopy refuses (an open file) is copied
        # shallowly: its own attributes are still its own.
        try:
            with _sharing_array_data():
                dataset = copy.deepcopy(dataset)
        except Exception:
            try:
                dataset = copy.copy(dataset)
            except Exception:
                pass
        self.info = WorkerInfo(id=wid, num_workers=n, seed=seed, dataset=dataset)
        saved = self._save()
        creation.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2 ** 32)
        self.state = self._save()
        self._restore(saved)
        #: this worker's fetcher (``fetch.py``), made by the loader's iterator
        self.fetcher = None

    @staticmethod
    def _save():
        return creation.get_rng_state(), np.random.get_state(), random.getstate()

    @staticmethod
    def _restore(state):
        creation.set_rng_state(state[0])
        np.random.set_state(state[1])
        random.setstate(state[2])

    @contextlib.contextmanager
    def active(self):
        """Run the body as this worker: its info and random state."""
        outer, prev = self._save(), _current[0]
        self._restore(self.state)
        _current[0] = self.info
        try:
            yield
        finally:
            self.state = self._save()
            _current[0] = prev
            self._restore(outer)


class Workers:
    """The emulated workers of one ``DataLoader`` iteration."""

    def __init__(self, loader, base: int):
        """``base``: the seed the loader's iterator drew (from its generator
        or the global one, once per iteration, as PyTorch's)."""
        n = loader.num_workers
        self.workers = [_Worker(i, n, base + i, loader.dataset) for i in range(n)]
        for w in self.workers:
            if loader.worker_init_fn is not None:
                with w.active():
                    loader.worker_init_fn(w.info.id)
