"""``torch.cuda.nvtx`` as in a PyTorch build without CUDA: the module
imports (profiling scripts import it at the top), and each marker call
raises PyTorch's RuntimeError, as there is no NVTX library to call."""
from __future__ import annotations

from contextlib import contextmanager

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]


def _fail(*args, **kwargs):
    raise RuntimeError("NVTX functions not installed. Are you sure you have a CUDA build?")


range_push = range_pop = range_start = range_end = mark = _fail


@contextmanager
def range(msg, *args, **kwargs):  # noqa: A001 - PyTorch's name
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
