"""``tracec.cuda``: whether a CUDA GPU is usable, as PyTorch asks it.

A GPU counts when CuPy imports and its runtime reports a device; every
failure along the way (no CuPy, no driver, no device) reads as "none", so
these functions never raise.  The answer is computed once per process.
"""
from __future__ import annotations

import functools

from tracec.device import EAGER_CUDA
from tracec.cuda import nvtx  # noqa: F401  (torch.cuda.nvtx, imported by profiling scripts)

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


reset_max_memory_allocated = reset_max_memory_cached = reset_peak_memory_stats
reset_accumulated_memory_stats = reset_peak_memory_stats


def memory_cached(device=None) -> int:
    """PyTorch's old name of ``memory_reserved`` (its warning)."""
    import warnings
    warnings.warn("`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
                  FutureWarning, stacklevel=2)
    return 0


def max_memory_cached(device=None) -> int:
    """PyTorch's old name of ``max_memory_reserved`` (its warning)."""
    import warnings
    warnings.warn("`torch.cuda.max_memory_cached` has been renamed to "
                  "`torch.cuda.max_memory_reserved`", FutureWarning, stacklevel=2)
    return 0


def memory_stats_as_nested_dict(device=None) -> dict:
    return {}


def host_memory_stats() -> dict:
    import collections
    return collections.OrderedDict()


def get_gencode_flags() -> str:
    return ""


def is_tf32_supported() -> bool:
    return False


def is_current_stream_capturing() -> bool:
    """No CUDA graph is being captured (there is no stream)."""
    return False


has_half = True
has_magma = False


def list_gpu_processes(device=None) -> str:
    """PyTorch's answer where NVML is not installed."""
    return "pynvml module not found, please install nvidia-ml-py"


def _no_nvml(device=None):
    raise ModuleNotFoundError("nvidia-ml-py does not seem to be installed or it can't be "
                              "imported.")


utilization = temperature = power_draw = memory_usage = clock_rate = _no_nvml
device_memory_used = _no_nvml


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
get_rng_state = initial_seed = mem_get_info = current_stream = default_stream = _no_cuda
init = set_per_process_memory_fraction = get_per_process_memory_fraction = _no_cuda
get_sync_debug_mode = set_sync_debug_mode = _no_cuda


# The CUDA RNG calls PyTorch queues until CUDA initializes (never, here):
# they return at once, as in a build without CUDA.
def seed() -> None:
    """See ``manual_seed``."""


def seed_all() -> None:
    """See ``manual_seed``."""


def set_rng_state(new_state, device="cuda") -> None:
    """See ``manual_seed``."""


def set_rng_state_all(new_states) -> None:
    """One state per device: there are none."""


def get_rng_state_all() -> list:
    """One state per device: there are none."""
    return []


def get_arch_list() -> list:
    return []


def memory_stats(device=None) -> dict:
    import collections
    return collections.OrderedDict()


class device:
    """``with torch.cuda.device(i):``: index -1 (no device) does nothing;
    entering any real index fails as in a build without CUDA."""

    def __init__(self, device):
        index = getattr(device, "index", device)
        self.idx = -1 if index is None else int(index)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            raise RuntimeError("PyTorch was compiled without CUDA support")

    def __exit__(self, *exc):
        return False


class device_of(device):
    """The device context of a tensor: -1 for a CPU tensor."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class StreamContext:
    """What ``torch.cuda.stream(s)`` returns: ``None`` does nothing."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            _no_cuda()

    def __exit__(self, *exc):
        return False


def stream(stream) -> StreamContext:
    """``with torch.cuda.stream(s):``."""
    return StreamContext(stream)


class Stream:
    def __new__(cls, *args, **kwargs):
        raise RuntimeError("torch.cuda.Stream requires CUDA support")


class Event:
    def __new__(cls, *args, **kwargs):
        raise RuntimeError("Tried to instantiate dummy base class Event")


class CUDAGraph:
    """``torch.cuda.CUDAGraph``: named in annotations; capturing a graph
    needs a CUDA build (PyTorch's CPU build refuses the same way)."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("Tried to instantiate dummy base class CUDAGraph")


class graph:
    """``with torch.cuda.graph(g):``: capture needs a CUDA stream."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        Stream()
__all__ += ["empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
            "max_memory_reserved", "reset_peak_memory_stats", "is_bf16_supported",
            "is_initialized", "synchronize", "get_device_name", "current_device", "set_device",
            "get_device_capability", "get_device_properties", "get_rng_state", "initial_seed",
            "mem_get_info", "current_stream", "default_stream", "seed", "seed_all",
            "set_rng_state", "set_rng_state_all", "get_rng_state_all", "get_arch_list",
            "memory_stats", "device", "device_of", "stream", "Stream", "Event", "CUDAGraph", "StreamContext",
            "graph"]
