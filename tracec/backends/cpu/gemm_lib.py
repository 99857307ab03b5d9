"""The GEMM routines as a library compiled once per machine, function by
function, as modules need them.

A module's large matmuls call two shape-generic routines per element type
and operand layout (``gemm.py``): ``gemm_run`` (an unbatched product's work
units) and ``gemm_block`` (one column block), which call the packing
functions and the micro-kernel; its short products (few rows of C, B not
transposed) call ``gemm_small`` (``gemm_small.py``: column panels of one
unpacked product, A's strides run-time arguments: one routine for both
layouts of A).  They depend on nothing but the element
type, the layouts and the target, yet they are more than half of LLVM's
work on a training step, so modules only declare them and the library is
compiled once per machine:

* ``declare(mb, kind, d, ta, tb)``: the routine's name, declared external in
  the module; the name joins ``mb.libraries`` (the lowering lists them in
  ``signature["libraries"]``) and its build is queued for a background
  thread (``_prefetch``) unless this process or the disk cache has it;
* ``flush()``: the module is lowered: the background thread builds what is
  queued, while the module compiles;
* ``addresses(names)``: ``{name: address}`` of those routines in this
  process, for the JIT to resolve a module's declarations
  (``runtime._link``);
* ``object_code(names)``: the object code of those routines and of every
  library function they call, for the target in effect, which ``tracec
  build`` links into a shared library beside the module's (its names stay
  local there, as the pool's do).

The unit of caching is one function of the library (a routine, the
micro-kernel, a packing function): an entry in the disk cache under
``runtime/`` keyed by its name, the target and tracec's source (its code
depends on nothing else), naming the object that defines it (stored once,
keyed by its content), the other functions that object defines and the
library functions it calls.  So a module builds only what it calls (the
784-512-512-10 MLP step: 11 of the 16 float32 functions), a later module
with another layout builds only the functions it adds (a partial library
is completed on demand), and a build compiles in parallel: its functions
go into as many modules (bins balanced by ``split._cost``) as threads may
compile (``compile_jobs()``), compile tasks that its own thread, helper
threads and any thread waiting for them (``addresses`` while the module's
loader waits) take from a shared list, largest first; LLVM runs them
outside llvmlite's lock (``codegen._compile_part``).  The functions are
``weak_odr``: objects of different builds (another process's, at the same
time) may both define one, and the linker keeps one of the identical
copies.  A function is built by one thread of a process at a time
(``_inflight``); the disk cache's atomic writes keep whole entries.

Linking: the functions a module needs that this process has not linked yet
go into the JIT (or their shared library, ``shared_objects``) as one
library of their objects, exporting them (their names carry the library's
prefix), its references to functions linked before resolved to their
addresses.

Invariant: the library's functions are exactly what ``gemm._run_fn`` /
``gemm._block_fn`` / ``gemm_small._small_fn`` emit into a module (the same
emitters make them), for the same target; a function's code is the same
whichever build made it.
"""
from __future__ import annotations

import hashlib
import os
import threading

from tracec import dtypes as dt

__all__ = ["declare", "flush", "addresses", "object_code", "symbol", "routines"]

# (The builder, and with it xDSL's llvm dialect, is imported only to make
# code: loading cached code must not pay for those imports.)
_KINDS = ("run", "block")
_PREFIX = "tracec_gemmlib_"
#: LLVM's optimization pipeline for the library (``speed_level``; code
#: generation stays at O3).  O2, not the modules' O3: the routines are
#: vectorized by hand, and O3's extra passes (non-trivial loop unswitching
#: of the packs' remainder tests, argument promotion...) cost ~20% of the
#: library's LLVM time (its 11 functions a 784-512-512-10 step builds:
#: 169 -> 135 ms, one core) for no measured speed: ``gemm_small``'s code is
#: the same, the micro-kernel's differs in register allocation only, and
#: products through every routine (nn, nt, tn, short, tiny) ran as fast
#: (one core, min of 7 x 200 calls, medians of 3-4 alternated processes, O3 vs O2:
#: ``[256,512]@[512,512]`` 808 vs 786 us, ``^T`` 781 vs 794,
#: ``[256,512]^T@`` 823 vs 811, ``[32,512]@[512,512]`` 118 vs 124,
#: ``[32,784]^T@[32,512]`` 161 vs 159, ``[256,10]^T@[256,64]`` 7.3 vs 7.3;
#: the whole 784-512-512-10 SGD step, one core, min of 7 x 100 steps, 18
#: pairs of processes in ABBA order: O2 faster in 15, medians of the three
#: rounds (O2 vs O3) 1229 vs 1271, 1247 vs 1242, 1232 vs 1272 us; rounds not in ABBA
#: order leaned whichever way the order did).
SPEED = 2
_LAYOUTS = ((False, False), (False, True), (True, False), (True, True))


