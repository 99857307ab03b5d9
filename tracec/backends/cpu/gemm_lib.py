"""The GEMM routines as a library compiled once per machine, not per module.

A module's large matmuls call two shape-generic routines per element type
and operand layout (``gemm.py``): ``gemm_run`` (an unbatched product's work
units) and ``gemm_block`` (one column block), which call the packing
functions and the micro-kernel.  They depend on nothing but the element
type, the layouts and the target, yet they are more than half of LLVM's
work on a training step (the 784-512-512-10 SGD step: 537 of 225 + 537 ms
of O3 and code generation, measured), so every module compiled them again.
Here each variant ``(dtype, ta, tb)`` is compiled once, kept in the disk
cache under ``runtime/`` (keyed by the target and tracec's source), linked
into the JIT once per process, and modules only declare the routines:

* ``declare(mb, kind, d, ta, tb)``: the routine's name, declared external in
  the module; the variant joins ``mb.libraries`` (the lowering lists them
  in ``signature["libraries"]``);
* ``addresses(variants)``: ``{name: address}`` of the routines in this
  process, for the JIT to resolve a module's declarations
  (``runtime._link``);
* ``object_code(variant)``: the variant's object code for the target in
  effect, which ``tracec build`` links into a shared library beside the
  module's (its names stay local there, as the pool's do).

Invariant: a variant's routines are exactly what ``gemm._run_fn`` /
``gemm._block_fn`` emit into a module for it (the same emitters make them),
for the same target.
"""
from __future__ import annotations

import hashlib
import os
import threading

from tracec import dtypes as dt

__all__ = ["declare", "addresses", "object_code", "symbol"]

# (The builder, and with it xDSL's llvm dialect, is imported only to make
# code: loading cached code must not pay for those imports.)
_KINDS = ("run", "block")
_PREFIX = "tracec_gemmlib_"
_lock = threading.Lock()
#: variant -> (JIT library, {name: address}); the libraries live for the process.
_loaded: dict = {}


def symbol(kind: str, d: str, ta: bool, tb: bool) -> str:
    """The routine's symbol: ``kind`` "run" or "block", ``d`` the dtype's name."""
    return f"{_PREFIX}gemm_{kind}_{'t' if ta else 'n'}{'t' if tb else 'n'}_{_elt_name(d)}"


def _elt_name(d: str) -> str:
    return {"float32": "f32", "float64": "f64"}[d]     # str() of the builder's F32 / F64


def declare(mb, kind: str, d: dt.DType, ta: bool, tb: bool) -> str:
    """Declare routine ``kind`` of variant ``(d, ta, tb)`` in module ``mb``
    (see the module docstring); its name."""
    from tracec.backends.cpu.builder import I32, I64, PTR
    # The routines' signatures (gemm._run_fn / gemm._block_fn).
    args, ret = {"run": ([PTR] * 3 + [I64] * 8, I32),
                 "block": ([PTR] * 5 + [I64] * 7, None)}[kind]
    mb.libraries.add((d.name, bool(ta), bool(tb)))
    return mb.declare(symbol(kind, d.name, ta, tb), args, ret)


def _module(variant):
    from tracec.backends.cpu import gemm
    from tracec.backends.cpu.builder import F32, F64, ModuleBuilder
    name, ta, tb = variant
    d = dt.to_dtype(name)
    elt = F32 if d is dt.float32 else F64
    vl, mr, nr = gemm.params_for(d)
    mb = ModuleBuilder(_PREFIX)
    run = gemm._run_fn(mb, elt, vl, mr, nr, ta, tb)
    block = gemm._block_fn(mb, elt, vl, mr, nr, ta, tb)
    if (run, block) != (symbol("run", name, ta, tb), symbol("block", name, ta, tb)):
        raise AssertionError(f"gemm library names {run}, {block} differ from symbol()")
    return mb, {run, block}


def object_code(variant) -> bytes:
    """The variant's object code (possibly several packed objects:
    ``codegen.unpack_objects``) for ``codegen.target()``, from the disk
    cache or compiled now."""
    from tracec.backends import cache
    from tracec.backends.cpu import codegen
    variant = (str(variant[0]), bool(variant[1]), bool(variant[2]))
    key = hashlib.sha256(f"tracec-gemm-library|{codegen.target_id()}|{cache.source_digest()}|"
                         f"{variant}".encode()).hexdigest()
    disk = None if os.environ.get("TRACEC_NO_CACHE") else \
        cache.DiskCache(os.path.join(cache.cache_root(), "runtime"))
    hit = disk.get(key) if disk is not None else None
    if hit is not None:
        return bytes(hit[1])
    from tracec.passes.pipeline import paused_gc
    with paused_gc():
        mb, exported = _module(variant)
        obj = codegen.compile_llvm(mb.module(), exported=exported, wide=mb.wide,
                                   helpers=mb.helpers, want_asm=False,
                                   jobs=codegen.compile_jobs()).object_code
    if disk is not None:
        try:
            disk.put(key, {"kind": "gemm library", "variant": list(variant)}, obj)
        except OSError:
            pass   # no cache: compiled again next time
    return obj


def addresses(variants) -> dict[str, int]:
    """``{symbol: address}`` of the routines of ``variants`` (``[dtype name,
    ta, tb]`` each), each variant linked into this process's JIT once."""
    out: dict = {}
    for v in variants:
        v = (str(v[0]), bool(v[1]), bool(v[2]))
        with _lock:
            hit = _loaded.get(v)
            if hit is None:
                from tracec.backends.cpu import runtime
                names = [symbol(k, *v) for k in _KINDS]
                tracker = runtime._link(object_code(v), names)
                hit = _loaded[v] = (tracker, {n: int(tracker[n]) for n in names})
        out.update(hit[1])
    return out
