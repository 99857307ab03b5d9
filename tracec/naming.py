"""User-facing names for a trace's inputs and outputs.

A trace lifts the state a function touches (parameters, ``.grad``,
optimizer state, the RNG state) to function arguments.  This module names
each one the way the user would refer to it, by walking what the function
can reach:

  * its arguments, by parameter name and container path (``x``,
    ``hidden[0]``, ``batch['y']``);
  * the objects it reaches by name (closure cells, the globals its code
    names, those of the functions it calls, ``self`` of a method): a
    module's parameters and buffers (``model.0.weight``), an optimizer's
    state by its parameter's name (``opt.state[model.0.weight].exp_avg``)
    and its lifted hyperparameters (``opt.param_groups[0].lr``), a
    generator's state, plain tensors, and the same one attribute level
    into plain objects (``trainer.model.0.weight``);
  * tracec's default generator is ``rng``; a ``.grad`` is its leaf's name
    plus ``.grad``; results are ``return``, ``return[0]``,
    ``return['loss']``, or the name of the tensor they update.

``name_trace`` stores the names on the ``InputSpec``/``OutputSpec``s and
in the IR (``tracec.ir.names``).  Invariant: every input and output gets
a non-empty name; a tensor no walk reaches is named by its kind and
position (``state#3``), never left unnamed.
"""
from __future__ import annotations

import os
import inspect
import types

from tracec import ir
from tracec.creation import Generator, default_generator
from tracec.nn.modules.module import Module
from tracec.optim.optimizer import Optimizer
from tracec.pytree import path_name
from tracec.tensor import Tensor

__all__ = ["name_trace", "reachable_names", "argument_names"]

#: How deep the walk follows called functions and plain objects' attributes.
_FN_DEPTH = 3
_OBJ_DEPTH = 2


def argument_names(fn) -> list[str] | None:
    """The names of ``fn``'s positional parameters (without ``self`` for
    a bound method), or None when it has no Python signature."""
    target = fn
    if isinstance(fn, Module):
        target = fn.forward
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _scope_roots(fn, out: list, seen: set, depth: int) -> None:
    """``(name, object)`` for what ``fn`` names: closure cells, globals its
    code names (recursively for the functions among them), ``self``."""
    if isinstance(fn, Module):
        out.append(("", fn))      # tracec.compile(model): its parameters unprefixed
        fn = types.MethodType(type(fn).forward, fn)
    if isinstance(fn, types.MethodType):
        out.append(("self", fn.__self__))
        fn = fn.__func__
    fn = inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn
    if not isinstance(fn, types.FunctionType) or id(fn) in seen or depth <= 0:
        return
    seen.add(id(fn))
    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        out.append((name, v))
        if isinstance(v, types.FunctionType):
            _scope_roots(v, out, seen, depth - 1)
    names: list = []
    stack = [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    g = fn.__globals__
    for name in dict.fromkeys(names):
        if name in g and not isinstance(g[name], (types.ModuleType, type)):
            out.append((name, g[name]))
            if isinstance(g[name], types.FunctionType):
                _scope_roots(g[name], out, seen, depth - 1)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def reachable_names(roots) -> dict:
    """``id(tensor) -> name`` for the tensors reachable from ``roots``
    (``(name, object)`` pairs, first name wins); modules first, so that
    optimizer state is named after its parameter."""
    names: dict = {id(default_generator.state): "rng"}
    modules, optimizers, seen = [], [], set()

    def visit(prefix, obj, depth):
        if id(obj) in seen:
            return
        if isinstance(obj, Tensor):
            names.setdefault(id(obj), prefix or "tensor")
            return
        seen.add(id(obj))
        if isinstance(obj, Module):
            modules.append((prefix, obj))
        elif isinstance(obj, Optimizer):
            optimizers.append((prefix, obj))
        elif isinstance(obj, Generator):
            names.setdefault(id(obj.state), _join(prefix, "state"))
        elif depth > 0 and isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj[:64]):
                visit(f"{prefix}[{i}]", v, depth - 1)
        elif depth > 0 and isinstance(obj, dict):
            for k, v in list(obj.items())[:64]:
                visit(f"{prefix}[{k!r}]", v, depth - 1)
        elif depth > 0 and hasattr(obj, "__dict__") and not callable(obj):
            for k, v in list(vars(obj).items())[:64]:
                visit(_join(prefix, k), v, depth - 1)

    for name, obj in roots:
        visit(name, obj, _OBJ_DEPTH)
    for prefix, m in modules:
        for n, p in m.named_parameters():
            names.setdefault(id(p), _join(prefix, n))
        for n, b in m.named_buffers():
            names.setdefault(id(b), _join(prefix, n))
        for n, v in vars(m).items():
            if isinstance(v, Tensor):
                names.setdefault(id(v), _join(prefix, n))
    for prefix, opt in optimizers:
        for gi, g in enumerate(opt.param_groups):
            for pi, p in enumerate(g["params"]):
                pname = names.get(id(p), f"param_groups[{gi}].params[{pi}]")
                for k, v in opt.state.get(p, {}).items():
                    if isinstance(v, Tensor):
                        names.setdefault(id(v), f"{_join(prefix, 'state')}[{pname}].{k}")
        for gi, h in enumerate(opt.__dict__.get("_lr_holders", ())):
            names.setdefault(id(h), f"{_join(prefix, 'param_groups')}[{gi}].lr")
        for key, holders in opt.__dict__.get("_hyper_holders", {}).items():
            for gi, h in enumerate(holders):
                names.setdefault(id(h), f"{_join(prefix, 'param_groups')}[{gi}].{key}")
    return names


