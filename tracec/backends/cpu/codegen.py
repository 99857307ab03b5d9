"""llvm dialect -> llvmlite -> optimized LLVM IR -> object code (host CPU).

Owns the process's LLVM initialization and target machines.  Invariant: the
object code is compiled at O3 for the host CPU name and features (loop and
SLP vectorization on, the new pass manager; loop strength reduction off:
``_init``), or, inside ``targeting(name)``
(this thread only; ``tracec build --target``), for a portable x86-64 level;
``target_id()`` names the target in effect so an object cached for one CPU
is never loaded for another.  A module compiled with ``jobs`` > 1 may be
split (``split.py``) and its parts compiled on as many threads: its object
code is then several objects, packed (``pack_objects``), which together
define what the whole module's object would.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import re
import sys
import tempfile
import threading

#: Byte offset of ``data`` in a NumPy array object (after ``PyObject_HEAD``),
#: where the ``_py`` entry reads it (the runtime checks it once per process).
PYOBJECT_DATA_OFFSET = 16

__all__ = ["target_machine", "target_id", "compile_llvm", "llvm_text", "Compiled", "targeting",
           "TARGETS", "compile_jobs", "pack_objects", "unpack_objects"]

_lock = threading.Lock()
_local = threading.local()   # .target: the (triple, cpu, features) set by targeting()


def _after_fork() -> None:
    """In a forked child: the locks a thread of the parent held at the fork
    (a background compile: ``gemm_lib``) would stay held forever, the
    thread being gone; the child, one thread, takes new ones.  That is
    this module's lock and llvmlite's process-wide one, which every locked
    llvmlite call takes."""
    global _lock
    _lock = threading.Lock()
    ffi = sys.modules.get("llvmlite.binding.ffi")
    if ffi is not None and isinstance(getattr(getattr(ffi.lib, "_lock", None), "_lock", None),
                                      type(threading.RLock())):
        ffi.lib._lock._lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork)

_V2 = ("cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3")
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
#: The portable x86-64 micro-architecture levels (LLVM CPU names): the
#: features each adds to the x86-64 baseline (cmov, cx8, fxsr, mmx, sse, sse2).
TARGETS = {"x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4}


# llvmlite is imported by the functions that use it: loading cached code
# (``runtime``, ``shared_objects``) must not pay ~35 ms for it.

@functools.cache
def _init() -> None:
    import llvmlite.binding as lb
    lb.initialize_native_target()
    lb.initialize_native_asmprinter()
    # Loop strength reduction (a code-generation pass) was a third of
    # code generation's time (emit_object: SAGAN's training step 1.33 ->
    # 0.89 s, 10-17% of LLVM's whole time) for no measurable speed: the
    # kernels address memory with GEPs on loop counters, which x86's
    # base + index * scale addressing takes as they are (same outputs; a
    # conv/Adam step, the elementwise, row-sum, softmax and GEMM rows of
    # benchmarks/cpu_kernels.py no slower, within this machine's noise).
    # An LLVM command-line option: process-wide, so it also holds for other
    # llvmlite users in the process (numba), whose code it changes no
    # result of either.
    lb.set_option("tracec", "-disable-lsr")


@functools.cache
def host() -> tuple[str, str, str]:
    """(triple, cpu name, feature string) of this machine, as LLVM detects
    it; remembered in the disk cache under a fingerprint of the processor
    (``_machine_fingerprint``) so that a process loading cached code need
    not load LLVM to name its target."""
    path = _host_record()
    if path is not None:
        try:
            with open(path) as f:
                rec = json.load(f)
            if isinstance(rec, list) and len(rec) == 3 and all(isinstance(x, str) for x in rec):
                return tuple(rec)
        except (OSError, ValueError):
            pass
    _init()
    import llvmlite.binding as lb
    found = (lb.get_process_triple(), lb.get_host_cpu_name(),
             lb.get_host_cpu_features().flatten())
    if path is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            with os.fdopen(fd, "w") as f:
                json.dump(list(found), f)
            os.replace(tmp, path)
        except OSError:
            pass   # not remembered: detected again by the next process
    return found


# The /proc/cpuinfo fields LLVM's host detection follows (the CPUID
# identity and feature flags, or the ARM ids and features); frequencies,
# core numbers and microcode revisions are left out.
_CPU_FIELDS = (b"vendor_id", b"cpu family", b"model", b"model name", b"stepping", b"flags",
               b"Features", b"CPU implementer", b"CPU architecture", b"CPU variant",
               b"CPU part", b"CPU revision", b"isa", b"uarch")


def _machine_fingerprint() -> str | None:
    """A digest of this processor's identity and features and of the LLVM
    in use (llvmlite's version), or None where /proc/cpuinfo is unreadable
    (off Linux): then the host is always asked of LLVM."""
    import hashlib
    import platform
    import llvmlite
    try:
        with open("/proc/cpuinfo", "rb") as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    lines = [ln.strip() for ln in text.split(b"\n\n", 1)[0].splitlines()
             if ln.split(b":", 1)[0].strip() in _CPU_FIELDS]
    if not lines:
        return None
    digest = hashlib.sha256(b"\n".join(lines))
    digest.update(f"|{platform.machine()}|llvmlite {llvmlite.__version__}".encode())
    return digest.hexdigest()


def _host_record() -> str | None:
    if os.environ.get("TRACEC_NO_CACHE"):
        return None
    fp = _machine_fingerprint()
    if fp is None:
        return None
    from tracec.backends import cache
    return os.path.join(cache.cache_root(), "runtime", f"host-{fp[:24]}.json")


def target() -> tuple[str, str, str]:
    """(triple, cpu name, feature string) code is generated for now: the
    host's, or the level set by ``targeting`` in this thread."""
    return getattr(_local, "target", None) or host()


@contextlib.contextmanager
def targeting(name: str | None):
    """Generate code for ``name`` (a key of ``TARGETS``; ``None`` or
    "native": the host) in this thread while the block runs.  Code made so
    must not run on this machine unless it has the level's features."""
    if name in (None, "native"):
        yield
        return
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}: use native, {', '.join(TARGETS)}")
    triple = host()[0]
    if not triple.startswith("x86_64"):
        raise ValueError(f"target {name} is for x86-64; this host is {triple}")
    old = getattr(_local, "target", None)
    _local.target = (triple, name, ",".join("+" + f for f in TARGETS[name]))
    try:
        yield
    finally:
        _local.target = old


