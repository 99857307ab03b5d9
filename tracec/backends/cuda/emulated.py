"""The GPU kernels run on the host, the launch emulated (the CI evidence).

The same kernel specs the PTX is made from are built for the host CPU with
``launch.HostLaunch``: each kernel function loops over its blocks, and
over the block's threads once per thread section (so a barrier's guarantee
holds: every thread finishes a section before any starts the next).  The
launch plan runs as on the GPU (``plan_runner.py``) over NumPy arrays.

``compile_emulated(module)`` is to the cuda backend what ``compile_module``
is to the cpu backend; ``executable(arrays)`` must equal the interpreter,
which the tests check for elementwise kernels, reductions (odd sizes
included), the tiled matmul and symbolic sizes.
"""
from __future__ import annotations

import ctypes

import numpy as np

from tracec.backends.cuda import build
from tracec.backends.cuda.lower import lower_for_gpu
from tracec.backends.cuda.plan_runner import PlanRunner

__all__ = ["EmulatedExecutable", "compile_emulated"]


class EmulatedExecutable(PlanRunner):
    """A launch plan over NumPy arrays, its kernels compiled for the host."""

    def __init__(self, gl):
        super().__init__(gl.signature)
        self.stages = {}
        self._fns = {}
        addresses = build.host_kernels(gl)
        self._tracker = addresses.pop("_tracker")   # keeps the library loaded
        nsym = len(gl.symbols)
        for spec in gl.specs:
            proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (len(spec.refs) + 1),
                                     *[ctypes.c_int64] * (nsym + 1))
            self._fns[spec.name] = proto(addresses[spec.name])

    def pointer(self, a) -> int:
        return a.ctypes.data

    def launch(self, fn, grid, block, ptrs, err, syms) -> None:
        self._fns[fn](*ptrs, err, *syms, grid)


def compile_emulated(module, donate=None, size_guards=None, **_options) -> EmulatedExecutable:
    """The cuda backend's kernels for ``module`` (one optimized tracec
    function), run on the host with the launch emulated."""
    from tracec.symbolic import recorded_guards
    with recorded_guards() as guards:
        gl = lower_for_gpu(module, donate=donate)
    if gl.symbols:
        gl.signature["size_guards"] = list(size_guards or []) + \
            [g for g in guards if g not in (size_guards or [])]
    return EmulatedExecutable(gl)
