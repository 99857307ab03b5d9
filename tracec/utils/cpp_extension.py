"""``torch.utils.cpp_extension``: tracec has no C++ tensor ABI for an
extension to build against, so ``load`` / ``load_inline`` (JIT builds) and
the setuptools helpers raise ``RuntimeError`` saying so.  Libraries that
try a compiled kernel and fall back to Python on failure (peft's BOFT)
take their fallback, as they do where PyTorch's build fails."""
from __future__ import annotations

import shutil

__all__ = ["BuildExtension", "CppExtension", "CUDAExtension", "CUDA_HOME", "ROCM_HOME",
           "include_paths", "is_ninja_available", "load", "load_inline", "verify_ninja_availability"]

CUDA_HOME = None
ROCM_HOME = None
IS_HIP_EXTENSION = False


def _refuse(what: str):
    raise RuntimeError(f"torch.utils.cpp_extension.{what}: tracec cannot build C++ / CUDA "
                       "extensions (it has no ATen C++ ABI to link against)")


def load(name, sources, *args, **kwargs):
    _refuse("load")


def load_inline(name, cpp_sources, *args, **kwargs):
    _refuse("load_inline")


def CppExtension(name, sources, *args, **kwargs):   # noqa: N802 (PyTorch's name)
    _refuse("CppExtension")


def CUDAExtension(name, sources, *args, **kwargs):  # noqa: N802
    _refuse("CUDAExtension")


class BuildExtension:
    def __init__(self, *args, **kwargs):
        _refuse("BuildExtension")

    @classmethod
    def with_options(cls, **options):
        return cls


def include_paths(device_type: str = "cpu") -> list:
    return []


def is_ninja_available() -> bool:
    return shutil.which("ninja") is not None


def verify_ninja_availability() -> None:
    if not is_ninja_available():
        raise RuntimeError("Ninja is required to load C++ extensions (pip install ninja to get it)")