def target_id() -> str:
    """A string naming the code-generation target and this backend's code
    (for object caches: an object built by other lowering code, or for
    another CPU, is never reused)."""
    return _target_id(target())


@functools.cache
def _target_id(t) -> str:
    # The backend's code: tracec's source digest, which covers it (and is
    # kept on disk under the files' sizes and times: reading and hashing
    # this folder's files at every start cost ~5-10 ms).
    from tracec.backends.cache import source_digest
    triple, cpu, feats = t
    import llvmlite
    return f"{triple}/{cpu}/{feats}/llvmlite{llvmlite.__version__}/{source_digest()[:16]}"


def has_feature(name: str) -> bool:
    return f"+{name}" in target()[2].split(",")


def vector_bits() -> int:
    """The widest native vector register (bits) the kernels are written for."""
    return 512 if has_feature("avx512f") else 256 if has_feature("avx2") else 128


#: Tuning flags added to every x86-64 target machine: LLVM vectorizes
#: strided loops (a max pool's stride-2 window taps and their gradient's
#: strided stores, rows of 12) with masked gathers and scatters, which on
#: AMD Zen 4 (LLVM's znver4 model prefers them) ran 2-3x slower than the
#: shuffles of its interleaved-access vectorizer or scalar code: MNIST's
#: pool taps' copy 3.3 -> 1.2 ms, its gradient's window stores 4.6 -> 3.5
#: ms on one core.  (LLVM sets the same flags itself for the Intel cores
#: whose gathers a microcode mitigation slowed.)  Tuning only: every
#: result is the same.
X86_TUNING = ("prefer-no-gather", "prefer-no-scatter")


def machine_features(triple: str, feats: str) -> str:
    """The feature string a target machine is made with: ``feats`` plus
    ``X86_TUNING`` on x86-64."""
    if not triple.startswith("x86_64"):
        return feats
    return ",".join([f for f in feats.split(",") if f] + ["+" + f for f in X86_TUNING])


