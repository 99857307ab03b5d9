"""``torch._dynamo`` as scripts touch it: ``config`` flags they set
(``suppress_errors``, ``cache_size_limit``, ...), ``reset()``,
``disable``, ``mark_dynamic``, ``is_compiling``.

tracec's compiler is not Dynamo: the flags are recorded and read back and
change nothing, except ``cache_size_limit``, which is what tracec calls
``max_traces`` (read by compiled functions made afterwards).
"""
from __future__ import annotations

import os
import sys
import types

__all__ = ["allow_in_graph", "assume_constant_result", "config", "disable", "explain", "is_compiling", "mark_dynamic", "mark_static",
           "reset"]


class _Config(types.ModuleType):
    """Settable attributes with Dynamo's defaults for the ones scripts read
    (a module: ``import torch._dynamo.config`` imports it)."""

    def __init__(self):
        super().__init__(f"{__name__}.config")
        self.__dict__.update(suppress_errors=False, cache_size_limit=8,
                             accumulated_cache_size_limit=256, verbose=False,
                             capture_scalar_outputs=False, capture_dynamic_output_shape_ops=False,
                             optimize_ddp=True, automatic_dynamic_shapes=True,
                             assume_static_by_default=True, inline_inbuilt_nn_modules=True,
                             recompile_limit=8)

    def __getattr__(self, name):
        raise AttributeError(f"torch._dynamo.config has no attribute {name!r}")


config = _Config()
# A package: ``import torch._dynamo.config`` (gpt-fast) finds the module
# above; its other submodules live in ``tracec/_dynamo_parts``.
__path__: list = [os.path.join(os.path.dirname(__file__), "_dynamo_parts")]
sys.modules[config.__name__] = config


def reset() -> None:
    """Dynamo forgets its compiled code; tracec's lives in each compiled
    function (``fn.cache_info()``) and on disk (``tracec cache clear``)."""


def disable(fn=None, recursive: bool = True, *, reason=None):
    """``fn`` itself: called inside a compiled function, its ops are traced
    like any other Python (tracec has no graph breaks)."""
    if fn is None:
        return lambda f: f
    return fn


def is_compiling() -> bool:
    """True while tracec records a trace (the code runs to be recorded)."""
    from tracec.tensor import RECORDERS
    return bool(RECORDERS)


def mark_dynamic(t, index, *, min=None, max=None) -> None:  # noqa: A002 - PyTorch's names
    from tracec.sym_shapes import mark_dynamic as mark
    for i in ([index] if isinstance(index, int) else index):
        mark(t, i)


def mark_static(t, index=None) -> None:
    """Accepted: sizes are static unless made dynamic."""


def allow_in_graph(fn):
    """``fn`` itself: tracec records what any Python function computes."""
    return fn


def assume_constant_result(fn):
    """``fn`` itself: while tracing, a Python function's non-tensor result is
    a constant of the trace already (guards decide when to retrace)."""
    return fn


class ExplainOutput:
    """``torch._dynamo.explain``'s result, with its fields and text: one
    graph per trace (tracec's recorded IR as text, where Dynamo gives an
    ``fx.GraphModule``); a call that could not be traced (tensor data
    steering Python) is one break, its reason the TraceError's message
    (which names the user's line)."""

    def __init__(self, graphs, graph_count, graph_break_count, break_reasons, op_count,
                 ops_per_graph=None, out_guards=None, compile_times=None):
        self.graphs, self.graph_count = graphs, graph_count
        self.graph_break_count, self.break_reasons = graph_break_count, break_reasons
        self.op_count, self.ops_per_graph = op_count, ops_per_graph
        self.out_guards, self.compile_times = out_guards, compile_times

    def __str__(self) -> str:
        out = (f"Graph Count: {self.graph_count}\nGraph Break Count: {self.graph_break_count}\n"
               f"Op Count: {self.op_count}\nBreak Reasons:\n")
        for i, r in enumerate(self.break_reasons):
            out += f"  Break Reason {i + 1}:\n    Reason: {r.reason}\n    User Stack:\n"
            for frame in r.user_stack:
                out += f"      {frame}\n"
        if self.ops_per_graph is not None:
            out += "Ops per Graph:\n"
            for i, ops in enumerate(self.ops_per_graph):
                out += f"  Ops {i + 1}:\n" + "".join(f"    {op}\n" for op in ops)
        if self.out_guards is not None:
            out += "Out Guards:\n" + "".join(f"  Guard {i + 1}:\n    {g}\n"
                                             for i, g in enumerate(self.out_guards))
        if self.compile_times is not None:
            out += f"Compile Times: {self.compile_times}\n"
        return out


class _BreakReason:
    def __init__(self, reason: str, user_stack: list):
        self.reason, self.user_stack = reason, user_stack


def explain(f, *extra_args, **extra_kwargs):
    """``torch._dynamo.explain(fn)(*args, **kwargs)``: trace ``fn`` on the
    arguments (running it once) and say what was recorded."""
    if extra_args or extra_kwargs:
        raise TypeError("explain(f, *args, **kwargs) was removed in PyTorch; use "
                        "explain(f)(*args, **kwargs)")

    def inner(*args, **kwargs):
        from tracec import TraceError, ir
        from tracec.tracing import record
        try:
            _, trace = record(f, args, kwargs, getattr(f, "__name__", "fn"), fallback=False)
        except TraceError as e:
            return ExplainOutput([], 0, 1, [_BreakReason(str(e), [])], 0, [], [], None)
        module = trace.module
        ops = [op for op in module.walk() if ir.primitive_name(op)]
        names = [f"tracec.{ir.primitive_name(op)} at {ir.format_loc(op)}" for op in ops]
        guards = []
        for snap, _ in trace.guards:       # (as tracec explain words them)
            roots = getattr(snap, "roots", None)
            if roots is not None:
                guards += [f"{label} is unchanged" for label, _ in roots]
            else:
                guards.append(f"{getattr(snap, '__qualname__', type(snap).__name__)} is "
                              f"unchanged")
        return ExplainOutput([ir.print_module(module)], 1, 0, [], len(ops), [names], guards,
                             None)
    return inner


class _EvalFrame(types.ModuleType):
    """``torch._dynamo.eval_frame``: where ``OptimizedModule`` lives
    (Accelerate's ``is_compiled_module`` reads it there)."""

    def __getattr__(self, name):
        if name == "OptimizedModule":
            # imported when asked for: ``import tracec`` loads no compiler module
            from tracec.compiled_module import OptimizedModule
            return OptimizedModule
        raise AttributeError(f"module 'torch._dynamo.eval_frame' has no attribute {name!r}")


eval_frame = _EvalFrame(f"{__name__}.eval_frame")
sys.modules[eval_frame.__name__] = eval_frame


def __getattr__(name):
    # ``from torch._dynamo import OptimizedModule`` (isinstance checks on a
    # compiled module)
    if name == "OptimizedModule":
        return eval_frame.OptimizedModule
    raise AttributeError(f"module 'torch._dynamo' has no attribute {name!r}")
