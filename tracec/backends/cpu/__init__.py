"""The cpu backend: optimized tracec IR -> native code for the host CPU.

Pipeline (each stage printable through ``executable.stages``):

1. ``lower.py`` (the ``tracec-to-llvm`` pass) builds xDSL's ``llvm``
   dialect directly: one exported entry function plus one internal kernel
   function per loop nest ("lowered");
2. ``codegen.py`` converts it with ``xdsl.backend.llvm.convert_module``,
   optimizes at O3 for the host CPU with loop and SLP vectorization
   ("llvm") and emits object code (and "asm");
3. ``runtime.py`` loads the object with llvmlite's LLJIT and calls the
   entry through ctypes (the C ABI is documented there); parallel kernels
   run on the process's worker pool (``pool.py``, ``parallel.py``).

``compile_module(module, donate={output: input})``: outputs that are the
new value of an input (a state tensor's update) may be computed in that
input's array; ``signature["donated"]`` lists those found safe (``lower.py``).

``compile_module(module) -> CpuExecutable``; ``load_object(object_code,
signature)`` rebuilds an executable from ``executable.object_code`` and
``executable.signature`` (a JSON-able dict) without recompiling, e.g. from
an on-disk cache.  Invariant: ``executable(arrays)`` returns what the
interpreter returns for the same module and inputs, within float
reassociation error for reductions and matmul (a donated output is the
input array it was given, updated in place).
"""
from __future__ import annotations

import io
import os
import re
import secrets

# xDSL is imported by the functions that use it: loading cached code (the
# runtime, ``rng_kernels``) imports this package and must not pay ~0.2 s
# of xDSL's imports for it.  (``ModuleOp`` in annotations only.)

__all__ = ["compile_module", "compile_object", "load_object", "target_id", "CpuExecutable", "CpuRuntimeError",
           "CpuIndexError", "LoweringError", "LowerToLLVM", "entry_symbol"]

#: A module with symbolic sizes compiles to one executable for every size
#: (``sized.py``; ``tracec.size_generic``).
SIZE_GENERIC = True

# llvmlite and the lowering load on first use, so ``import tracec`` does not
# pay for them.
_LAZY = {"CpuExecutable": "runtime", "CpuRuntimeError": "runtime", "load_object": "runtime",
         "LoweringError": "scalar", "LowerToLLVM": "lower", "target_id": "codegen"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f"tracec.backends.cpu.{_LAZY[name]}"), name)
    raise AttributeError(name)


def entry_symbol(module: ModuleOp) -> str:
    """``tracec_<function name>_<random hex>``: distinct per compiled module
    (so objects of several functions, from any number of processes, link
    into one AOT library without clashes)."""
    from xdsl.dialects import func
    fn = next((op for op in module.ops if isinstance(op, func.FuncOp)), None)
    base = re.sub(r"\W", "_", fn.sym_name.data if fn is not None else "main")
    return f"tracec_{base}_{secrets.token_hex(6)}"


