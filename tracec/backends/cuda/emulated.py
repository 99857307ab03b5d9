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

__all__ = ["EmulatedExecutable", "compile_emulated", "load_object", "target_id"]


class EmulatedExecutable(PlanRunner):
    """A launch plan over NumPy arrays, its kernels compiled for the host
    (``object_code``; ``signature["host_kernels"]``: name, pointer count)."""

    def __init__(self, object_code: bytes, signature: dict, stages=None):
        from tracec.backends.cpu.runtime import _link
        super().__init__(signature)
        self.object_code = object_code
        self.stages = stages if stages is not None else {}
        kernels = signature["host_kernels"]
        # The tracker keeps the library loaded as long as this executable.
        self._tracker = _link(object_code, [name for name, _ in kernels])
        nsym = len(self.symbols)
        self._fns = {}
        for name, k in kernels:
            proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (k + 1),
                                     *[ctypes.c_int64] * (nsym + 1))
            self._fns[name] = proto(self._tracker[name])

    #: the lowering this executable was compiled from (None when loaded
    #: from the disk cache, which keeps object code only)
    lowered = None

    def stage(self, name: str):
        """The GPU stages of these kernels ("lowered", "llvm", "ptx"; "asm"
        is the PTX: the emulation runs the same kernels), made on request;
        None without the lowering (the compiler then compiles again)."""
        if name in self.stages:
            return self.stages[name]
        if self.lowered is None or name not in ("lowered", "llvm", "ptx", "asm"):
            return None
        code = build.ptx(self.lowered)
        self.stages.update(lowered=code.lowered, llvm=code.llvm, ptx=code.ptx, asm=code.ptx)
        return self.stages[name]

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
    sig = dict(gl.signature, target=target_id(),
               host_kernels=[[s.name, len(s.refs)] for s in gl.specs])
    exe = EmulatedExecutable(build.host_object(gl), sig)
    exe.lowered = gl
    return exe


def target_id() -> str:
    """The host CPU target and this backend's code (for the disk cache)."""
    from tracec.backends import cuda
    from tracec.backends.cpu import codegen
    return "emulated/" + codegen.target_id() + "/" + cuda.target_id().rsplit("/", 1)[1]


def load_object(object_code: bytes, signature: dict, stages=None) -> EmulatedExecutable:
    if signature.get("target") != target_id():
        raise ValueError(f"object made for another target: {signature.get('target')!r}")
    return EmulatedExecutable(bytes(object_code), dict(signature), stages)
