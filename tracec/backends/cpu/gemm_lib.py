"""The GEMM routines as a library compiled once per machine, not per module.

A module's large matmuls call two shape-generic routines per element type
and operand layout (``gemm.py``): ``gemm_run`` (an unbatched product's work
units) and ``gemm_block`` (one column block), which call the packing
functions and the micro-kernel; its short products (few rows of C, B not
transposed) call ``gemm_small`` (``gemm_small.py``: column panels of one
unpacked product, per layout of A).  They depend on nothing but the element
type, the layouts and the target, yet they are more than half of LLVM's
work on a training step (the 784-512-512-10 SGD step: 537 of 225 + 537 ms
of O3 and code generation, measured), so every module compiled them again.
Here each element type's library (the routines of all four operand
layouts, sharing one micro-kernel) is compiled once, kept in the disk cache
under ``runtime/`` (keyed by the target and tracec's source), linked into
the JIT once per process, and modules only declare the routines:

* ``declare(mb, kind, d, ta, tb)``: the routine's name, declared external in
  the module; the dtype joins ``mb.libraries`` (the lowering lists them in
  ``signature["libraries"]``);
* ``addresses(dtypes)``: ``{name: address}`` of the routines in this
  process, for the JIT to resolve a module's declarations
  (``runtime._link``);
* ``object_code(dtype)``: the library's object code for the target in
  effect, which ``tracec build`` links into a shared library beside the
  module's (its names stay local there, as the pool's do).

The first ``declare`` of a dtype starts ``object_code`` on a background
thread (``_prefetch``): on a machine whose cache lacks the library (the
very first compile), LLVM's ~0.25 s on it then runs while this thread goes
on lowering the module (llvmlite's long calls release the GIL), and
``object_code`` waits for that build instead of making its own.

Invariant: the library's routines are exactly what ``gemm._run_fn`` /
``gemm._block_fn`` emit into a module (the same emitters make them), for
the same target.
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
#: dtype name -> (JIT library, {name: address}); the libraries live for the process.
_loaded: dict = {}
#: (dtype name, target) -> [thread, object code or None] of a background build.
_building: dict = {}
_building_lock = threading.Lock()     # not _lock: addresses() holds that in object_code


def symbol(kind: str, d: str, ta: bool, tb: bool) -> str:
    """The routine's symbol: ``kind`` "run", "block" or "small" (``tb`` False),
    ``d`` the dtype's name."""
    return f"{_PREFIX}gemm_{kind}_{'t' if ta else 'n'}{'t' if tb else 'n'}_{_elt_name(d)}"


def _elt_name(d: str) -> str:
    return {"float32": "f32", "float64": "f64"}[d]     # str() of the builder's F32 / F64


def declare(mb, kind: str, d: dt.DType, ta: bool, tb: bool) -> str:
    """Declare routine ``kind`` for ``d`` and the layouts ``ta``, ``tb`` in ``mb``
    (see the module docstring); its name."""
    from tracec.backends.cpu.builder import I32, I64, PTR
    # The routines' signatures (gemm._run_fn / gemm._block_fn).
    args, ret = {"run": ([PTR] * 3 + [I64] * 8, I32),
                 "block": ([PTR] * 5 + [I64] * 7, None),
                 "small": ([PTR] * 3 + [I64] * 5, None)}[kind]
    if d.name not in mb.libraries:
        mb.libraries.add(d.name)
        _prefetch(d.name)
    return mb.declare(symbol(kind, d.name, ta, tb), args, ret)