def symbol(kind: str, d: str, ta: bool, tb: bool) -> str:
    """The routine's symbol: ``kind`` "run", "block" or "small" (one
    routine for every layout of A: ``ta``, ``tb`` ignored), ``d`` the
    dtype's name."""
    if kind == "small":
        return f"{_PREFIX}gemm_small_{_elt_name(d)}"
    return f"{_PREFIX}gemm_{kind}_{'t' if ta else 'n'}{'t' if tb else 'n'}_{_elt_name(d)}"


def _elt_name(d: str) -> str:
    return {"float32": "f32", "float64": "f64"}[d]     # str() of the builder's F32 / F64


def routines(d: str) -> dict[str, tuple[str, bool, bool]]:
    """``{symbol: (kind, ta, tb)}`` of the routines modules may declare for
    dtype ``d``."""
    out = {symbol(k, d, ta, tb): (k, ta, tb) for ta, tb in _LAYOUTS for k in _KINDS}
    out[symbol("small", d, False, False)] = ("small", False, False)
    return out


#: routine symbol -> (dtype name, kind, ta, tb)
_ROUTINES = {name: (d, *spec) for d in ("float32", "float64")
             for name, spec in routines(d).items()}


def _expand(names) -> list[str]:
    """Routine names; a dtype name (an older signature's ``libraries``)
    stands for all of its routines."""
    out: list[str] = []
    for n in ([names] if isinstance(names, str) else names):
        n = str(n)
        if n in ("float32", "float64"):
            out += list(routines(n))
        elif n in _ROUTINES:
            out.append(n)
        else:
            raise ValueError(f"no GEMM library routine {n!r}")
    return out


def declare(mb, kind: str, d: dt.DType, ta: bool, tb: bool) -> str:
    """Declare routine ``kind`` for ``d`` and the layouts ``ta``, ``tb`` in ``mb``
    (see the module docstring); its name."""
    from tracec.backends.cpu.builder import I32, I64, PTR
    # The routines' signatures (gemm._run_fn / gemm._block_fn / gemm_small._small_fn).
    args, ret = {"run": ([PTR] * 3 + [I64] * 8, I32),
                 "block": ([PTR] * 5 + [I64] * 7, None),
                 "small": ([PTR] * 3 + [I64] * 7, None)}[kind]
    name = symbol(kind, d.name, ta, tb)
    if name not in mb.libraries:
        mb.libraries.add(name)
        _prefetch(name)
    return mb.declare(name, args, ret)


# ---- the process's functions: built or read, being built, linked ----

_cond = threading.Condition()
#: (target, name) -> (object, refs, defines): see _lookup
_objects: dict = {}
#: (target, name) of the functions a thread of this process is building
_inflight: set = set()
#: compile tasks waiting for a thread: [(cost, callable)], the largest last
_tasks: list = []
#: the background builder's queue of (target, routine) and whether it runs
_queue: list = []
_worker = [False]
_link_lock = threading.Lock()
#: (target, name) -> address of the functions linked into this process
_linked: dict = {}
#: the JIT libraries (resource trackers) holding them: they live for the process
_libraries: list = []