def _return_paths(tpl, prefix: str, out: dict) -> None:
    """Index among returned tensors -> its path in the returned structure."""
    kind = tpl[0]
    if kind in ("tensor", "number"):
        out[tpl[1]] = prefix
    elif kind == "namedtuple":
        for f, t in zip(tpl[1]._fields, tpl[2]):
            _return_paths(t, f"{prefix}.{f}", out)
    elif kind == "dict":
        for k, t in tpl[2]:
            _return_paths(t, f"{prefix}[{k!r}]", out)
    elif kind == "dataclass":
        for f, _, t in tpl[2]:
            _return_paths(t, f"{prefix}.{f}", out)
    elif kind == "plain":
        for f, t in tpl[2]:
            _return_paths(t, f"{prefix}.{f}", out)
    elif kind in ("tuple", "list"):
        for i, t in enumerate(tpl[1]):
            _return_paths(t, f"{prefix}[{i}]", out)
    elif kind == "retained":    # a tensor and its retained .grad
        _return_paths(tpl[1], prefix, out)
        out[tpl[2]] = f"{prefix}.grad"
    elif kind == "view" and tpl[1][1] is None:   # a view returned as its own value
        _return_paths(tpl[1][0], prefix, out)


def name_trace(trace, fn, args, kwargs, arg_objects=()) -> None:
    """Name every input and output of ``trace`` (``spec.name``) and its IR
    function's arguments and results.  ``arg_objects``: ``(path, object)``
    for the non-tensor objects among the arguments (a module passed in)."""
    arg_names = argument_names(fn)
    roots: list = []
    for path, obj in arg_objects:
        roots.append((path_name(path, arg_names), obj))
    _scope_roots(fn, roots, set(), _FN_DEPTH)
    names = reachable_names(roots)
    trace.names = names

    def leaf_name(leaf, arg_path):
        if arg_path is not None:
            return path_name(arg_path, arg_names)
        return names.get(id(leaf))

    counts: dict = {}

    def fallback(kind):
        counts[kind] = counts.get(kind, -1) + 1
        return f"{kind}#{counts[kind]}"

    for spec in trace.inputs:
        if spec.kind == "arg":
            spec.name = path_name(spec.source, arg_names)
        elif spec.kind == "state":
            spec.name = names.get(id(spec.source)) or fallback("state")
        else:
            base = leaf_name(spec.source, spec.arg)
            spec.name = f"{base}.grad" if base else fallback("grad")
    paths: dict = {}
    _return_paths(trace.template, "return", paths)
    k = 0
    for spec in trace.outputs:
        if spec.kind == "return":
            spec.name = paths.get(k, f"return#{k}")
            k += 1
        elif spec.kind == "write":
            spec.name = leaf_name(spec.target, spec.arg) or fallback("state")
        elif spec.kind in ("attr", "attr_const", "attr_arg", "attr_part", "attr_seq"):
            owner = names.get(id(spec.target[0]))
            spec.name = f"{owner}.{spec.target[1]}" if owner else spec.target[1]
        elif spec.kind == "data_guard":
            loc = spec.target[1]
            spec.name = f"decision@{os.path.basename(loc[0])}:{loc[1]}" if loc else "decision"
        else:
            base = leaf_name(spec.target, spec.arg)
            spec.name = f"{base}.grad" if base else fallback("grad")
    fn_op = next(op for op in trace.module.ops)
    for a, spec in zip(fn_op.body.block.args, trace.inputs):
        ir.set_arg_name(a, spec.name)
    ir.set_result_names(fn_op, [s.name for s in trace.outputs
                                if s.kind not in ("grad_none", "attr_const", "attr_arg",
                                                  "attr_seq")])
