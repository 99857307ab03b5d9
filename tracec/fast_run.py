"""One entry's call, specialized: the guards, marshalling, native call and
write-backs of ``Entry.failed_guard`` + ``Entry.run`` for one static cpu
entry, unrolled into Python code made for it (``exec``, as
``tracec.fast_call`` makes the key matcher), with its tensors, arrays'
shapes and dtypes, output allocators and the native entry bound as
constants: no per-call lists, dicts or loops over specs.

``runner(entry, n)`` returns ``run(args) -> result | MISS`` for calls with
``n`` positional tensor arguments that ``fast_call.matcher`` accepted, or
None where the entry is not of the kind it handles (a symbolic trace, a
compiled backward, ``check=True``, an executable other than the cpu one,
inputs or outputs found through containers or keywords).

Invariant: ``run(args)`` returns MISS, having changed nothing but lifted
hyperparameter holders (``refresh``, idempotent), unless every guard of
the entry holds (``Entry.failed_guard(args) is None``) while the mutation
epoch stands where the entry's guards last held; then it has exactly the
effect of ``Entry.run(args, {})``: the same arrays into the same native
entry, the same write-backs, version bumps and new ``.grad`` tensors, and
the same result.  A MISS sends the call down the general path, which
re-checks and reports.  Anything this code would do differently from the
general path (an input array not C-contiguous, a donated array shared or
read-only) is a MISS too.
"""
from __future__ import annotations

import sys

import numpy as np

from tracec import code_cache, graph
from tracec.backends.cpu.output_pool import fresh
from tracec.mutation import EPOCH, guard_watched
from tracec import dtypes as dt
from tracec.tensor import INFERENCE, Tensor, _new_tensor

__all__ = ["runner", "MISS"]

#: What ``run`` returns when the general path must serve the call.
MISS = object()
#: Misses in a row with the epoch unchanged (a non-contiguous argument,
#: donated memory shared) after which an entry stops trying its fast runner.
MAX_MISSES = 8


def _specs(entry, args):
    """``(inputs, outputs, sized)`` of ``entry``'s cpu executable for calls
    like ``args``: its input and output ``(shape, dtype)`` and, for a
    size-generic executable (``backends/cpu/sized.py``), ``(symbol values,
    workspace bytes)`` for ``args``' sizes (the fast path's key fixes
    them); None where the executable is not a cpu one."""
    # Not imported here: an executable of another backend leaves the cpu
    # runtime (and llvmlite) unloaded; a cpu executable has loaded it.
    runtime = sys.modules.get("tracec.backends.cpu.runtime")
    if runtime is None:
        return None
    exe = entry.executable
    if type(exe) is runtime.CpuExecutable:
        return exe._ins, exe._outs, None
    sized = sys.modules.get("tracec.backends.cpu.sized")
    if sized is None or type(exe) is not sized.SizedCpuExecutable:
        return None
    values = []
    for _, i, d in exe.symbols:
        spec = entry.trace.inputs[i]
        if spec.kind == "arg" and type(spec.source) is int and spec.source < len(args):
            values.append(args[spec.source]._data.shape[d])
        elif spec.kind == "state":
            values.append(spec.source._data.shape[d])
        else:
            return None
    try:
        return exe.spec_for(tuple(values))
    except ValueError:         # SizeGuardError: the general path reports it
        return None


def _supported(entry, n: int, ins, outs) -> bool:
    trace, exe = entry.trace, entry.executable
    if (trace.symbolic is not None or entry.check_backend is not None or trace.attr_state
            or entry.backward_plan is not None or entry.committers or entry._speculated()
            or trace.py_draws
            or exe._fn_py is None or len(ins) != len(trace.inputs)
            or len(outs) != sum(s.kind not in ("grad_none", "attr_seq") for s in trace.outputs)):
        return False
    for spec, (shape, _) in zip(trace.inputs, ins):
        if spec.kind == "arg" and not (type(spec.source) is int and spec.source < n):
            return False
        if spec.kind == "state" and tuple(spec.shape) != shape:
            return False
        if spec.kind == "grad" and spec.arg is not None:
            return False
    for spec in trace.outputs:
        if spec.arg is not None and not (type(spec.arg) is int and spec.arg < n):
            return False
        if spec.kind.startswith("attr"):   # module attributes set: the general path
            return False
        if spec.kind == "grad" and spec.target.dtype.category == 3:
            return False       # a complex leaf's .grad: the general path
        if spec.layout is not None:
            return False       # an input reshaped in place: the general path

    return (all(type(p) is int and p < n for p, _ in trace.arg_identity)
            and all(p is None or (type(p) is int and p < n) for _, _, p in trace.grad_guards))