def compile_module(module: ModuleOp, *, asm: bool = False, symbol: str | None = None,
                   donate: dict[int, int] | None = None, size_guards: list | None = None,
                   profile: bool = False, **_options):
    """Compile a module holding one optimized tracec function.

    The text stages ("lowered", "llvm", "asm") are made on first access of
    ``executable.stages[name]``; ``asm=True`` makes the assembly now (a
    second code generation).  ``donate``: ``{output index: input index}`` pairs where the
    caller allows the output to be computed in place in the input's array
    (the new value of a state tensor); those found safe are listed in
    ``signature["donated"]``, and for them the executable writes into the
    input array it is given and returns that very array as the output.

    A module with symbolic sizes compiles once for every size (``sized.py``):
    decisions the lowering makes from the sizes in effect
    (``tracec.symbolic.hinted``) join ``size_guards`` (those of the passes
    that made the module) in ``signature["size_guards"]``.
    ``profile=True``: a profiling build, timing every kernel
    (``profiling.ProfilingExecutable``)."""
    from tracec.backends.cpu.profiling import ProfilingExecutable, SizedProfilingExecutable
    from tracec.backends.cpu.runtime import load_object
    from tracec.backends.cpu.codegen import compile_jobs
    lowered, compiled, signature = _compile(module, asm, symbol, donate, size_guards, profile,
                                            jobs=compile_jobs())
    # The lowered module is printed on first access only (~0.1-0.2 s for a
    # training step, a tenth of the compile), the assembly made on request.
    stages = LazyStages(lowered=lambda: _print(lowered.module), asm=compiled.assembly)
    stages["llvm"] = compiled.llvm_ir
    if profile:
        cls = SizedProfilingExecutable if "symbols" in signature else ProfilingExecutable
        return cls(compiled.object_code, signature, stages)
    return load_object(compiled.object_code, signature, stages)


def compile_object(module: ModuleOp, *, symbol: str | None = None,
                   donate: dict[int, int] | None = None,
                   size_guards: list | None = None) -> tuple[bytes, dict]:
    """``(object_code, signature)`` as ``compile_module`` makes them, for the
    target in effect (``codegen.targeting``), without loading the object
    into this process (``tracec build --target`` for another CPU)."""
    _, compiled, signature = _compile(module, False, symbol, donate, size_guards)
    return compiled.object_code, signature


def _compile(module, asm, symbol, donate, size_guards=None, profile=False, jobs=1):
    from tracec.backends.cpu import codegen
    from tracec.backends.cpu.lower import lower_module
    from tracec.backends.cpu.runtime import FORMAT
    from tracec.passes.pipeline import paused_gc
    symbol = symbol or entry_symbol(module)
    from tracec.symbolic import recorded_guards
    with paused_gc(), recorded_guards() as guards:   # IR construction: see paused_gc
        lowered = lower_module(module, symbol, donate, profile)
        if lowered.signature.get("libraries"):
            # The GEMM library's routines it calls, built while it compiles.
            from tracec.backends.cpu import gemm_lib
            gemm_lib.flush()
        # The lowered module is checked by LLVM's verifier (C++) as LLVM
        # parses it, not by xDSL's: that took 1.4x the time of verifying
        # the tracec IR after every pass (18 of 114 s in tests/test_rnn_scan.py)
        # to find what LLVM's parser and verifier find anyway.
        checks = os.environ.get("TRACEC_CHECKS", "") not in ("", "0")
        compiled = codegen.compile_llvm(lowered.module, exported={symbol, symbol + "_py",
                                                                 *lowered.signature.get("exports", ())},
                                        wide=lowered.wide, helpers=lowered.helpers,
                                        want_asm=asm, jobs=jobs,
                                        straight={symbol, symbol + "_py", *lowered.small},
                                        verify=checks)
    signature = dict(lowered.signature, format=FORMAT, target=codegen.target_id())
    if "symbols" in signature:
        signature["size_guards"] = list(size_guards or []) + \
            [g for g in guards if g not in (size_guards or [])]
    return lowered, compiled, signature


def _print(module: ModuleOp) -> str:
    from xdsl.printer import Printer
    text = io.StringIO()
    Printer(stream=text).print_op(module)
    return text.getvalue() + "\n"


class LazyStages(dict):
    """Stage name -> text, where a stage may be given as a function making
    its text; it runs on the first lookup (``stages["llvm"]``).  Iteration
    and ``in`` see only the stages made so far; ``available()`` lists all."""

    def __init__(self, **makers):
        super().__init__()
        self._makers = makers

    def __missing__(self, name):
        make = self._makers.pop(name, None)
        if make is None:
            raise KeyError(name)
        text = self[name] = make()
        return text

    def available(self) -> list[str]:
        return list(self) + [n for n in self._makers if n not in self]
