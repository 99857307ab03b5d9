"""Kernel specs -> code: PTX for the GPU, or host code emulating the launch.

Both go through the same path as the cpu backend: the kernels are built in
xDSL's ``llvm`` dialect (``kernels.build_kernel``, one ``FuncBuilder`` per
kernel), converted by ``xdsl.backend.llvm.convert_module`` and optimized
by LLVM at O3 through llvmlite; the device module with LLVM's NVPTX
target (triple ``nvptx64-nvidia-cuda``, kernels in the ``ptx_kernel``
calling convention), the emulation with the cpu backend's codegen.

Invariant: ``ptx(gl)`` needs no GPU and no CUDA toolkit; its text is what
``ptxas`` assembles and CuPy's ``RawModule`` loads.
"""
from __future__ import annotations

import functools
import io
import threading

import llvmlite.binding as lb

from tracec.backends.cpu.builder import ModuleBuilder
from tracec.backends.cuda.kernels import build_kernel
from tracec.backends.cuda.launch import SHARED_SYMBOL, shared_definition

__all__ = ["TRIPLE", "DEFAULT_ARCH", "ptx", "host_object", "DeviceCode"]

TRIPLE = "nvptx64-nvidia-cuda"
#: The oldest architecture the PTX is made for (Ampere); newer GPUs JIT it.
DEFAULT_ARCH = "sm_80"
#: PTX ISA 7.8 (CUDA 11.8): the oldest that ``ptxas -arch=sm_90`` accepts.
PTX_FEATURES = "+ptx78"

_lock = threading.Lock()


@functools.cache
def _target_machine(arch: str):
    lb.initialize_all_targets()
    lb.initialize_all_asmprinters()
    return lb.Target.from_triple(TRIPLE).create_target_machine(
        cpu=arch, features=PTX_FEATURES, opt=3)


def _module(gl, host: bool):
    mb = ModuleBuilder("tracec_")
    mb.device_math = True        # the emulation runs the GPU's math too
    names = []
    for spec in gl.specs:
        names.append(build_kernel(mb, spec, host, gl.symbols))
    return mb, names


class DeviceCode:
    """The device module's stages: ``lowered`` (xDSL llvm dialect text),
    ``llvm`` (optimized LLVM IR) and ``ptx``."""

    def __init__(self, lowered: str, llvm_ir: str, ptx_text: str, kernels: list[str]):
        self.lowered, self.llvm, self.ptx, self.kernels = lowered, llvm_ir, ptx_text, kernels


def ptx(gl, arch: str = DEFAULT_ARCH) -> DeviceCode:
    """PTX for ``arch`` of the kernels of ``gl`` (a ``lower.GpuLowered``)."""
    from xdsl.backend.llvm.convert import convert_module
    from xdsl.printer import Printer
    from tracec.backends.cpu.codegen import _splice
    mb, names = _module(gl, host=False)
    module = mb.module()
    text = io.StringIO()
    Printer(stream=text).print_op(module)
    helpers = {}
    if SHARED_SYMBOL in mb._decls:
        helpers[SHARED_SYMBOL] = shared_definition(mb.shared.get("bytes", 0))
    tm = _target_machine(arch)
    llmod = convert_module(module, fallback_target_triple=TRIPLE,
                           data_layout=str(tm.target_data))
    for fn in llmod.functions:
        if fn.name in names:
            fn.calling_convention = "ptx_kernel"
        if not fn.is_declaration:
            fn.attributes.add("nounwind")
    with _lock:
        mod = lb.parse_assembly(_splice(str(llmod), helpers), context=lb.create_context())
        mod.verify()
        pto = lb.create_pipeline_tuning_options(speed_level=3)
        pto.loop_unrolling = True
        pb = lb.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        optimized = str(mod)
        _check_selectable(mod, gl)
        asm = tm.emit_assembly(mod)
    return DeviceCode(text.getvalue() + "\n", optimized, asm, sorted(set(names)))


#: Math intrinsics NVPTX has no instruction for (LLVM aborts the process
#: on them instead of raising): ``llvm.<name>.<type>``.
_NO_DEVICE_INSTRUCTION = frozenset(
    f"llvm.{name}.{t}" for t in ("f32", "f64")
    for name in ("pow", "exp", "exp2", "exp10", "log", "log2", "log10", "sin", "cos", "tan",
                 "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2", "powi", "ldexp",
                 "frexp"))
#: Functions a PTX module may call without defining (the driver's).
_DEVICE_RUNTIME = frozenset({"malloc", "free", "vprintf", "__assertfail"})


def _check_selectable(mod, gl) -> None:
    """Refuse, with the op and the user's line, a module that calls what
    the GPU cannot run: a math intrinsic NVPTX cannot select, or a host
    function (libm's ``erf``, the cpu GEMM library).  (LLVM's instruction
    selector would abort the whole process.)"""
    from tracec.backends.cpu.lower import describe
    from tracec.backends.cpu.scalar import LoweringError
    for fn in mod.functions:
        if not fn.is_declaration:
            continue
        name = fn.name
        bad = name in _NO_DEVICE_INSTRUCTION or \
            (not name.startswith("llvm.") and name not in _DEVICE_RUNTIME
             and name != SHARED_SYMBOL)
        if not bad:
            continue
        users = sorted({f.name for f in mod.functions if not f.is_declaration
                        and f"@{name}(" in str(f)})
        kernel = next((u for u in users if u in gl.where), None) or \
            next((k for k in gl.where for u in users if u.startswith(k)), None)
        at = describe(gl.where[kernel]) if kernel in gl.where else ", ".join(users) or "a kernel"
        raise LoweringError(f"{at}: the cuda backend cannot run {name} on the GPU yet "
                            f"(no device instruction or function for it)")


def host_object(gl) -> bytes:
    """Object code for this CPU of the kernels of ``gl`` with the launch
    emulated (``launch.HostLaunch``; the extra last argument of each kernel
    is the number of blocks)."""
    from tracec.backends.cpu import codegen
    mb, names = _module(gl, host=True)
    return codegen.compile_llvm(mb.module(), exported=set(names), want_asm=False).object_code