def _prefetch(d: str) -> None:
    """Start ``object_code(d)`` for the target in effect on a daemon thread,
    unless this process has the library linked or a build under way."""
    from tracec.backends.cpu import codegen
    target = codegen.target()
    with _building_lock:
        if d in _loaded or (d, target) in _building:
            return
        slot = _building[(d, target)] = [None, None]

    # The cores the compile may use, less the one this thread's lowering
    # keeps busy: the library in parts on idle cores (a first compile on a
    # many-core machine), whole on a busy or two-core one.
    jobs = max(1, codegen.compile_jobs() - 1)

    def build():
        codegen._local.target = target      # targeting() is per thread
        try:
            slot[1] = _object_code(d, jobs=jobs, concurrent=True)
        except Exception:   # noqa: BLE001 - object_code builds it again and reports
            pass

    slot[0] = threading.Thread(target=build, name="tracec-gemm-library", daemon=True)
    slot[0].start()


_LAYOUTS = ((False, False), (False, True), (True, False), (True, True))


def _names(d: str) -> list[str]:
    return [symbol(k, d, ta, tb) for ta, tb in _LAYOUTS for k in _KINDS] + \
        [symbol("small", d, ta, False) for ta in (False, True)]


def _module(d: str):
    from tracec.backends.cpu import gemm, gemm_small
    from tracec.backends.cpu.builder import F32, F64, ModuleBuilder
    dtype = dt.to_dtype(d)
    elt = F32 if dtype is dt.float32 else F64
    vl, mr, nr = gemm.params_for(dtype)
    mb = ModuleBuilder(_PREFIX)
    made = []
    for ta, tb in _LAYOUTS:
        made += [gemm._run_fn(mb, elt, vl, mr, nr, ta, tb),
                 gemm._block_fn(mb, elt, vl, mr, nr, ta, tb)]
    made += [gemm_small._small_fn(mb, dtype, ta) for ta in (False, True)]
    if made != _names(d):
        raise AssertionError(f"gemm library names {made} differ from symbol()")
    return mb, set(made)


def object_code(d: str) -> bytes:
    """The library of dtype ``d`` (``"float32"`` or ``"float64"``) as object
    code (possibly several packed objects: ``codegen.unpack_objects``) for
    ``codegen.target()``, from a background build, the disk cache or
    compiled now."""
    from tracec.backends.cpu import codegen
    d = str(d)
    with _building_lock:
        slot = _building.pop((d, codegen.target()), None)
    if slot is not None:
        slot[0].join()
        if slot[1] is not None:
            return slot[1]
    return _object_code(d, jobs=codegen.compile_jobs())


def _object_code(d: str, jobs: int, concurrent: bool = False) -> bytes:
    from tracec.backends import cache
    from tracec.backends.cpu import codegen
    if d not in ("float32", "float64"):
        raise ValueError(f"no GEMM library for {d!r}")
    key = hashlib.sha256(f"tracec-gemm-library|{codegen.target_id()}|{cache.source_digest()}|"
                         f"{d}".encode()).hexdigest()
    disk = None if os.environ.get("TRACEC_NO_CACHE") else \
        cache.DiskCache(os.path.join(cache.cache_root(), "runtime"))
    hit = disk.get(key) if disk is not None else None
    if hit is not None:
        return bytes(hit[1])
    from tracec.passes.pipeline import paused_gc
    with paused_gc():
        mb, exported = _module(d)
        obj = codegen.compile_llvm(mb.module(), exported=exported, wide=mb.wide,
                                   helpers=mb.helpers, want_asm=False,
                                   jobs=jobs, concurrent=concurrent).object_code
    if disk is not None:
        try:
            disk.put(key, {"kind": "gemm library", "dtype": d}, obj)
        except OSError:
            pass   # no cache: compiled again next time
    return obj


def addresses(dtypes) -> dict[str, int]:
    """``{symbol: address}`` of the routines of the libraries of ``dtypes``
    (names), each linked into this process's JIT once."""
    out: dict = {}
    for d in dtypes:
        d = str(d)
        with _lock:
            hit = _loaded.get(d)
            if hit is None:
                from tracec.backends.cpu import runtime
                names = _names(d)
                tracker = runtime._link(object_code(d), names, shared=True)
                hit = _loaded[d] = (tracker, {n: int(tracker[n]) for n in names})
        out.update(hit[1])
    return out