def _after_fork() -> None:
    """A forked child has none of its parent's threads: nothing is being
    built there (what the parent was building, the child builds again)."""
    global _cond, _link_lock
    _cond = threading.Condition()
    _link_lock = threading.Lock()
    _inflight.clear()
    _tasks.clear()
    _queue.clear()
    _worker[0] = False


os.register_at_fork(after_in_child=_after_fork)


def _disk():
    from tracec.backends import cache
    if os.environ.get("TRACEC_NO_CACHE"):
        return None
    return cache.DiskCache(os.path.join(cache.cache_root(), "runtime"))


def _key(t, name: str) -> str:
    from tracec.backends import cache
    from tracec.backends.cpu import codegen
    return hashlib.sha256(f"tracec-gemm-function|{codegen._target_id(t)}|"
                          f"{cache.source_digest()}|{name}".encode()).hexdigest()


def _object_key(obj: bytes) -> str:
    return hashlib.sha256(b"tracec-gemm-object|" + hashlib.sha256(obj).digest()).hexdigest()


def _lookup(t, name: str):
    """``(object, refs, defines)`` of function ``name`` for target ``t`` from
    this process or the disk cache, or None: the object that defines it
    (with the others of ``defines``) and the library functions that
    object calls and does not define (``refs``)."""
    hit = _objects.get((t, name))
    if hit is not None:
        return hit
    disk = _disk()
    entry = disk.get(_key(t, name)) if disk is not None else None
    if entry is None:
        return None
    header = entry[0]
    refs, defines, key = header.get("refs"), header.get("defines"), header.get("object")
    if header.get("name") != name or not isinstance(refs, list) or \
            not isinstance(defines, list) or name not in defines or not isinstance(key, str):
        return None
    obj = disk.get(key)
    if obj is None:
        return None
    hit = (bytes(obj[1]), tuple(refs), tuple(defines))
    with _cond:
        _objects.setdefault((t, name), hit)
    return hit


def _collect(names, t, jobs: int) -> dict:
    """``{name: (object, refs, defines)}`` (``_lookup``) of ``names``, of
    every library function their objects call and of the others those
    objects define, for target ``t``: from this process, the disk cache,
    other threads' builds (helping with their compile tasks while waiting)
    or built now on ``jobs`` threads."""
    out: dict = {}
    stack = list(names)
    while True:
        missing = []
        while stack:
            n = stack.pop()
            if n in out or n in missing:
                continue
            hit = _lookup(t, n)
            if hit is None:
                missing.append(n)
                continue
            for d in hit[2]:       # the object defines these too
                out.setdefault(d, hit)
            stack += [r for r in hit[1] if r not in out]
        if not missing:
            return out
        _build(missing, t, jobs)
        stack = missing


def _build(names, t, jobs: int) -> None:
    """Make sure ``names`` have been built for target ``t``: build those no
    thread is building (with what they call that is missing), then wait
    for the others, compiling waiting tasks meanwhile.  Raises what a
    build of this thread raised."""
    build = _start(names, t, jobs)
    if build is not None:
        _finish(build)
    with _cond:
        while any((t, n) in _inflight and (t, n) not in _objects for n in names):
            _run_a_task_or_wait()


class _Build:
    """One thread's build: the functions it claimed (``_inflight``), its
    compile tasks not finished yet, their errors and its helper threads."""

    def __init__(self, t, claimed: list[str]):
        self.t = t
        self.claimed = list(claimed)
        self.left = 0
        self.errors: list = []
        self.helpers: list = []


def _start(names, t, jobs: int, helpers: int | None = None) -> _Build | None:
    """Claim those of ``names`` no thread has or builds, emit them with the
    functions they call into one llvm-dialect module, and queue compile
    tasks for those of its functions not available yet: ``jobs`` modules
    (bins) for as many threads; start ``helpers`` helper threads (default
    ``jobs - 1``: this thread compiles too).  None when there is nothing to
    claim.  ``_finish`` waits for the tasks."""
    with _cond:
        roots = [n for n in names if (t, n) not in _inflight and (t, n) not in _objects]
        _inflight.update((t, n) for n in roots)
    if not roots:
        return None
    build = _Build(t, roots)
    try:
        _queue_tasks(build, roots, jobs, jobs - 1 if helpers is None else helpers)
    except BaseException:
        _finish(build)
        raise
    return build