def target_machine():
    """The target machine (O3, PIC) for ``target()``: the host CPU unless
    ``targeting`` says otherwise.  Kept for the life of the process: engines
    never own it (the object is loaded by LLJIT)."""
    return _target_machine(target())


@functools.cache
def _target_machine(t):
    _init()
    import llvmlite.binding as lb
    triple, cpu, feats = t
    return lb.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=machine_features(triple, feats), opt=3, reloc="pic",
        codemodel="default")


class Compiled:
    """Results of compiling one llvm-dialect module.  ``object_code`` is one
    object, or several packed by ``pack_objects`` (the module was compiled
    in parts: ``split.py``); ``parts`` holds each part's optimized text."""

    def __init__(self, llvm_ir: str, object_code: bytes, asm: str | None,
                 parts: list[str] | None = None):
        # The text, not the llvmlite module: a module kept past its compile
        # can outlive its LLVMContext's wrapper and crash when collected.
        # (Printing it costs ~4 ms for a training step.)
        self.llvm_ir = llvm_ir
        self.object_code = object_code
        self.asm = asm
        self.parts = parts or [llvm_ir]

    def assembly(self) -> str:
        """Assembly of the optimized module (a second code generation)."""
        if self.asm is None:
            self.asm = "\n".join(assembly(p) for p in self.parts)
        return self.asm


#: Starts a blob of several objects (an ELF or Mach-O object starts otherwise).
OBJECTS_MAGIC = b"TRACEC-OBJECTS\x00\x01"


def pack_objects(objects: list[bytes]) -> bytes:
    """One bytes value for several objects (one object: itself, unchanged)."""
    if len(objects) == 1:
        return bytes(objects[0])
    sizes = b"".join(len(o).to_bytes(8, "little") for o in objects)
    return OBJECTS_MAGIC + len(objects).to_bytes(4, "little") + sizes + b"".join(objects)


def unpack_objects(blob: bytes) -> list[bytes]:
    """The objects ``pack_objects`` packed (a single object as it is)."""
    if not blob.startswith(OBJECTS_MAGIC):
        return [blob]
    at = len(OBJECTS_MAGIC)
    n = int.from_bytes(blob[at:at + 4], "little")
    at += 4
    sizes = [int.from_bytes(blob[at + 8 * i:at + 8 * i + 8], "little") for i in range(n)]
    at += 8 * n
    if at + sum(sizes) != len(blob):
        raise ValueError(f"packed objects: {len(blob)} bytes, expected {at + sum(sizes)}")
    out = []
    for size in sizes:
        out.append(blob[at:at + size])
        at += size
    return out


def write_objects(objects: list[bytes], folder: str, stem: str) -> list[str]:
    """Write each object to ``folder/<stem><i>.o`` (for a system linker);
    returns the paths."""
    paths = []
    for i, obj in enumerate(objects):
        paths.append(os.path.join(folder, f"{stem}{i}.o"))
        with open(paths[-1], "wb") as f:
            f.write(obj)
    return paths


def compile_jobs() -> int:
    """Threads a compile may use: ``$TRACEC_COMPILE_JOBS``, else the cores
    this process may run on (at most 4) that the system's load average
    leaves idle, counting this process's own thread as one of them.  The
    parts of a split module cost 10-20% more CPU than the whole: on a busy
    machine splitting only slows the compile down."""
    env = os.environ.get("TRACEC_COMPILE_JOBS")
    if env:
        return max(1, int(env))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        idle = int(cores - os.getloadavg()[0] + 1.5)
    except (AttributeError, OSError):  # no load average here
        idle = cores
    return max(1, min(4, cores, idle))