def runner(entry, args):
    """``run(args)`` for ``entry`` and calls with ``args``' key (see the
    module docstring), or None."""
    n = len(args)
    specs = _specs(entry, args)
    if specs is None:
        return None
    ins, outs_spec, sized = specs
    if not _supported(entry, n, ins, outs_spec):
        return None
    from tracec.backends.cpu import checked_call
    from tracec.backends.cpu.runtime import _TUPLE_ITEMS
    trace, exe = entry.trace, entry.executable
    donated = dict(exe._donated)
    native = checked_call.available() and all(
        len(shape) <= checked_call.MAX_DIMS for shape, _ in list(ins) + list(outs_spec))
    env = {"EPOCH": EPOCH, "entry": entry, "MISS": MISS, "_state": graph._state,
           "ndarray": np.ndarray, "getrefcount": sys.getrefcount, "fresh": fresh,
           "copyto": np.copyto, "make": Tensor._make, "exe": exe, "FN": exe._fn_py,
           "WS": exe._ws_pool if sized is None else [], "OUTSPEC": outs_spec, "ITEMS": _TUPLE_ITEMS, "miss": _miss,
           "REFRESHED": [None], "Tensor": Tensor, "INFER": INFERENCE,
           "NFIELDS": len(_new_tensor(np.empty(0, np.float32), dt.float32).__dict__)}
    x = [f"x{i}" for i in range(n)]
    lines = ["def run(args):",
             f"    if EPOCH[0] != entry._valid_epoch or _state.grad is not {bool(trace.grad_mode)}:",
             "        return MISS"]
    if n:
        lines.append(f"    {', '.join(x)}{',' if n == 1 else ''} = args")

    def const(name, value):
        env[name] = value
        return name

    # (constants are named by first use, not by id: the same entry's code is
    # the same text in every process, so code_cache finds it compiled)
    tnames: dict = {}

    def tensor(target, path):
        if path is not None:
            return x[path]
        name = tnames.get(id(target))
        if name is None:
            name = tnames[id(target)] = const(f"T{len(tnames)}", target)
        return name
    # --- guards (Entry.failed_guard with the epoch unchanged) ---
    for i, (p, t) in enumerate(trace.arg_identity):
        lines.append(f"    if {x[p]} is not {const(f'I{i}', t)}: return MISS")
    # A state tensor's dtype and requires_grad: fields the native wrapper
    # reads where it can (slots), else tested here.
    slots = []

    def field(t, name, value, test):
        offset = checked_call.slot_offset(type(t), name) if native else None
        if offset is not None:
            slots.append((t, offset, value))
        else:
            lines.append(test)
    for j, spec in enumerate(trace.inputs):
        if spec.kind == "state":
            field(spec.source, "dtype", spec.dtype,
                  f"    if {tensor(spec.source, None)}.dtype is not "
                  f"{const(f'D{j}', spec.dtype)}: return MISS")
    for i, (t, rg) in enumerate(entry.state_guards):
        field(t, "requires_grad", bool(rg),
              f"    if {tensor(t, None)}.requires_grad is not {bool(rg)}: return MISS")
    for i, (leaf, had, path) in enumerate(trace.grad_guards):
        lf = tensor(leaf, path)
        lines.append(f"    if ({lf}._grad is not None) is not {bool(had)}: return MISS")
        if had:
            lines.append(f"    if tuple({lf}._grad.shape) != tuple({lf}.shape): return MISS")
    for i, (snap, value) in enumerate(entry._unwatched_guards()):
        holds = getattr(snap, "holds", None)
        if holds is not None:
            lines.append(f"    if not {const(f'H{i}', holds)}({const(f'V{i}', value)}): "
                         "return MISS")
        else:
            lines.append(f"    if {const(f'S{i}', snap)}() != {const(f'V{i}', value)}: "
                         "return MISS")
    # --- lifted hyperparameters: refreshed unless the epoch proves them current ---
    if entry.refreshers:
        env["REFRESH"] = tuple(entry.refreshers)
        env["watched"] = lambda: all(guard_watched(getattr(r, "__self__", None)) is True
                                     for r in entry.refreshers)
        lines += ["    if REFRESHED[0] != EPOCH[0]:",
                  "        for r in REFRESH: r()",
                  "        REFRESHED[0] = EPOCH[0] if watched() else None"]
    # --- input arrays, checked as CpuExecutable._run checks them ---
    a = [f"a{j}" for j in range(len(trace.inputs))]
    for j, (spec, (shape, npd)) in enumerate(zip(trace.inputs, ins)):
        if spec.kind == "arg":
            src = f"{x[spec.source]}._data"
        elif spec.kind == "state":
            src = f"{tensor(spec.source, None)}._data"
        else:
            src = f"{tensor(spec.source, None)}._grad._data"
        lines.append(f"    {a[j]} = {src}")
        if not native:
            shape_ok = "" if spec.kind == "arg" else f" or {a[j]}.shape != {shape!r}"
            lines.append(f"    if (type({a[j]}) is not ndarray or {a[j]}.dtype is not "
                         f"{const(f'N{j}', npd)}{shape_ok} or not {a[j]}.flags.c_contiguous):"
                         " return miss(entry)")
    tin = f"({', '.join(a)}{',' if len(a) == 1 else ''})"
    lines.append(f"    tin = {tin}")
    # --- outputs: donated (an input updated in place), reused .grad memory, fresh ---
    outs = [f"o{k}" for k in range(len(outs_spec))]
    if donated:
        # As CpuExecutable._donated_outputs: the same array objects as when
        # they were last found not to share memory still do not (LAST holds
        # them, so they stay those objects); else that check runs again.
        env["LAST"] = [None, None]
        js = sorted(set(donated.values()))
        env["unshared"] = _unshared
        env["DJ"] = tuple(js)
        lines += ["    last = LAST[0]",
                  "    if last is None or not (" + " and ".join(
                      f"{a[j]} is last[{j}]" for j in range(len(a))) + "):",
                  "        if not unshared(tin, LAST, DJ):",
                  "            lst = list(tin)",
                  "            if exe._donated_outputs(lst, OUTSPEC)[0] is not lst: "
                  "return miss(entry)",
                  "        LAST[0] = tin"]
        if not native:
            lines.append("    if not (" + " and ".join(f"{a[j]}.flags.writeable" for j in js)
                         + "): return miss(entry)")
    from tracec.compiled_entry import _fresh_grad_outputs, _rebuild
    reuse = dict(_fresh_grad_outputs(trace, exe))
    for k, (shape, npd) in enumerate(outs_spec):
        if k in donated:
            lines.append(f"    {outs[k]} = {a[donated[k]]}")
            continue
        alloc = const(f"A{k}", exe._alloc[k])
        n_k = const(f"M{k}", npd)
        if k in reuse:
            # The .grad this call replaces, if nothing but the leaf holds it
            # (tensor and array): its memory takes the new .grad (as Entry.run).
            # A plain old tensor (no graph, hooks, view or attributes of the
            # user's) is kept as the new one too, its version bumped: no one
            # else can see it, and a tensor object less is made per call.
            leaf = tensor(reuse[k], None)
            lines += [f"    {outs[k]} = None",
                      f"    keep{k} = None",
                      f"    old = {leaf}._grad",
                      "    if old is not None and getrefcount(old) == 3:",
                      "        b = old._data",
                      "        if ((b.base is None or fresh(b)) and getrefcount(b) == 3" + (
                          "):" if native else
                          f" and type(b) is ndarray and b.dtype is {n_k} and b.shape == "
                          f"{shape!r} and b.flags.c_contiguous and b.flags.writeable):"),
                      f"            {outs[k]} = b",
                      "            if (type(old) is Tensor and old._node is None and old._hooks is None"
                      " and old._base is None and old._grad is None and not old.requires_grad"
                      " and not old._retains_grad"
                      " and len(old.__dict__) == NFIELDS and type(old._vbox) is list"
                      " and not INFER[0]):",
                      f"                keep{k} = old",
                      "        b = None",
                      "    old = None",
                      f"    if {outs[k]} is None: {outs[k]} = {alloc}({shape!r}, {n_k})"]
        else:
            lines.append(f"    {outs[k]} = {alloc}({shape!r}, {n_k})")
    lines += [f"    tout = ({', '.join(outs)}{',' if len(outs) == 1 else ''})",
              # A size-generic executable's workspaces carry this key's
              # symbol values (written once, when made): a pool of their own.
              "    ws = WS.pop() if WS else " + ("exe._workspace()" if sized is None else
                                                  "exe.sized_workspace(*SIZES)"),
              "    try:",
              ("        rc = CALL(tin, tout, ws[1])"
               if native else
               "        rc = FN(id(tin) + ITEMS, id(tout) + ITEMS, ws[1], exe.nthreads)"),
              "        if rc: exe._raise(rc, ws)" if not native else
              "        if rc: return miss(entry) if rc == -1 else exe._raise(rc, ws)",
              "    finally:",
              "        WS.append(ws)"]
    # --- write-backs, in the order of the trace's outputs ---
    lines.append("    if entry._fast_misses: entry._fast_misses = 0   # misses in a row only")
    returned, k = [], 0
    for spec in trace.outputs:
        if spec.kind == "grad_none":
            lines.append(f"    {tensor(spec.target, spec.arg)}._grad = None")
            continue
        o = outs[k]
        k += 1
        if spec.kind == "return":
            returned.append(o)     # a fresh array: never an input, never copied
        elif spec.kind == "write":
            t = tensor(spec.target, spec.arg)
            j = donated.get(k - 1)
            src = None if j is None else trace.inputs[j]
            if not (src is not None and src.kind == "state" and spec.arg is None
                    and src.source is spec.target):
                lines.append(f"    if {o} is not {t}._data: copyto({t}._data, {o})")
            # else: the output is the array read from that very tensor above
            lines.append(f"    {t}._vbox[0] += 1")
        elif spec.inplace:
            lf = tensor(spec.target, spec.arg)
            lines += [f"    g = {lf}._grad",
                      f"    if {o} is not g._data: copyto(g._data, {o})",
                      "    g._vbox[0] += 1"]
        elif (k - 1) in reuse:
            lf = tensor(spec.target, spec.arg)
            lines += [f"    if keep{k - 1} is not None: keep{k - 1}._vbox[0] += 1",
                      f"    else: {lf}._grad = make({o}, {lf}.dtype)",
                      f"    keep{k - 1} = None"]
        else:
            lf = tensor(spec.target, spec.arg)
            lines.append(f"    {lf}._grad = make({o}, {lf}.dtype)")
    if native:
        # The arrays' headers are checked by the native wrapper instead
        # (checked_call): type, dtype, shape, C-contiguous, and writeable
        # where the code writes in place (donated inputs, reused .grad memory).
        W, C = checked_call.WRITEABLE, checked_call.C_CONTIGUOUS
        don_in = set(donated.values())
        rows_in = [checked_call.row(shape, npd, C | (W if j in don_in else 0))
                   for j, (shape, npd) in enumerate(ins)]
        rows_out = [checked_call.row(shape, npd, C | W) if k in reuse else None
                    for k, (shape, npd) in enumerate(outs_spec)]
        ctx = checked_call.context(exe._tracker[exe.signature["entry_py"]], rows_in, rows_out,
                                   slots)
        env["CTX_KEEP"] = ctx, slots      # (the objects the words point to, alive)
        env["CALL"] = checked_call.bound(ctx, exe.nthreads)
    tpl = trace.template
    if tpl[0] == "tensor":     # as _rebuild does
        lines.append(f"    r = make({returned[tpl[1]]}, {const('RD', tpl[2])})")
        if tpl[3] is not None:
            env["FreedNode"] = graph.FreedNode
            lines += ["    if _state.grad:",
                      "        r.requires_grad = True",
                      f"        r._node = FreedNode({const('RN', tpl[3])})"]
        lines.append("    return r")
    else:
        env["rebuild"], env["TPL"], env["NOKW"] = _rebuild, tpl, {}
        lines.append(f"    return rebuild(TPL, [{', '.join(returned)}], args, NOKW)")
    env["SIZES"] = sized
    # (code made above from the entry's own specs)
    exec(code_cache.compiled("\n".join(lines), "<tracec fast_run>"), env)  # noqa: S102
    return env["run"]


def _unshared(arrays, last, donated) -> bool:
    """True if no input listed in ``donated`` can share memory with another
    input: its root array (the end of its ``.base`` chain) owns its memory
    and is no other input's root (then ``CpuExecutable._donated_outputs``
    finds it unshared too; otherwise that exact test decides).
    ``last[1]``: ``(arrays, roots)`` of the previous time, whose roots are
    reused for the same array objects (in a training loop only the batch
    changes); updated here."""
    prev, prev_roots = last[1] or (None, None)
    roots = []
    for i, x in enumerate(arrays):
        if prev is not None and prev[i] is x:
            roots.append(prev_roots[i])
            continue
        r = x
        while type(r.base) is np.ndarray:
            r = r.base
        roots.append(r)
    last[1] = (arrays, roots)
    ids = [id(r) for r in roots]
    if len(set(ids)) == len(ids):
        return all(roots[j].base is None for j in donated)
    return all(roots[j].base is None and ids.count(ids[j]) == 1 for j in donated)


def _miss(entry):
    """A miss the epoch did not cause; ``MAX_MISSES`` in a row and the
    entry keeps to the general path."""
    entry._fast_misses += 1
    if entry._fast_misses >= MAX_MISSES:
        entry._fast_run = False
    return MISS
