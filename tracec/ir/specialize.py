"""Specializing symbolic IR: one static module for given symbol values.

``specialize(module, env)`` returns a copy of ``module`` in which every
symbolic tensor type is the static type of its sizes under ``env``
(symbol name -> int), every symbolic parameter (``sym_<param>``
attributes, see ``tracec.ir.ops.make_op``) is its value, and function
signatures follow.  The result contains no ``Sym``: every pass and backend
that works on static IR takes it unchanged.
"""
from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType

from tracec.ir.attrs import encode_param
from tracec.symbolic import evaluate, parse
from tracec.ir.types import is_symbolic_type, shape_of

__all__ = ["specialize", "static_type"]


def static_type(t, env: dict, memo: dict | None = None):
    """``t`` with its symbolic sizes evaluated under ``env``."""
    if not is_symbolic_type(t):
        return t
    if memo is not None and t in memo:
        return memo[t]
    r = TensorType(t.element_type, [evaluate(d, env) for d in shape_of(t)])
    if memo is not None:
        memo[t] = r
    return r


def specialize(module: ModuleOp, env: dict) -> ModuleOp:
    m = module.clone()
    memo: dict = {}
    for op in m.walk():
        for region in op.regions:
            for block in region.blocks:
                for a in block.args:
                    a._type = static_type(a.type, env, memo)
        for r in op.results:
            r._type = static_type(r.type, env, memo)
        spec = getattr(type(op), "SPEC", None)
        if spec is not None and op.attributes:
            for name, kind in spec.params:
                a = op.attributes.pop(f"sym_{name}", None)
                if a is None:
                    continue
                if kind == "ints":
                    v = tuple(evaluate(parse(x.data), env) for x in a.data)
                else:
                    v = evaluate(parse(a.data), env)
                op.properties[name] = encode_param(kind, v, f"{op.name}.{name}")
        if isinstance(op, func.FuncOp):
            ft = op.function_type
            op.properties["function_type"] = FunctionType.from_lists(
                [static_type(t, env, memo) for t in ft.inputs.data],
                [static_type(t, env, memo) for t in ft.outputs.data])
    return m

