"""``torch.autograd.profiler``: the older spelling of ``torch.profiler``
(``profile(use_cuda=...)``, ``record_function``), one implementation."""
from __future__ import annotations

from tracec.profiler import EventList, FunctionEvent, FunctionEventAvg, profile, record_function  # noqa: F401

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg", "emit_nvtx",
           "emit_itt"]


class emit_nvtx:  # noqa: N801 - PyTorch's name
    """``torch.autograd.profiler.emit_nvtx``: NVTX ranges for NVIDIA's
    profilers, which need CUDA; entering it enabled fails as on PyTorch's
    CPU build, disabled it does nothing."""

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled = enabled
        self.record_shapes = record_shapes

    def __enter__(self):
        if self.enabled:
            raise AssertionError("Torch not compiled with CUDA enabled")
        return self

    def __exit__(self, *exc):
        return False


class emit_itt(emit_nvtx):  # noqa: N801 - PyTorch's name
    """``torch.autograd.profiler.emit_itt``: Intel VTune ranges; tracec
    emits none (entered enabled, it says so)."""

    def __enter__(self):
        if self.enabled:
            raise RuntimeError("emit_itt: tracec has no ITT (Intel VTune) instrumentation")
        return self
