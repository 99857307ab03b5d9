"""Running a launch plan on the GPU through CuPy.

The PTX is loaded by the CUDA driver through ``cupy.RawModule(path=...)``
(no NVRTC needed), once per executable and device; kernels launch on
CuPy's current stream.  Inputs that are CuPy arrays stay on the device and
a donated output (a parameter's or optimizer buffer's new value) is
written into its input array in place there; NumPy inputs are copied to
the device for the call and the outputs copied back (a donated output then
lands in the caller's NumPy array, as on the cpu backend).

``CudaUnavailableError`` (one message, saying whether CuPy or a GPU is
missing) is raised by the first call where either is; making the
executable (and its PTX) needs neither.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile

import numpy as np

from tracec.backends.cuda import CudaUnavailableError
from tracec.backends.cuda.build import DEFAULT_ARCH
from tracec.backends.cuda.kernels import ERROR_CODE
from tracec.backends.cuda.plan_runner import PlanRunner

__all__ = ["CudaExecutable", "device_arch", "require_gpu"]


def require_gpu():
    """The ``cupy`` module, if it imports and sees a CUDA GPU; else raise
    ``CudaUnavailableError`` saying which is missing."""
    try:
        import cupy
    except ImportError as e:
        raise CudaUnavailableError(
            "backend='cuda' needs CuPy, which is not installed: pip install 'tracec[cuda]' "
            "(cupy-cuda12x; 'tracec[cuda13]' for a CUDA 13 driver) on a machine with an "
            f"NVIDIA GPU ({e})") from None
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # noqa: BLE001 - no driver, no device: CuPy says which
        raise CudaUnavailableError(
            f"backend='cuda' needs a CUDA GPU: CuPy is installed but finds none "
            f"({type(e).__name__}: {e})") from None
    if n == 0:
        raise CudaUnavailableError("backend='cuda' needs a CUDA GPU: CuPy is installed but "
                                   "finds none (0 devices)")
    return cupy


@functools.cache
def device_arch() -> str:
    """``sm_XY`` of device 0 (at least sm_80), or ``DEFAULT_ARCH`` without
    CuPy or a GPU; never raises."""
    try:
        cupy = require_gpu()
        cc = int(cupy.cuda.Device(0).compute_capability)
    except Exception:  # noqa: BLE001 - any failure: the portable default
        return DEFAULT_ARCH
    return f"sm_{max(cc, 80)}"


class CudaExecutable(PlanRunner):
    """``executable(arrays) -> arrays`` on the GPU (see the module docstring).
    ``object_code`` is the PTX; ``stages`` its text stages."""

    def __init__(self, ptx: bytes, signature: dict, stages: dict | None = None):
        super().__init__(signature)
        self.object_code = ptx
        self.stages = stages if stages is not None else {}
        self._module = None
        self._kernels: dict = {}
        self._dev_consts: dict = {}

    def stage(self, name: str) -> str:
        if name in ("ptx", "asm"):
            return self.object_code.decode()
        return self.stages[name]

    # --- PlanRunner hooks ----------------------------------------------------------------

    def __call__(self, arrays, out=None):
        cupy = require_gpu()
        self.xp = cupy
        if self._module is None:
            self._load(cupy)
        host = not any(isinstance(a, cupy.ndarray) for a in arrays)
        outs = super().__call__(arrays)
        if not host:
            return outs
        donated = self._donated
        result = []
        for k, o in enumerate(outs):
            if k in donated:
                dst = arrays[donated[k]]
                if isinstance(dst, np.ndarray) and dst.flags.c_contiguous and dst.flags.writeable:
                    dst[...] = cupy.asnumpy(o)
                    result.append(dst)
                    continue
            result.append(cupy.asnumpy(o))
        return result

    def _load(self, cupy) -> None:
        # RawModule(path=) makes the driver load the PTX (JIT for this GPU).
        folder = os.path.join(tempfile.gettempdir(), "tracec-ptx")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, hashlib.sha256(self.object_code).hexdigest()[:24] + ".ptx")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(self.object_code)
            os.replace(tmp, path)
        self._module = cupy.RawModule(path=path)
        for name in self.signature.get("kernels", ()):
            self._kernels[name] = self._module.get_function(name)

    def to_array(self, a, npd):
        a = self.xp.asarray(a)
        a = a if a.flags.c_contiguous else self.xp.array(a, order="C")
        return a if a.dtype == npd else a.astype(npd)

    def constant(self, name: str):
        c = self._dev_consts.get(name)
        if c is None:
            c = self._dev_consts[name] = self.xp.asarray(super().constant(name))
        return c

    def error_word(self, ws) -> int:
        return int(ws[ERROR_CODE:ERROR_CODE + 4].view(np.int32).get()[0])

    def error_index(self, ws) -> int:
        return int(ws[:8].view(np.int64).get()[0])

    def pointer(self, a) -> int:
        return int(a.data.ptr)

    def launch(self, fn, grid, block, ptrs, err, syms) -> None:
        args = tuple(np.uint64(p) for p in ptrs) + (np.uint64(err),) + \
            tuple(np.int64(s) for s in syms)
        self._kernels[fn]((grid,), (block,), args)