def _queue_tasks(build: _Build, roots: list[str], jobs: int, helpers: int) -> None:
    from tracec.backends.cpu import codegen, split
    from tracec.passes.pipeline import paused_gc
    t = build.t
    old = getattr(codegen._local, "target", None)
    codegen._local.target = t            # targeting() is per thread
    try:
        with paused_gc():
            mb = _module(roots)
            text = codegen.llvm_text(mb.module(), exported=None, wide=mb.wide,
                                     helpers=mb.helpers)
    finally:
        codegen._local.target = old
    parsed = split._parse(text)
    if parsed is None:
        raise AssertionError("the GEMM library's text is not one split.py reads")
    top, funcs = parsed
    if any(line.startswith("@") for line in top):
        raise AssertionError("the GEMM library has globals: a function's module needs them")
    by_name = {f.name: f for f in funcs}
    for f in funcs:     # the library functions each calls
        f.refs = {split._unquote(r) for line in f.lines[1:]
                  for r in split._REF.findall(line)} & by_name.keys() - {f.name}
    for n in roots:
        if n not in by_name:
            raise AssertionError(f"the GEMM library's module lacks {n}")
    # What the roots call that no thread has or builds (found on disk
    # meanwhile: read, not compiled).
    with _cond:
        deps = [f.name for f in funcs if f.name not in roots and
                (t, f.name) not in _inflight and (t, f.name) not in _objects]
        _inflight.update((t, n) for n in deps)
        build.claimed += deps
    todo = list(roots) + [n for n in deps if _lookup(t, n) is None]
    # One compile task per bin of functions (a module of its own, LLVM's
    # cost in each balanced), as many bins as threads: a module per
    # function cost ~10% more of LLVM's time.
    bins: list = [[] for _ in range(max(1, min(jobs, len(todo))))]
    load = [0] * len(bins)
    for n in sorted(todo, key=lambda n: (-split._cost(by_name[n]), n)):
        i = load.index(min(load))
        bins[i].append(by_name[n])
        load[i] += split._cost(by_name[n])
    with _cond:
        for i, fs in enumerate(bins):
            _tasks.append((load[i], _task(t, fs, _bin_text(top, by_name, fs), build)))
            build.left += 1
        _tasks.sort(key=lambda x: x[0])
        _cond.notify_all()
    build.helpers = [threading.Thread(target=_help, name=f"tracec-gemm-library-{i}",
                                      daemon=True)
                     for i in range(min(helpers, len(bins) - 1))]
    for h in build.helpers:
        h.start()


def _finish(build: _Build) -> None:
    """Wait for ``build``'s compile tasks (running waiting tasks meanwhile),
    release its claims, raise its first error."""
    try:
        with _cond:
            while build.left:     # its tasks, run by any thread
                _run_a_task_or_wait()
        for h in build.helpers:
            h.join()
    finally:
        with _cond:
            _inflight.difference_update((build.t, n) for n in build.claimed)
            _cond.notify_all()
    if build.errors:
        raise build.errors[0]


def _run_a_task_or_wait() -> None:
    """With ``_cond`` held: run the largest waiting compile task (``_cond``
    released meanwhile), or wait for a change."""
    if _tasks:
        task = _tasks.pop()[1]
        _cond.release()
        try:
            task()
        finally:
            _cond.acquire()
    else:
        _cond.wait()


def _help() -> None:
    """A helper thread: compile tasks until none is left."""
    with _cond:
        while _tasks:
            _run_a_task_or_wait()


