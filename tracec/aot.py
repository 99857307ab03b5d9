"""Ahead-of-time builds (``tracec build``): a traced function, a training
step included, as a shared library with a C ABI and a header.

The library is the cpu backend's object code for the optimized function,
linked with a generated C wrapper that exposes one function taking one
pointer per tensor: inputs (``const``), state updated in place
(parameters, buffers, optimizer state, the RNG state), and outputs.  No
Python is needed at run time.

Invariants: the step is traced in its steady state (it is called until a
call reuses its trace, so optimizer state exists and ``.grad`` is as it
will be on every later call); every buffer's shape, dtype and role is
written in the header; state is written back only when the step succeeds.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from tracec import dtypes as dt
from tracec.tensor import Tensor
from tracec.pytree import path_name

_CTYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
          "bool": "bool", "float16": "uint16_t", "bfloat16": "float"}


class BuildError(RuntimeError):
    pass


def _ident(name: str) -> str:
    s = re.sub(r"\W+", "_", name).strip("_") or "arg"
    return ("_" + s) if s[0].isdigit() else s


def state_names(fn) -> dict:
    """Names for tensors the function reaches through globals and closures:
    module parameters and buffers, optimizer state, generators."""
    from tracec import nn, optim
    from tracec.creation import Generator, default_generator
    names = {id(default_generator.state): "rng_state"}
    scopes = dict(getattr(fn, "__globals__", {}))
    for cell, var in zip(getattr(fn, "__closure__", None) or (),
                         getattr(getattr(fn, "__code__", None), "co_freevars", ())):
        try:
            scopes[var] = cell.cell_contents
        except ValueError:
            pass
    params = {}
    for var, obj in scopes.items():
        if isinstance(obj, nn.Module):
            for n, p in obj.named_parameters():
                names.setdefault(id(p), f"{var}.{n}")
                params[id(p)] = f"{var}.{n}"
            for n, b in obj.named_buffers():
                names.setdefault(id(b), f"{var}.{n}")
        elif isinstance(obj, Tensor):
            names.setdefault(id(obj), var)
        elif isinstance(obj, Generator):
            names.setdefault(id(obj.state), f"{var}.state")
    for var, obj in scopes.items():
        if isinstance(obj, optim.Optimizer):
            for gi, holder in enumerate(obj.__dict__.get("_lr_holders", ())):
                names.setdefault(id(holder), f"{var}.lr.group{gi}")  # set it to schedule lr
            for key, holders in obj.__dict__.get("_hyper_holders", {}).items():
                for gi, holder in enumerate(holders):    # a cycled momentum / beta1
                    names.setdefault(id(holder), f"{var}.{key}.group{gi}")
            for gi, g in enumerate(obj.param_groups):
                for pi, p in enumerate(g["params"]):
                    pname = params.get(id(p), f"group{gi}.param{pi}")
                    for k, v in obj.state.get(p, {}).items():
                        if isinstance(v, Tensor):
                            names.setdefault(id(v), f"{var}.{k}.{pname}")
    return names


class Buffer:
    """One pointer parameter of the generated C function."""

    def __init__(self, name, shape, dtype, role):
        self.name, self.shape, self.dtype, self.role = name, tuple(shape), dtype, role
        self.in_index = None
        self.out_indices = []

    @property
    def ctype(self):
        return _CTYPE[self.dtype.name]

    def decl(self):
        const = "const " if self.role == "input" else ""
        return f"{const}{self.ctype} *{self.name}"

    def doc(self):
        shape = "[" + ", ".join(map(str, self.shape)) + "]"
        return f"{self.name}: {self.dtype.name}{shape}, {self.role}"


def plan_buffers(entry, fn, arg_names) -> list[Buffer]:
    """Map the trace's inputs and outputs to the C function's parameters."""
    names = state_names(fn)
    trace = entry.trace
    bufs, by_obj = [], {}
    used = {"tc_in", "tc_out", "tc_ws", "tc_rc", "tc_k", "tc_ncpu", "errors"}

    def unique(n):
        n = _ident(n)
        base, k = n, 1
        while n in used:
            k += 1
            n = f"{base}_{k}"
        used.add(n)
        return n

    for i, spec in enumerate(trace.inputs):
        if spec.kind == "arg":
            b = Buffer(unique(path_name(spec.source, arg_names)), spec.shape, spec.dtype,
                       "input")
            by_obj.setdefault(("arg", spec.source), b)
        elif spec.kind == "state":
            name = names.get(id(spec.source), f"state{i}")
            role = ("learning rate, read at each call (set it to follow a schedule)"
                    if ".lr.group" in name else "state (read)")
            b = Buffer(unique(name), spec.shape, spec.dtype, role)
            by_obj[("t", id(spec.source))] = b
        else:
            pname = names.get(id(spec.source), f"param{i}")
            b = Buffer(unique(f"{pname}.grad"), spec.shape, spec.dtype, "gradient (read)")
            by_obj[("g", id(spec.source))] = b
        b.in_index = i
        bufs.append(b)
    out_i = 0
    n_ret = 0
    for spec in trace.outputs:
        if spec.kind == "grad_none":
            continue
        shape, dtype = entry.executable.signature["outputs"][out_i]
        dtype = dt.to_dtype(dtype)
        if spec.kind == "return":
            b = Buffer(unique(f"out{n_ret}" if n_ret else "out"), shape, dtype, "output")
            n_ret += 1
            bufs.append(b)
        elif spec.kind == "write":
            b = by_obj.get(("arg", spec.arg) if spec.arg is not None else ("t", id(spec.target)))
            if b is None:
                b = Buffer(unique(names.get(id(spec.target), f"state_out{out_i}")), shape,
                           dtype, "state (written)")
                by_obj[("t", id(spec.target))] = b
                bufs.append(b)
            else:
                b.role = ("input, written in place" if spec.arg is not None
                          else "state (read and written in place)")
        else:
            key = ("g", id(spec.target))
            b = by_obj.get(key)
            if b is None:
                pname = names.get(id(spec.target), f"param{out_i}")
                b = Buffer(unique(f"{pname}.grad"), shape, dtype, "gradient (written)")
                by_obj[key] = b
                bufs.append(b)
            else:
                b.role = "gradient (accumulated in place)"
        b.out_indices.append(out_i)
        out_i += 1
    return bufs


def _header(fname, bufs, signature, doc) -> str:
    guard = f"TRACEC_{fname.upper()}_H"
    lines = [f"/* Generated by tracec build: {doc}.",
             " *",
             f" * int {fname}(...) runs one call of the compiled function on the",
             " * buffers below (C-contiguous, row-major); it returns 0, or an error",
             f" * code that {fname}_error_message() explains.  Buffers marked 'state'",
             " * are read and written in place (parameters, buffers, optimizer state,",
             " * the RNG state); they change only when the call succeeds (outputs and",
             " * gradients written are undefined after a failed call).  Buffers must",
             " * not overlap.  A fresh optimizer's state (momentum, Adam moments and",
             " * step) starts as zeros.  Calls from several threads at once are safe",
             " * on distinct buffers.",
             " *",
             " * Arguments:"]
    lines += [f" *   {b.doc()}" for b in bufs]
    lines += [" */", f"#ifndef {guard}", f"#define {guard}", "",
              "#include <stdbool.h>", "#include <stdint.h>", "",
              "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    lines.append(f"int {fname}({', '.join(b.decl() for b in bufs)});")
    lines.append(f"const char *{fname}_error_message(int code);")
    lines += ["", "#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _wrapper(fname, header_name, bufs, signature) -> str:
    n_in, n_out = len(signature["inputs"]), len(signature["outputs"])
    entry = signature["entry"]
    errors = signature.get("errors", [])
    lines = ["#define _GNU_SOURCE", f'#include "{header_name}"', "#include <sched.h>",
             "#include <stdlib.h>", "#include <string.h>", "",
             f"extern int32_t {entry}(void **inputs, void **outputs, void *workspace, "
             "int64_t nthreads);", ""]
    slot = signature.get("pool_slot")
    if slot:
        # The worker pool (backends/cpu/pool.py) is linked in; parallel
        # kernels find it through the object's pool pointer, set on the first
        # call; its workers stop when the library is unloaded.
        lines += ["extern int32_t tracec_pool_for(void *, void *, int64_t, int64_t, int64_t);",
                  "extern void tracec_pool_shutdown(void);",
                  f"extern void *{slot};",
                  "__attribute__((destructor)) static void tc_fini(void) "
                  "{ tracec_pool_shutdown(); }", ""]
    lines += [
             "static const char *const errors[] = {"]
    lines += [f"    {_c_string(e[-1] if isinstance(e, (list, tuple)) else e)}," for e in errors]
    lines += ["    0", "};", ""]
    # Threads: TRACEC_NUM_THREADS if set, else the CPUs this process may
    # run on (taskset / cgroups), as in Python (runtime.default_threads).
    lines += ["static long tc_threads(void) {",
              "    static long n;",
              "    if (n > 0) return n;",
              '    const char *env = getenv("TRACEC_NUM_THREADS");',
              "    long k = env ? atol(env) : 0;",
              "    if (k <= 0) {",
              "        cpu_set_t set;",
              "        k = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;",
              "    }",
              "    n = k > 0 ? k : 1;",
              "    return n;", "}", ""]
    lines += [f"const char *{fname}_error_message(int code) {{",
              "    if (code == 0) return \"ok\";",
              f"    if (code == -1) return \"out of memory\";",
              f"    if (code > 0 && code <= {len(errors)}) return errors[code - 1];",
              "    return \"unknown error\";", "}", ""]
    lines.append(f"int {fname}({', '.join(b.decl() for b in bufs)}) {{")
    lines.append(f"    void *tc_in[{max(n_in, 1)}];")
    lines.append(f"    void *tc_out[{max(n_out, 1)}] = {{0}};")
    for b in bufs:
        if b.in_index is not None:
            lines.append(f"    tc_in[{b.in_index}] = (void *){b.name};")
    # Where each output goes: computed in place in its input (a donated
    # state update: the kernels keep the call all-or-nothing, lower.py),
    # straight into the caller's buffer (an output that is not also read),
    # or into a temporary copied out only when the call succeeds.
    donated = {int(k): int(j) for k, j in signature.get("donated", ())}
    target = {k: b for b in bufs for k in b.out_indices}
    sizes, temps = {}, []
    for k, (shape, d) in enumerate(signature["outputs"]):
        n = 1
        for s_ in shape:
            n *= s_
        sizes[k] = max(n * dt.to_dtype(d).itemsize, 1)
        b = target.get(k)
        if b is not None and k in donated and b.in_index == donated[k]:
            lines.append(f"    tc_out[{k}] = tc_in[{donated[k]}];")
        elif b is not None and b.in_index is None:
            lines.append(f"    tc_out[{k}] = (void *){b.name};")
        else:
            temps.append(k)
            lines.append(f"    tc_out[{k}] = aligned_alloc(64, {(sizes[k] + 63) // 64 * 64});")
    ws = max((int(signature.get("workspace", 0)) + 63) // 64 * 64, 64)
    # One workspace per thread, kept: allocating megabytes per call costs
    # page faults every call (glibc returns freed large blocks to the OS).
    lines.append("    static __thread void *tc_ws;")
    lines.append(f"    if (!tc_ws) tc_ws = aligned_alloc(64, {ws});")
    lines.append("    int tc_rc = tc_ws ? 0 : -1;")
    for k in temps:
        lines.append(f"    if (!tc_out[{k}]) tc_rc = -1;")
    if slot:
        lines.append(f"    if (!__atomic_load_n(&{slot}, __ATOMIC_ACQUIRE))")
        lines.append(f"        __atomic_store_n(&{slot}, (void *)&tracec_pool_for, __ATOMIC_RELEASE);")
    lines.append(f"    if (tc_rc == 0) tc_rc = {entry}(tc_in, tc_out, tc_ws, tc_threads());")
    lines.append("    if (tc_rc == 0) {")
    for k in temps:
        b = target.get(k)
        if b is not None:
            lines.append(f"        memcpy((void *){b.name}, tc_out[{k}], {sizes[k]});")
    lines.append("    }")
    for k in temps:
        lines.append(f"    free(tc_out[{k}]);")
    lines.append("    return tc_rc;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


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


def build_library(fn, args, arg_names, out_path: str, *, cc: str | None = None) -> dict:
    """Trace ``fn`` on ``args`` in its steady state, compile it for the host
    CPU and link ``out_path`` (a .so) plus a header beside it."""
    from tracec.compiler import CompiledFunction
    cf = CompiledFunction(fn, backend="cpu", values_only=True)
    entry = steady_entry(cf, args)
    # The executable tracec.compile built: state updates computed in place
    # only where the call stays all-or-nothing (signature["atomic"]).
    exe = entry.ensure_compiled()
    signature = exe.signature
    fname = _ident(fn.__name__)
    bufs = plan_buffers(entry, fn, arg_names)
    out_path = os.path.abspath(out_path)
    out_dir = os.path.dirname(out_path)
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.basename(out_path)
    stem = stem[3:] if stem.startswith("lib") else stem
    header_name = stem.split(".")[0] + ".h"
    header_path = os.path.join(out_dir, ("lib" if os.path.basename(out_path).startswith("lib")
                                         else "") + header_name)
    header_name = os.path.basename(header_path)
    header = _header(fname, bufs, signature, f"{fn.__name__} from "
                     f"{getattr(fn, '__code__', None) and fn.__code__.co_filename}")
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BuildError("no C compiler found (set CC)")
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "kernels.o")
        with open(obj, "wb") as f:
            f.write(exe.object_code)
        with open(os.path.join(tmp, header_name), "w") as f:
            f.write(header)
        src = os.path.join(tmp, "wrapper.c")
        with open(src, "w") as f:
            f.write(_wrapper(fname, header_name, bufs, signature))
        objs = [obj]
        if signature.get("pool_slot"):
            from tracec.backends.cpu import pool
            objs.append(os.path.join(tmp, "pool.o"))
            with open(objs[-1], "wb") as f:
                f.write(pool.object_code())
        # Only the two documented functions are exported: the kernels and the
        # pool stay private, so several tracec libraries load side by side.
        exports = os.path.join(tmp, "exports.map")
        with open(exports, "w") as f:
            f.write(f"{{ global: {fname}; {fname}_error_message; local: *; }};\n")
        tmp_so = os.path.join(tmp, "lib.so")
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp_so, src, *objs, "-lm",
                            "-lpthread", f"-Wl,--version-script={exports}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"linking failed: {r.stderr.strip().splitlines()[-1:]}")
        # Atomic replacement: a failed build never leaves a half-written library.
        for src_path, dst in ((tmp_so, out_path),
                              (os.path.join(tmp, header_name), header_path)):
            fd, part = tempfile.mkstemp(dir=out_dir, prefix=".tracec-")
            os.close(fd)
            shutil.copyfile(src_path, part)
            os.replace(part, dst)
    return {"library": out_path, "header": header_path, "function": fname,
            "buffers": [b.doc() for b in bufs]}
