"""``torch.distributed.tensor.experimental``: tracec has no DTensor, so
``implicit_replication`` (treat plain tensors as replicated DTensors) has
nothing to change and is an empty context; the others refuse when called."""
from __future__ import annotations

from contextlib import contextmanager

from tracec.distributed.tensor import _missing

__all__ = ["context_parallel", "implicit_replication", "local_map", "register_sharding"]


@contextmanager
def implicit_replication():
    yield


def context_parallel(*args, **kwargs):
    _missing("torch.distributed.tensor.experimental.context_parallel")


def local_map(*args, **kwargs):
    _missing("torch.distributed.tensor.experimental.local_map")


def register_sharding(*args, **kwargs):
    _missing("torch.distributed.tensor.experimental.register_sharding")
