"""``tracec.cuda``: whether a CUDA GPU is usable, as PyTorch asks it.

A GPU counts when CuPy imports and its runtime reports a device; every
failure along the way (no CuPy, no driver, no device) reads as "none", so
these functions never raise.  The answer is computed once per process.
"""
from __future__ import annotations

import functools

from tracec.device import EAGER_CUDA

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]


def device_count() -> int:
    """The number of CUDA devices tracec can use: those CuPy sees, once eager
    CUDA tensors exist (``tracec.device.EAGER_CUDA``); 0 until then."""
    return gpu_count() if EAGER_CUDA else 0


@functools.lru_cache(maxsize=1)
def gpu_count() -> int:
    """The number of CUDA devices CuPy sees (0 without CuPy or a GPU)."""
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return 0


def is_available() -> bool:
    return device_count() > 0


def manual_seed(seed: int) -> None:
    """Accepted for PyTorch scripts; tracec draws every random number from
    the one generator ``tracec.manual_seed`` seeds, so this does nothing
    (as ``torch.cuda.manual_seed`` does nothing without a GPU)."""


def manual_seed_all(seed: int) -> None:
    """See ``manual_seed``."""


# The memory and device queries scripts make, answered as PyTorch answers
# them without a GPU: memory figures are 0, cache calls do nothing, and
# device queries fail the way a build without CUDA does.
def _no_cuda(*args, **kwargs):
    raise AssertionError("Torch not compiled with CUDA enabled")


def empty_cache() -> None:
    """Nothing cached on a GPU here."""


def memory_allocated(device=None) -> int:
    return 0


max_memory_allocated = memory_reserved = max_memory_reserved = memory_allocated


def reset_peak_memory_stats(device=None) -> None:
    """Nothing to reset."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def is_initialized() -> bool:
    return _initialized


#: PyTorch's flag read by scripts before touching CUDA RNG states
#: (reformer-pytorch's Deterministic: ``if torch.cuda._initialized:``):
#: False, as no eager CUDA tensor exists in this build.
_initialized = False


synchronize = get_device_name = current_device = set_device = ipc_collect = _no_cuda
get_device_capability = get_device_properties = _no_cuda
__all__ += ["empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
            "max_memory_reserved", "reset_peak_memory_stats", "is_bf16_supported",
            "is_initialized", "synchronize", "get_device_name", "current_device", "set_device",
            "get_device_capability", "get_device_properties"]
