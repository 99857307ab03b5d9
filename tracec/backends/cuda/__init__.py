"""The cuda backend: optimized tracec IR -> PTX, launched through CuPy.

Pipeline (each stage printable: ``fn.ir("lowered" | "llvm" | "ptx")``):

1. ``lower.py``: the cpu backend's ``Lowering`` (fusion into loop
   programs, buffer planning, donated outputs) with GPU kernel specs
   recorded in place of CPU kernels, and a host-side *launch plan*;
2. ``kernels.py`` / ``launch.py``: each spec in xDSL's ``llvm`` dialect in
   the GPU launch model (grid-stride loops, shared-memory tree
   reductions, a tiled matmul; size symbols as kernel arguments);
3. ``build.py``: LLVM's NVPTX target (through llvmlite) makes PTX; the
   same specs built for the host with the launch emulated
   (``emulated.py``) are what CI checks against the interpreter;
4. ``runtime.py``: CuPy loads the PTX and runs the plan on the GPU.

``compile_module`` needs neither CuPy nor a GPU (so ``fn.ir("ptx")`` works
anywhere); running the executable without them raises
``CudaUnavailableError`` saying which is missing.  ``EMULATED`` is the
backend registered as ``"cuda-emulated"``: the same kernels on the host.
The disk cache keeps the PTX, keyed by the GPU architecture it is made for
(``target_id``).
"""
from __future__ import annotations

import types

# ``torch.backends.cuda``'s flags (matmul.allow_tf32, the attention switches).
from tracec.backends.cuda.flags import (  # noqa: F401
    cudnn_sdp_enabled, enable_cudnn_sdp, enable_flash_sdp, enable_math_sdp,
    enable_mem_efficient_sdp, flash_sdp_enabled, is_built, math_sdp_enabled, matmul,
    mem_efficient_sdp_enabled, preferred_linalg_library, sdp_kernel)

__all__ = ["compile_module", "load_object", "target_id", "arch", "EMULATED",
           "CudaUnavailableError", "SIZE_GENERIC"]

#: A module with symbolic sizes compiles once for every size (sizes are
#: kernel arguments).
SIZE_GENERIC = True
#: No ``rnn_scan`` kernel (the cpu one is a serial body calling the host's
#: GEMM library): recurrent layers are recorded as their step loops.
SCANS = False


class CudaUnavailableError(RuntimeError):
    """``backend="cuda"`` ran where CuPy or a CUDA GPU is missing."""


def arch() -> str:
    """The architecture PTX is made for: this machine's GPU (sm_80 or newer)
    if CuPy sees one, else ``build.DEFAULT_ARCH`` (sm_80)."""
    from tracec.backends.cuda import runtime
    return runtime.device_arch()


def target_id() -> str:
    """The PTX target and this backend's code: a cached PTX is reused only
    for the same GPU architecture and the same lowering code."""
    import hashlib
    import pathlib
    import llvmlite.binding as lb
    digest = hashlib.sha256()
    here = pathlib.Path(__file__).parent
    for path in sorted([*here.glob("*.py"), *(here.parent / "cpu").glob("*.py")]):
        digest.update(path.read_bytes())
    return f"nvptx64-nvidia-cuda/{arch()}/llvm{lb.llvm_version_info}/{digest.hexdigest()[:16]}"


def compile_module(module, *, donate=None, size_guards=None, **_options):
    """The executable of one optimized tracec function (PTX made now; CuPy
    and a GPU needed only to run it)."""
    from tracec.backends.cuda import build, runtime
    from tracec.backends.cuda.lower import lower_for_gpu
    from tracec.symbolic import recorded_guards
    with recorded_guards() as guards:
        gl = lower_for_gpu(module, donate=donate)
        code = build.ptx(gl, arch())
    sig = dict(gl.signature, target=target_id(), kernels=code.kernels)
    if gl.symbols:
        sig["size_guards"] = list(size_guards or []) + \
            [g for g in guards if g not in (size_guards or [])]
    stages = {"lowered": code.lowered, "llvm": code.llvm, "ptx": code.ptx, "asm": code.ptx}
    return runtime.CudaExecutable(code.ptx.encode(), sig, stages)


def load_object(object_code: bytes, signature: dict, stages=None):
    """An executable from cached PTX and its signature (no recompiling)."""
    from tracec.backends.cuda import runtime
    if signature.get("target") != target_id():
        raise ValueError(f"PTX made for another target: {signature.get('target')!r}")
    return runtime.CudaExecutable(bytes(object_code), dict(signature), stages)


def _compile_emulated(module, *, donate=None, size_guards=None, **_options):
    from tracec.backends.cuda.emulated import compile_emulated
    return compile_emulated(module, donate=donate, size_guards=size_guards)


def _load_emulated(object_code, signature, stages=None):
    from tracec.backends.cuda.emulated import load_object as load
    return load(object_code, signature, stages)


def _emulated_target() -> str:
    from tracec.backends.cuda.emulated import target_id as tid
    return tid()


#: The backend "cuda-emulated": the cuda kernels run on the host CPU with
#: the launch emulated (no GPU needed; for tests and debugging indexing).
EMULATED = types.SimpleNamespace(compile_module=_compile_emulated, load_object=_load_emulated,
                                 target_id=_emulated_target, SIZE_GENERIC=True, SCANS=False)