def _task(t, fs: list, text: str, build: _Build):
    """The compile task of the functions ``fs`` (their module's ``text``):
    the object into ``_objects`` and the disk cache (once, by its content;
    an entry per function names it)."""
    defines = tuple(sorted(f.name for f in fs))
    refs = tuple(sorted({r for f in fs for r in f.refs} - set(defines)))

    def run():
        from tracec.backends.cpu import codegen
        try:
            obj = codegen._compile_part(text, t, False, speed=SPEED)[1]
            disk = _disk()
            if disk is not None:
                try:
                    # The object first: an entry naming it finds it whole.
                    key = _object_key(obj)
                    disk.put(key, {"kind": "gemm library object", "defines": list(defines)}, obj)
                    for n in defines:
                        disk.put(_key(t, n), {"kind": "gemm function", "name": n, "object": key,
                                              "refs": list(refs), "defines": list(defines)}, b"")
                except OSError:
                    pass   # no cache: compiled again next time
            with _cond:
                for n in defines:
                    _objects[(t, n)] = (obj, refs, defines)
        except Exception as e:  # noqa: BLE001 - raised by the thread that built it
            build.errors.append(e.with_traceback(None))
        finally:
            with _cond:
                build.left -= 1
                _cond.notify_all()
    return run


def _bin_text(top: list[str], by_name: dict, fs: list) -> str:
    """A module defining the functions ``fs``, ``weak_odr`` (an object of
    another build may define one of them too: the linker keeps one, all
    alike), with the library's header lines and declarations of the
    library functions they call."""
    from tracec.backends.cpu import split
    names = {f.name for f in fs}
    decls = [split._declaration(by_name[r]) for r in sorted({r for f in fs for r in f.refs})
             if r in by_name and r not in names]
    bodies = []
    for f in fs:
        if not f.lines[0].startswith("define ") or f.internal:
            raise AssertionError(f"unexpected linkage of {f.name}: {f.lines[0][:60]}")
        bodies.append("\n".join(["define weak_odr " + f.lines[0][len("define "):],
                                 *f.lines[1:]]))
    return "\n".join(top + decls + bodies) + "\n"


def _module(roots: list[str]):
    """A module builder holding ``roots`` (routine names) and the functions
    they call, made by the emitters modules use without the library."""
    from tracec.backends.cpu import gemm, gemm_small
    from tracec.backends.cpu.builder import F32, F64, ModuleBuilder
    mb = ModuleBuilder(_PREFIX)
    emit: list[str] = []
    for name in roots:
        if name in _ROUTINES:
            emit.append(name)
            continue
        # A function the routines call (the micro-kernel, a packing
        # function) whose entry is missing from the disk cache while an
        # entry that calls it is there (a process stopped between two
        # objects' writes): the routines of its element type bring it in
        # (those found on disk are read, not compiled: _queue_tasks).
        ds = [d for d in ("float32", "float64") if name.endswith("_" + _elt_name(d))] or \
            ["float32", "float64"]
        emit += [r for d in ds for r in routines(d)]
    for name in dict.fromkeys(emit):
        d, kind, ta, tb = _ROUTINES[name]
        dtype = dt.to_dtype(d)
        elt = F32 if dtype is dt.float32 else F64
        vl, mr, nr = gemm.params_for(dtype)
        made = gemm_small._small_fn(mb, dtype) if kind == "small" else \
            (gemm._run_fn if kind == "run" else gemm._block_fn)(mb, elt, vl, mr, nr, ta, tb)
        if made != name:
            raise AssertionError(f"gemm library routine {made} is not named {name}")
    return mb


def _prefetch(name: str) -> None:
    """Queue routine ``name`` (with what it calls) for the background
    builder, for the target in effect, unless this process has it or it is
    queued.  With a core to spare (``compile_jobs() > 1``) the builder
    starts now: its LLVM work (which releases the GIL) runs while this
    thread goes on lowering the module.  Else it starts at ``flush()``,
    once the module is lowered: one build of all the module's routines
    (each build emits the functions its routines call again), while this
    thread compiles the module."""
    from tracec.backends.cpu import codegen
    t = codegen.target()
    with _cond:
        if (t, name) in _objects or (t, name) in _inflight or (t, name) in _queue:
            return
        _queue.append((t, name))
        if _worker[0]:
            _cond.notify_all()
            return
        if codegen.compile_jobs() <= 1:
            return
        _worker[0] = True
    threading.Thread(target=_background, name="tracec-gemm-library", daemon=True).start()


