"""Ahead-of-time builds (``tracec build``): a traced function, a training
step included, as a shared library with a C ABI and a header.

The library is the cpu backend's object code for the optimized function
(for the host CPU, or a portable x86-64 level: ``target``), linked with a
generated C wrapper (``cgen.py``) that exposes the step, taking one pointer
per tensor: inputs (``const``), state updated in place (parameters,
buffers, optimizer state, the RNG state), and outputs, then one
``int64_t`` per named size (``--arg x=f32[B,784]``: the step is traced
symbolic in ``B`` and compiled once as size-generic code, ``sizes.py``);
then, for a step with collectives (a ``DistributedDataParallel`` step),
``MPI_Fint comm``, the communicator (the library then links the MPI
library through ``mpicc``, ``mpi_compiler``); ``init_state``,
which writes the initial state embedded in the library (``state.py``); a
table describing every argument (``plan.py``); a CPU check
(``cpu_check.py``).  No Python is needed at run time.

Invariants: the step is traced in its steady state (it is called until a
call reuses its trace, so optimizer state exists and ``.grad`` is as it
will be on every later call); the initial state is the one from before
those calls; every buffer's shape, dtype and role is written in the header
and the table; state is written back only when the step succeeds; the
library and header are written atomically, with the modes ``cc`` gives
(0755 and 0644 under the umask).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from tracec.aot import cgen, cpu_check
from tracec.aot.sizes import SizesError, plan_sizes
from tracec.aot.plan import Buffer, _ident, describe_state, plan_buffers, state_names
from tracec.aot.state import WeightsError, initial_blob, load_weights, snapshot

__all__ = ["build_library", "BuildError", "Buffer", "plan_buffers", "state_names",
           "describe_state", "steady_entry", "TARGET_NAMES"]

#: Values of ``target`` (``tracec build --target``).
TARGET_NAMES = ("native", "x86-64-v2", "x86-64-v3", "x86-64-v4")

class BuildError(RuntimeError):
    pass


def steady_entry(cf, args, max_calls: int = 4):
    """Call the compiled function until a call reuses its trace; returns
    that entry (the steady-state step)."""
    for _ in range(max_calls):
        hits = cf.hits
        cf(*args)
        if cf.hits > hits:
            return cf._last
    raise BuildError(f"{cf.__name__} retraced on every one of {max_calls} calls; "
                     f"reasons: {'; '.join(cf.reasons)}")


def build_library(fn, args, arg_names, out_path: str, *, cc: str | None = None,
                  target: str = "native", weights: str | None = None,
                  dim_names: dict | None = None) -> dict:
    """Trace ``fn`` on ``args`` in its steady state, compile it for
    ``target`` (one of ``TARGET_NAMES``) and link ``out_path`` (a .so) plus
    a header beside it.  ``weights``: a checkpoint loaded into the modules
    ``fn`` reaches first (the initial state the library carries).
    ``dim_names``: ``{arg name: (size name or None per dimension)}`` for
    arguments with named sizes (marked dynamic on ``args`` by the caller,
    ``tracec.mark_dynamic``): each name is a parameter of the C function."""
    from tracec.backends.cpu import codegen
    from tracec.compiler import CompiledFunction
    if target not in TARGET_NAMES:
        raise BuildError(f"unknown target {target!r}: use {', '.join(TARGET_NAMES)}")
    try:
        with codegen.targeting(target):
            triple, cpu, feats = codegen.target()
    except ValueError as e:
        raise BuildError(str(e)) from None
    if weights is not None:
        try:
            load_weights(fn, weights)
        except WeightsError as e:
            raise BuildError(str(e)) from None
    snap = snapshot(fn)        # before the step runs: the state it starts from
    cf = CompiledFunction(fn, backend="cpu", values_only=True)
    entry = steady_entry(cf, args)
    _refuse_python_effects(fn, entry)
    exe = _executable(cf, entry, target, bool(dim_names))
    signature = exe.signature
    fname = _ident(fn.__name__)
    try:
        sizes = plan_sizes(entry.trace, dim_names, list(arg_names), signature)
    except SizesError as e:
        raise BuildError(str(e)) from None
    bufs = plan_buffers(entry, fn, arg_names, signature)
    variants = []
    if sizes is not None and not signature.get("comms"):
        variants = _size_one_variants(fn, args, list(arg_names), dim_names, sizes, bufs, target)
    clash = {b.name for b in bufs} & set(sizes.names if sizes else ())
    if clash:
        raise BuildError(f"the size name {sorted(clash)[0]} is also a buffer's name")
    if signature.get("comms") and cgen.COMM_PARAM in {b.name for b in bufs} | set(
            sizes.names if sizes else ()):
        raise BuildError(f"the communicator parameter {cgen.COMM_PARAM} is also the name of "
                         "an argument: rename it")
    blob, where = initial_blob(bufs, snap)
    features = cpu_check.checked_features(feats)
    target_doc = f"{target}: {cpu} ({','.join(features) or 'no feature checked'})"
    out_path = os.path.abspath(out_path)
    out_dir = os.path.dirname(out_path)
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.basename(out_path)
    stem = stem[3:] if stem.startswith("lib") else stem
    header_name = stem.split(".")[0] + ".h"
    header_path = os.path.join(out_dir, ("lib" if os.path.basename(out_path).startswith("lib")
                                         else "") + header_name)
    header_name = os.path.basename(header_path)
    comms = signature.get("comms", [])
    if len(comms) > 1:
        raise BuildError(f"{fn.__name__} runs collectives on {len(comms)} communicators; a "
                         "library takes one (MPI_Fint comm)")
    header = cgen.header(fname, bufs, f"{fn.__name__} from "
                         f"{getattr(fn, '__code__', None) and fn.__code__.co_filename}",
                         target_doc, sizes, comm=bool(comms),
                         size_one=[v.ones for v in variants])
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BuildError("no C compiler found (set CC)")
    env = None
    if comms:
        cc, env = mpi_compiler(cc)
    with tempfile.TemporaryDirectory() as tmp:
        # one object, or one per part of a module compiled in parts
        objs = codegen.write_objects(codegen.unpack_objects(exe.object_code), tmp, "kernels")
        with open(os.path.join(tmp, header_name), "w") as f:
            f.write(header)
        blob_path = None
        if blob:
            blob_path = os.path.join(tmp, "init_state.bin")
            with open(blob_path, "wb") as f:
                f.write(blob)
        src = os.path.join(tmp, "wrapper.c")
        with open(src, "w") as f:
            f.write(cgen.wrapper(fname, header_name, bufs, signature, where=where,
                                 blob_path=blob_path, target=target_doc, features=features,
                                 sizes=sizes, variants=variants))
        for k, v in enumerate(variants):     # the size-1 code paths
            objs += codegen.write_objects(codegen.unpack_objects(v.object_code), tmp,
                                          f"variant{k}_")
        if any(s.get("pool_slot") for s in [signature, *(v.signature for v in variants)]):
            from tracec.backends.cpu import pool
            objs.append(os.path.join(tmp, "pool.o"))
            with open(objs[-1], "wb") as f, codegen.targeting(target):
                f.write(pool.object_code())
        libraries = sorted({lib for s in [signature, *(v.signature for v in variants)]
                            for lib in s.get("libraries", ())})
        if libraries:
            # The GEMM routines the kernels call, with the library functions
            # they call, each once (compiled once per machine and target:
            # backends/cpu/gemm_lib.py), linked in privately.
            from tracec.backends.cpu import gemm_lib
            with codegen.targeting(target):
                code = gemm_lib.object_code(libraries)
            objs += codegen.write_objects(codegen.unpack_objects(code), tmp, "gemm_")
        # Only the documented names are exported: the kernels, the pool and
        # the GEMM routines stay private, so several tracec libraries load
        # side by side.
        exports = os.path.join(tmp, "exports.map")
        with open(exports, "w") as f:
            f.write(f"{{ global: {'; '.join(cgen.exported(fname))}; local: *; }};\n")
        tmp_so = os.path.join(tmp, "lib.so")
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp_so, src, *objs, "-lm",
                            "-lpthread", f"-Wl,--version-script={exports}"],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise BuildError(f"linking failed: {r.stderr.strip().splitlines()[-1:]}")
        umask = _umask()
        _install(tmp_so, out_path, 0o777 & ~umask)
        _install(os.path.join(tmp, header_name), header_path, 0o666 & ~umask)
    return {"library": out_path, "header": header_path, "function": fname,
            "size_one": [sorted(v.ones) for v in variants],
            "buffers": [b.doc() for b in bufs], "target": target_doc,
            "sizes": list(sizes.names) if sizes else [],
            "size_checks": [why for _, why in sizes.checks] if sizes else [],
            "init_state_bytes": len(blob)}


def mpi_compiler(cc: str) -> tuple[str, dict]:
    """``(mpicc, environment)``: the MPI compiler wrapper of the MPI library
    the collectives were compiled against (the one beside this Python,
    from the ``mpich`` wheel, else the first on PATH), running ``cc``; it
    adds MPI's include directory and links ``libmpi`` (with its rpath)."""
    import sys
    mpicc = shutil.which("mpicc", path=os.path.dirname(sys.executable)) or shutil.which("mpicc")
    if mpicc is None:
        raise BuildError("the step runs collectives, so its library links the MPI library: "
                         "no mpicc found (pip install 'tracec[distributed]')")
    # MPICH's and Open MPI's wrappers take the underlying compiler from these.
    return mpicc, dict(os.environ, MPICH_CC=cc, OMPI_CC=cc)


