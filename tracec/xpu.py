"""``torch.xpu``: Intel GPUs, which tracec does not drive: every query says
"none" (so device-selecting scripts pick the CPU), and the calls a CPU
script makes on the way (seeding, synchronizing, emptying the cache) do
nothing, as in a CPU build of PyTorch."""
from __future__ import annotations

__all__ = ["is_available", "device_count", "synchronize", "empty_cache", "manual_seed",
           "manual_seed_all", "is_initialized"]


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def synchronize(device=None) -> None:
    return None


def empty_cache() -> None:
    return None


def manual_seed(seed: int) -> None:
    return None


def manual_seed_all(seed: int) -> None:
    return None