def _tune(llmod, internal: set[str], wide: set[str] = frozenset(),
          straight: set[str] = frozenset()) -> None:
    """Function attributes xDSL's converter does not set: kernels are
    internal and never inlined (each is optimized on its own, which keeps
    O3's cost linear in the number of kernels), nothing unwinds.

    ``straight`` functions (a module's entries: one long basic block of
    pointer arithmetic and kernel calls, no loops) are marked ``optnone``:
    LLVM then selects their instructions with FastISel and skips the
    machine scheduler, whose cost grows faster than linearly with a basic
    block's length.  A 2,600-call training-step entry took a third of
    LLVM's whole time for its module (machine scheduler 1.1 s of 8.4 s);
    the unoptimized entry runs a few instructions more per kernel call.
    Kernels that do little work at every call (``lower.SMALL_WORK``) are
    ``straight`` too: O3 was half of LLVM's time on a small model's step
    (TFT's: 2.3 s of optimization, 1.1 s with them unoptimized), for
    kernels that run in well under a microsecond either way.

    LLVM's tuning for AVX-512 Intel cores vectorizes with 256-bit registers
    by default; ``wide`` kernels (compute-bound: exp, tanh, erf...) are
    ~25-30% faster with 512-bit ones, memory-bound loops are not (a 64-byte
    vector load of a 16-byte-aligned NumPy array splits cache lines)."""
    prefer = f'"prefer-vector-width"="{vector_bits()}"'
    for fn in llmod.functions:
        if fn.is_declaration:
            continue
        if fn.name in internal:
            fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        if fn.name in straight:
            fn.attributes.add("optnone")
        if fn.name in wide and vector_bits() > 256:
            # A string attribute llvmlite does not know; set.add skips its
            # name check and it prints verbatim in the function header.
            set.add(fn.attributes, prefer)


def compile_llvm(module, *, exported: set[str], want_asm: bool = True,
                 wide: set[str] = frozenset(), helpers: dict[str, str] | None = None,
                 jobs: int = 1, concurrent: bool = False,
                 straight: set[str] = frozenset(), verify: bool = False) -> Compiled:
    """Convert, optimize (O3 for the host) and emit object code (and asm).
    ``straight``: functions compiled without optimization (``_tune``).
    ``helpers``: declared functions to define from LLVM IR text (spliced in
    place of their declarations before parsing).  ``jobs`` > 1: the module
    may be split (``split.py``) and its parts compiled on as many threads,
    giving several objects (``pack_objects``).  ``concurrent``: compile
    outside llvmlite's lock, with a target machine of this call's own (a
    background build must not hold up other threads' compiles).
    ``verify``: LLVM's verifier checks each module part as parsed (before
    optimization), raising on malformed IR."""
    import llvmlite.binding as lb
    tm = target_machine()
    text = llvm_text(module, exported=exported, wide=wide, helpers=helpers, straight=straight)
    if jobs > 1:
        from tracec.backends.cpu.split import split_module
        parts = split_module(text, jobs)
        if len(parts) > 1:
            try:
                return _compile_parts(parts, want_asm, verify)
            except RuntimeError as e:   # LLVM refused a part: compile the module whole
                _warn_once(f"tracec: compiling a module in {len(parts)} parts failed ({e}); "
                           f"compiling it whole")
    if concurrent:
        return _compile_parts([text], want_asm, verify)
    with _lock:  # one compile at a time per target machine
        mod = lb.parse_assembly(text, context=lb.create_context())
        if verify:
            mod.verify()
        pb = _pass_builder(tm)
        pb.getModulePassManager().run(mod, pb)
        optimized = str(mod)
        obj = tm.emit_object(mod)
        asm = tm.emit_assembly(mod) if want_asm else None
    return Compiled(optimized, bytes(obj), asm)


def llvm_text(module, *, exported: set[str] | None, wide: set[str] = frozenset(),
              helpers: dict[str, str] | None = None,
              straight: set[str] = frozenset()) -> str:
    """The llvm-dialect ``module`` as LLVM IR text for ``target()``, tuned
    (``_tune``) and with ``helpers`` spliced in, as ``compile_llvm`` parses
    it; ``exported`` None: every function defined keeps external linkage."""
    # Imported here: loading cached object code needs none of xDSL's llvm
    # dialect (~0.1 s of imports in a new process).
    from xdsl.backend.llvm.convert import convert_module
    llmod = convert_module(module, fallback_target_triple=target()[0],
                           data_layout=str(target_machine().target_data))
    internal = set() if exported is None else \
        {f.name for f in llmod.functions if not f.is_declaration} - exported
    _tune(llmod, internal, wide, straight)
    return _splice(str(llmod), helpers or {})


@functools.cache
def _warn_once(message: str) -> None:
    import warnings
    warnings.warn(message, stacklevel=3)


