"""``tracec.accelerator``: PyTorch's device-agnostic accelerator query.
The only accelerator tracec knows is CUDA (see ``tracec.cuda``)."""
from __future__ import annotations

from tracec import cuda
from tracec.device import device

__all__ = ["is_available", "current_accelerator", "device_count"]


def is_available() -> bool:
    return cuda.is_available()


def device_count() -> int:
    return cuda.device_count()


def current_accelerator(check_available: bool = False):
    """``device("cuda")`` where a GPU is usable, else ``None``."""
    return device("cuda") if cuda.is_available() else None
