"""``tracec explain``: what the compiler made of a function, in words.

``explain(fn, args)`` calls ``fn`` compiled until a call reuses its trace
(the steady state, as ``tracec build`` does) and reports:

  * the traces made and why each one was made (``cache_info().reasons``);
  * the steady trace's inputs and outputs by their user names;
  * its guards: what a later call must match to reuse it, and why each
    exists (argument key, state read as input, ``.grad`` presence, Python
    state snapshots, module and optimizer attributes, grad mode);
  * the kernels of the optimized IR and the ops fused into each;
  * the ops that stayed outside kernels, and why (fusion pulls in only
    elementwise ops and one trailing reduction: ``tracec.passes.fusion``);
  * the expected memory traffic: the bytes each kernel or op reads and
    writes, once each, and their sum per call.

It returns the same as data (a dict) and prints the text with ``echo``.
Invariant: ``kernels`` counts the ``tracec.kernel`` ops of the optimized
module, as ``tracec.passes.fusion.count_kernels`` does.
"""
from __future__ import annotations

import math

from xdsl.dialects import func

from tracec import ir
from tracec.compiler import CompiledFunction, OptimizedModule
from tracec.guards import EnvGuard
from tracec.ir.summary import op_label, op_lines
from tracec.kernel_profiler import steady_entry

__all__ = ["explain"]

#: Why an op kind stays outside kernels (DESIGN.md "Passes"; fusion.py).
_WHY = {
    "matmul": "a GEMM: its own tiled, packed kernel (never fused)",
    "reshape": "a view: no kernel, it reinterprets its operand's buffer",
    "transpose": "a movement op: fusion pulls in only elementwise ops",
    "broadcast_to": "a broadcast of a computed value: fusion copies only broadcasts of "
                    "kernel inputs into a kernel",
    "slice": "a movement op: fusion pulls in only elementwise ops",
    "pad": "a movement op: fusion pulls in only elementwise ops",
    "concatenate": "a movement op: fusion pulls in only elementwise ops",
    "take": "an indexing op: its own kernel (reads at data-dependent indices)",
    "gather": "an indexing op: its own kernel (reads at data-dependent indices)",
    "scatter_add": "an indexing op: its own kernel (writes at data-dependent indices)",
    "index_add": "an indexing op: its own kernel (writes at data-dependent indices)",
    "argmax": "an arg-reduction: its own kernel", "argmin": "an arg-reduction: its own kernel",
    "argsort": "a sort: its own kernel",
    "random_uniform": "a random draw: its own kernel", "iota": "a generator: its own kernel",
    "full": "a generator: its own kernel",
    "rnn_scan": "a recurrent layer's time loop: one kernel over every step",
    "rnn_scan_grad": "a recurrent layer's backward time loop: one kernel over every step",
}


def _nbytes(t) -> int:
    from tracec import dtypes as dt
    d = ir.dtype_of(t)
    return math.prod(ir.shape_of(t)) * (1 if d is dt.bool_ else d.np.itemsize)


def _fmt_bytes(n: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.2f} {unit}"
    return f"{int(n)} B"


def _why_outside(op) -> str:
    name = ir.primitive_name(op) or op.name
    if name == "transpose" and op.results[0].uses and all(
            ir.primitive_name(u.operation) == "matmul" for u in op.results[0].uses):
        return "read transposed by the matmuls that use it: not materialized (cpu backend)"
    if name in ("reduce_sum", "reduce_max", "reduce_min"):
        return "a reduction whose producer is no elementwise op it could end a kernel with"
    return _WHY.get(name, "not an elementwise op or reduction: fusion leaves it alone")


def _traffic(op) -> tuple[int, int]:
    """``(bytes read, bytes written)`` by one top-level op, each buffer once."""
    name = ir.primitive_name(op)
    if name == "reshape" or (name == "transpose" and "not materialized" in _why_outside(op)):
        return 0, 0
    seen, read = set(), 0
    for v in op.operands:
        if v not in seen:
            seen.add(v)
            read += _nbytes(v.type)
    return read, sum(_nbytes(t) for t in op.result_types)