def _pass_builder(tm, speed: int = 3):
    import llvmlite.binding as lb
    pto = lb.create_pipeline_tuning_options(speed_level=speed)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    # Full unrolling of the many small constant-trip loops multiplies
    # compile time and code size for no measurable gain; the vectorizer
    # still interleaves, and the GEMM micro-kernel is unrolled by hand.
    pto.loop_unrolling = False
    return lb.create_pass_builder(tm, pto)


def _unlocked(name: str):
    """The C function ``name`` of llvmlite's library, called without
    llvmlite's process-wide lock (which serializes every call).  Only for
    calls on objects this thread alone uses (its own context, module, pass
    builder and target machine), which LLVM allows to run concurrently;
    the locked function where llvmlite's wrapper changes."""
    from llvmlite.binding import ffi
    fn = getattr(ffi.lib, name)
    return getattr(fn, "_cfn", fn)


def _compile_part(text: str, t, want_asm: bool, verify: bool = False,
                  speed: int = 3) -> tuple[str, bytes, str | None]:
    """Optimize (LLVM's IR pipeline at ``speed``: ``_pass_builder``) and
    emit one part on the calling thread, with a target machine of its own
    (a target machine is not shared between threads)."""
    import llvmlite.binding as lb
    from llvmlite.binding import ffi
    triple, cpu, feats = t
    tm = lb.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=machine_features(triple, feats), opt=3, reloc="pic",
        codemodel="default")
    mod = lb.parse_assembly(text, context=lb.create_context())
    try:
        if verify:
            mod.verify()
        pb = _pass_builder(tm, speed)
        _unlocked("LLVMPY_RunNewModulePassManager")(pb.getModulePassManager(), mod, pb)
        with ffi.OutputString() as err:
            buf = _unlocked("LLVMPY_TargetMachineEmitToMemory")(tm, mod, 1, err)
            if not buf:
                raise RuntimeError(str(err))
        try:
            obj = ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buf),
                                   ffi.lib.LLVMPY_GetBufferSize(buf))
        finally:
            ffi.lib.LLVMPY_DisposeMemoryBuffer(buf)
        return str(mod), obj, (tm.emit_assembly(mod) if want_asm else None)
    finally:
        # Now, before its context: left to the garbage collector (an
        # exception's frames), the context may go first, and disposing
        # the module then crashes.
        mod.close()


def _compile_parts(parts: list[str], want_asm: bool, verify: bool = False) -> Compiled:
    """Each part on a thread of its own (the first on this one)."""
    _init()
    t = target()
    results: list = [None] * len(parts)

    def work(i):
        try:
            results[i] = _compile_part(parts[i], t, want_asm, verify)
        except BaseException as e:  # re-raised on the calling thread, without
            results[i] = e.with_traceback(None)   # this thread's frames (LLVM objects)

    threads = [threading.Thread(target=work, args=(i,), daemon=True,
                                name=f"tracec-compile-{i}") for i in range(1, len(parts))]
    for th in threads:
        th.start()
    work(0)
    for th in threads:
        th.join()
    error = next((r for r in results if isinstance(r, BaseException)), None)
    if error is not None:
        try:
            raise error
        finally:
            # No cycle (exception -> this frame -> exception) that would
            # leave the caller's frame, with its LLVM module and context,
            # to the garbage collector: it may dispose the context first.
            error = results = None
    texts = [r[0] for r in results]
    llvm_ir = "".join(f"; ---- part {i + 1} of {len(texts)} ----\n{x}"
                      for i, x in enumerate(texts))
    asm = "\n".join(r[2] for r in results) if want_asm else None
    return Compiled(llvm_ir, pack_objects([r[1] for r in results]), asm, parts=texts)


def _splice(text: str, helpers: dict[str, str]) -> str:
    """Replace the declarations of ``helpers`` by their definitions."""
    for name, definition in helpers.items():
        text, n = re.subn(rf'^declare [^\n]*@"?{re.escape(name)}"?\([^\n]*$',
                          lambda _m: definition, text, count=1, flags=re.M)
        if n != 1:
            raise ValueError(f"no declaration of {name} to define")
    return text


def assembly(llvm_ir: str) -> str:
    """Assembly for optimized LLVM IR text (the "asm" stage on demand)."""
    import llvmlite.binding as lb
    with _lock:
        return target_machine().emit_assembly(lb.parse_assembly(llvm_ir,
                                                                context=lb.create_context()))