def _install(src: str, dst: str, mode: int) -> None:
    """Copy ``src`` to ``dst`` atomically (a failed build never leaves a
    half-written file) with ``mode``."""
    fd, part = tempfile.mkstemp(dir=os.path.dirname(dst), prefix=".tracec-")
    os.close(fd)
    try:
        shutil.copyfile(src, part)
        os.chmod(part, mode)
        os.replace(part, dst)
    except BaseException:
        if os.path.exists(part):
            os.remove(part)
        raise


def _umask() -> int:
    """The process's umask (read without changing it where Linux allows)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


class _Object:
    """Object code and signature, not loaded into this process."""

    def __init__(self, object_code: bytes, signature: dict):
        self.object_code, self.signature = object_code, signature

    def failed_guard(self, env: dict) -> str | None:
        """As ``SizedCpuExecutable.failed_guard``: None if the code serves
        the sizes ``env``."""
        from tracec.symbolic import guard_holds
        for g in self.signature.get("size_guards", ()):
            if not guard_holds(g, env):
                return f"compiled for sizes with {g}"
        return None


class _TargetBackend:
    """The cpu backend generating code for another CPU (``--target``): its
    objects go through the disk cache, keyed by that target, and are never
    run here."""

    def __init__(self, target: str):
        self.target = target

    def target_id(self) -> str:
        from tracec.backends.cpu import codegen
        with codegen.targeting(self.target):
            return codegen.target_id()

    def compile_module(self, module, donate=None, size_guards=None, **_options):
        from tracec.backends import cpu
        from tracec.backends.cpu import codegen
        with codegen.targeting(self.target):
            return _Object(*cpu.compile_object(module, donate=donate, size_guards=size_guards))

    def load_object(self, object_code: bytes, signature: dict):
        if signature.get("target") != self.target_id():
            raise ValueError(f"object code was compiled for another target: "
                             f"{signature.get('target')!r}")
        return _Object(object_code, signature)


def _refuse_python_effects(fn, entry) -> None:
    """Raise ``BuildError`` for what the compiled step does in Python that
    a C library cannot do."""
    # (A constant a call sets, as train()/eval() set ``training``, changes
    # nothing a C caller sees: the trace ran in the mode it set.)
    attrs = [s.name for s in entry.trace.outputs
             if s.kind.startswith("attr") and s.kind != "attr_const"]
    if attrs:
        raise BuildError(f"{fn.__name__} sets the module attribute {attrs[0]} (a Python side "
                         "effect a C library cannot make): return the value instead")
    # (a steady trace whose every call reshapes an input in place: the same
    # tensors at each call rarely allow one, a later call retraces for the
    # new shape)
    shaped = next((o for o in entry.trace.outputs if o.kind == "write" and o.layout is not None),
                  None)
    if shaped is not None:
        raise BuildError(f"{fn.__name__} changes the shape of {shaped.name or 'an input'} in "
                         "place (unsqueeze_, t_, resize_, as_strided_): a C caller's buffer "
                         "keeps its shape; use the out-of-place op (x = x.unsqueeze(0))")
    guard = next((o for o in entry.trace.outputs if o.kind == "data_guard"), None)
    if guard is not None:
        loc = guard.target[1]
        raise BuildError(f"{fn.__name__} decides in Python on tensor data (bool() or an "
                         f"integer's item() at "
                         f"{loc[0]}:{loc[1]}); tracec.compile speculates on such a decision and "
                         "runs the call eagerly when it comes out otherwise, which a C library "
                         "cannot: keep the decision in tensor ops (tracec.where)")
    if entry.trace.py_draws:
        raise BuildError(f"{fn.__name__} draws from Python's random module (random.random()); "
                         "tracec.compile draws again at each call and checks the decisions "
                         "taken on the numbers, which a C library cannot: draw with "
                         "tracec.rand instead")
    if entry.trace.lifted:
        names = ", ".join(loc.label for loc in entry.trace.lifted)
        raise BuildError(f"{fn.__name__} changes Python numbers at every call ({names}: a "
                         "scheduler or a step counter), a Python side effect a C library cannot "
                         "make: step schedules outside the function (the library reads each "
                         "learning rate as an argument the caller sets)")


def _size_one_variants(fn, args, arg_names, dim_names, sizes, bufs, target) -> list:
    """``cgen.Variant``s serving named sizes of 1, most specific first.

    A symbolic size stands for 2 or more (sizes 0 and 1 are specialized,
    as in Dynamo: a size-1 dimension broadcasts).  So for each non-empty
    set of named sizes (at most three names: 7 sets) the step is traced
    again with those sizes 1 (the example arguments narrowed to their first
    element along them) and the others still named, compiled, and linked
    in as a code path the library takes when the call's sizes are 1 there.
    A set whose trace fails (the function raises there, as BatchNorm in
    training on one sample) or whose buffers differ from the main path's
    gets no path: such calls keep failing the main path's size check,
    whose message then says why (``sizes.checks`` is updated here)."""
    import itertools
    from tracec.aot.cgen import Variant
    names = list(sizes.names)
    if len(names) > 3:
        return []
    out, why_not = [], {}
    for k in range(len(names), 0, -1):
        for ones in itertools.combinations(names, k):
            try:
                exe, entry, sizes_v = _variant_exe(fn, args, arg_names, dim_names, set(ones),
                                                   target)
                bufs_v = _matching_buffers(plan_buffers(entry, fn, arg_names, exe.signature),
                                           bufs)
            except Exception as e:     # the user's function at these sizes: no path
                if k == 1:
                    why_not[ones[0]] = (str(e).strip().splitlines() or [type(e).__name__])[0]
                continue
            v = Variant(exe.signature, bufs_v, sizes_v,
                        " && ".join(f"{n} == 1" for n in ones))
            v.ones, v.object_code = ones, exe.object_code
            out.append(v)
    served = {v.ones[0] for v in out if len(v.ones) == 1}
    for i, (cond, why) in enumerate(sizes.checks):
        for n in names:
            if why == f"the size {n} must be at least 2":
                why = (f"the size {n} must be at least 1" if n in served else
                       f"the size {n} must be at least 2 (at {n} = 1: {why_not[n]})"
                       if n in why_not else why)
                sizes.checks[i] = (cond, why)
    return out


def _variant_exe(fn, args, arg_names, dim_names, ones: set, target: str):
    """``(executable, entry, SizePlan or None)`` of ``fn`` traced in its
    steady state on ``args`` narrowed to 1 along the sizes named in
    ``ones`` (the other named sizes stay symbolic)."""
    import tracec
    from tracec.compiler import CompiledFunction
    from tracec.tensor import Tensor
    vargs, vdims = [], {}
    for i, a in enumerate(args):
        dims = dim_names.get(arg_names[i]) if i < len(arg_names) else None
        if not dims or not isinstance(a, Tensor):
            vargs.append(a)
            continue
        t = a.detach()
        for d, n in enumerate(dims):
            if n in ones:
                t = t.narrow(d, 0, 1)
        t = t.clone()
        rest = tuple(n if n is not None and n not in ones else None for n in dims)
        for d, n in enumerate(rest):
            if n is not None:
                tracec.mark_dynamic(t, d, n)
        if any(n is not None for n in rest):
            vdims[arg_names[i]] = rest
        vargs.append(t)
    cf = CompiledFunction(fn, backend="cpu", values_only=True)
    entry = steady_entry(cf, vargs)
    _refuse_python_effects(fn, entry)
    exe = _executable(cf, entry, target, bool(vdims))
    sizes_v = plan_sizes(entry.trace, vdims, arg_names, exe.signature) if vdims else None
    return exe, entry, sizes_v


def _matching_buffers(vbufs, bufs):
    """``vbufs`` (a variant's buffers) in the order of the main path's
    ``bufs``; raises ``BuildError`` unless each is the same argument or
    state, read and written as on the main path (state of the same shape)."""
    by_name = {b.name: b for b in vbufs}
    if set(by_name) != {b.name for b in bufs}:
        raise BuildError("its arguments and state differ from the other sizes' "
                         f"({sorted(set(by_name) ^ {b.name for b in bufs})})")
    for b in bufs:
        v = by_name[b.name]
        if (v.in_index is None) != (b.in_index is None) or \
                bool(v.out_indices) != bool(b.out_indices) or v.dtype != b.dtype or \
                v.kind != b.kind or (b.is_state and tuple(v.shape) != tuple(b.shape)):
            raise BuildError(f"{b.name} is used differently there")
    return [by_name[b.name] for b in bufs]


def _executable(cf, entry, target: str, named: bool):
    """The executable the library links for ``entry``: size-generic with
    named sizes, else the one ``tracec.compile`` built (``native``: state
    updates computed in place only where the call stays all-or-nothing,
    ``signature["atomic"]``), else that code generated for ``target``."""
    if named and entry.trace.symbolic is not None:
        return _generic_for(cf, entry, target)
    if target == "native":
        return entry.ensure_compiled()
    return _compile_for(cf, entry, target)


def _generic_for(cf, entry, target: str):
    """The size-generic executable of symbolic ``entry`` (made by the
    calls that traced it) for ``target``: the one loaded here for
    ``native``, else the same code generated for the other CPU."""
    if not entry.generic:
        raise BuildError("named sizes need size-generic code, which this step cannot have: "
                         f"{entry.generic_failed or 'unknown reason'}")
    sub = entry.generic[0]
    if target == "native":
        return sub.ensure_compiled()
    import dataclasses

    from tracec import size_generic
    from tracec.compiler import donations
    env = dict(entry.trace.symbolic.hints)
    donate = donations(dataclasses.replace(entry.trace, symbolic=None))
    exe, _ = size_generic.compile_generic(cf, _TargetBackend(target), sub, env, donate)
    return exe


def _compile_for(cf, entry, target: str):
    from tracec.compiler import donations
    exe, _ = cf._cached(_TargetBackend(target), entry.stages["trace"], entry.optimized,
                        donations(entry.trace))
    return exe