def _guards(entry) -> list[tuple[str, str]]:
    """``(guard, why)`` for each guard of a trace."""
    tr = entry.trace
    out = []
    for s in tr.inputs:
        shape = f"{s.dtype.name}{list(s.shape)}"
        if s.kind == "arg":
            out.append((f"argument {s.name} is {shape}",
                        "shapes, dtypes and requires_grad of arguments key the trace"))
        elif s.kind == "state":
            rg = " requiring grad" if s.source.requires_grad else ""
            out.append((f"state {s.name} is {shape}{rg}",
                        "read as an input at each call; its shape, dtype and requires_grad "
                        "were compiled in"))
    for leaf, had, path in tr.grad_guards:
        name = entry._name(leaf, path)
        out.append((f"{name}.grad is {'a tensor' if had else 'None'} at entry",
                    "a .grad that exists is accumulated into; a None one is created"))
    for path, _ in tr.arg_identity:
        out.append((f"argument {path} is the very tensor seen while tracing",
                    "it is also read as module or optimizer state"))
    for snap, _ in tr.guards:
        if isinstance(snap, EnvGuard):
            for label, _ in snap.roots:
                out.append((f"{label} is unchanged",
                            "Python values it holds were baked into the trace"))
            continue
        owner = getattr(snap, "__self__", None)
        what = (f"{type(owner).__name__}.{snap.__name__}()" if owner is not None
                else getattr(snap, "__qualname__", type(snap).__name__))
        doc = (getattr(snap, "__doc__", None) or "").strip().split("\n")[0]
        out.append((f"{what} is unchanged", doc or "Python state the trace read"))
    out.append((f"grad mode is {'enabled' if tr.grad_mode else 'disabled'}",
                "the trace records backward only with grad enabled"))
    return out


def explain(fn, args, kwargs=None, *, backend: str = "interp", echo=print) -> dict:
    """See the module docstring; ``echo`` prints one line (None: silent)."""
    kwargs = kwargs or {}
    if isinstance(fn, OptimizedModule):   # torch.compile(model): its compiled function
        fn = fn.__dict__["_compiled"]
    cf = fn if isinstance(fn, CompiledFunction) else \
        CompiledFunction(fn, backend=backend, values_only=True)
    entry = steady_entry(cf, args, kwargs)
    info = cf.cache_info()
    module = entry.optimized()
    body = next(op for op in module.ops if isinstance(op, func.FuncOp)).body.block
    kernels, outside = [], []
    for op in body.ops:
        if isinstance(op, (ir.ConstantOp, func.ReturnOp)):
            continue
        read, written = _traffic(op)
        if isinstance(op, ir.KernelOp):
            ops = [f"{ir.primitive_name(o)} {ir.format_type(o.result_types[0])} at "
                   f"{ir.format_loc(o)}" for o in op.body.block.ops
                   if not isinstance(o, (ir.ConstantOp, ir.YieldOp))]
            kernels.append({"label": op_label(op), "ops": ops, "lines": op_lines(op),
                            "results": [ir.format_type(t) for t in op.result_types],
                            "read": read, "written": written})
        else:
            outside.append({"op": ir.primitive_name(op) or op.name,
                            "result": ", ".join(ir.format_type(t) for t in op.result_types),
                            "where": ir.format_loc(op), "why": _why_outside(op),
                            "read": read, "written": written})
    data = {
        "function": cf.__name__, "traces": info.traces, "reasons": list(info.reasons),
        "inputs": [(s.name, s.kind, f"{s.dtype.name}{list(s.shape)}")
                   for s in entry.trace.inputs],
        "outputs": [(s.name, s.kind) for s in entry.trace.outputs],
        "guards": _guards(entry), "kernels": kernels, "not_fused": outside,
        "read": sum(k["read"] for k in kernels + outside),
        "written": sum(k["written"] for k in kernels + outside),
    }
    if echo is not None:
        _print(data, echo)
    return data


def _print(d: dict, echo) -> None:
    echo(f"== traces: {d['traces']} of {d['function']} ==")
    for i, r in enumerate(d["reasons"], 1):
        steady = " (the steady state, explained below)" if i == len(d["reasons"]) else ""
        echo(f"  trace {i}{steady}: {r}")
    echo(f"== inputs ({len(d['inputs'])}) and outputs ({len(d['outputs'])}) ==")
    for name, kind, t in d["inputs"]:
        echo(f"  in   {name:<48} {t:<18} {kind}")
    for name, kind in d["outputs"]:
        echo(f"  out  {name:<48} {kind}")
    echo(f"== guards ({len(d['guards'])}): a call reuses the trace only while ==")
    for g, why in d["guards"]:
        echo(f"  - {g}\n      why: {why}")
    echo(f"== kernels: {len(d['kernels'])} fused kernels ==")
    for i, k in enumerate(d["kernels"], 1):
        echo(f"  kernel {i}: {k['label']} -> {', '.join(k['results'])}; reads "
             f"{_fmt_bytes(k['read'])}, writes {_fmt_bytes(k['written'])}")
        for o in k["ops"]:
            echo(f"      {o}")
    echo(f"== not fused: {len(d['not_fused'])} ops outside kernels ==")
    for o in d["not_fused"]:
        echo(f"  {o['op']} -> {o['result']} at {o['where']}\n      why: {o['why']}")
    echo("== expected memory traffic per call ==")
    echo(f"  {_fmt_bytes(d['read'])} read, {_fmt_bytes(d['written'])} written "
         f"({_fmt_bytes(d['read'] + d['written'])} in all), each kernel's and op's buffers "
         "counted once")