def flush() -> None:
    """Start the background builder on what ``declare`` queued (a module's
    lowering is done), unless it runs."""
    with _cond:
        if not _queue or _worker[0]:
            return
        _worker[0] = True
    threading.Thread(target=_background, name="tracec-gemm-library", daemon=True).start()


def _background() -> None:
    """The background builder: emits what is queued as soon as it is
    (so that its tasks are there for idle threads), compiles tasks while
    nothing is queued, ends when its builds are done and nothing is queued."""
    from tracec.backends.cpu import codegen
    # As many modules as cores the compile may use; helper threads for
    # them less this one and the module's thread (busy compiling the
    # module, it takes tasks once it waits for them).
    jobs = codegen.compile_jobs()
    builds: list = []
    while True:
        with _cond:
            batch = None
            if _queue:
                t = _queue[0][0]
                batch = [n for tt, n in _queue if tt == t]
                _queue[:] = [x for x in _queue if x[0] != t]
            elif any(b.left for b in builds):
                _run_a_task_or_wait()
            else:
                _worker[0] = False
        if batch is not None:
            try:
                build = _start([n for n in batch if _lookup(t, n) is None], t, jobs,
                               max(0, jobs - 2))
            except Exception:   # noqa: BLE001 - the thread that needs it builds it again and reports
                build = None
            if build is not None:
                builds.append(build)
        for b in [b for b in builds if not b.left]:
            builds.remove(b)
            try:
                _finish(b)
            except Exception:   # noqa: BLE001 - as above
                pass
        if not _worker[0]:
            return


# ---- linking and object code ----

def _objects_of(objs: dict, names) -> list[bytes]:
    """The distinct objects defining ``names`` (``_collect``'s entries), in
    a fixed order."""
    unique: dict = {}
    for n in sorted(names):
        unique.setdefault(objs[n][0], objs[n][2])
    return sorted(unique, key=lambda o: unique[o])


def object_code(names) -> bytes:
    """The object code of routines ``names`` (symbols; a dtype name: all of
    its routines) and of every library function they call, for
    ``codegen.target()``: several objects packed (``codegen.pack_objects``;
    a function two of them define is ``weak_odr``, the same code)."""
    from tracec.backends.cpu import codegen
    objs = _collect(_expand(names), codegen.target(), codegen.compile_jobs())
    return codegen.pack_objects(_objects_of(objs, objs))


def addresses(names) -> dict[str, int]:
    """``{symbol: address}`` of routines ``names`` in this process: the
    library functions they need that it has not linked yet are linked now,
    as one library (their objects; what those call that they do not
    define, linked before, resolves to its address)."""
    from tracec.backends.cpu import codegen
    names = _expand(names)
    # (keyed by the target too: a module compiled under
    # ``codegen.targeting("x86-64-v3")`` after the host's library was linked
    # must call that target's routines, whose block sizes its code assumes;
    # the host's AVX-512 ones overran its packing buffers)
    t = codegen.target()
    with _link_lock:
        if any((t, n) not in _linked for n in names):
            from tracec.backends.cpu import runtime
            objs = _collect(names, t, codegen.compile_jobs())
            new = sorted(n for n in objs if (t, n) not in _linked)
            blobs = _objects_of(objs, new)
            defined = {d for n in new for d in objs[n][2]}
            imports = {r: _linked[(t, r)] for n in new for r in objs[n][1] if r not in defined}
            tracker = runtime._link(codegen.pack_objects(blobs), new, imports, shared=True)
            _libraries.append(tracker)
            _linked.update({(t, n): int(tracker[n]) for n in new})
        return {n: _linked[(t, n)] for n in names}
