"""``torch.mps``: Apple GPUs, which tracec does not drive.  Queries say
"none"; the calls a CPU script makes on the way (seeding the MPS generator,
synchronizing, emptying the cache) do nothing: there is no MPS state."""
from __future__ import annotations

__all__ = ["is_available", "device_count", "synchronize", "empty_cache", "manual_seed", "seed"]


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def synchronize() -> None:
    return None


def empty_cache() -> None:
    return None


def manual_seed(seed: int) -> None:
    return None


def seed() -> None:
    return None
