"""Specializing symbolic IR: one static module for given symbol values.

``specialize(module, env)`` returns a copy of ``module`` in which every
symbolic tensor type is the static type of its sizes under ``env``
(symbol name -> int), every symbolic parameter (``sym_<param>``
attributes, see ``tracec.ir.ops.make_op``) is its value, and function
signatures follow.  The result contains no ``Sym``: every pass and backend
that works on static IR takes it unchanged.

``substitute_symbols(module, env)`` is the partial form: the symbols named
in ``env`` become its values, ints or other symbolic sizes (a trace whose
symbols turned out equal to a number or to each other,
``tracec.sym_shapes``); the other symbols stay.
"""
from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType

from tracec.ir.attrs import encode_param
from tracec.symbolic import Sym, evaluate, parse, substitute
from tracec.ir.types import dtype_of, is_symbolic_type, shape_of, tensor_type
from xdsl.dialects.builtin import ArrayAttr, StringAttr

__all__ = ["specialize", "static_type", "substitute_symbols"]


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
    return _rewrite(module, lambda t, memo: static_type(t, env, memo),
                    lambda x: evaluate(x, env))


def substitute_symbols(module: ModuleOp, env: dict, copy: bool = True) -> ModuleOp:
    """``module`` (a copy, or itself rewritten in place with ``copy=False``)
    with the symbols named in ``env`` replaced by their values (ints or
    ``Sym``), see the module docstring."""
    def typ(t, memo):
        if not is_symbolic_type(t):
            return t
        r = memo.get(t)
        if r is None:
            r = memo[t] = tensor_type([substitute(d, env) for d in shape_of(t)], dtype_of(t))
        return r
    return _rewrite(module, typ, lambda x: substitute(x, env), copy)


def _rewrite(module: ModuleOp, typ, size, copy: bool = True) -> ModuleOp:
    """A copy of ``module`` (or itself) with every type mapped by
    ``typ(t, memo)`` and every symbolic parameter's sizes by ``size``."""
    m = module.clone() if copy else module
    memo: dict = {}
    for op in m.walk():
        for region in op.regions:
            for block in region.blocks:
                for a in block.args:
                    a._type = typ(a.type, memo)
        for r in op.results:
            r._type = typ(r.type, memo)
        spec = getattr(type(op), "SPEC", None)
        if spec is not None and op.attributes:
            for name, kind in spec.params:
                a = op.attributes.pop(f"sym_{name}", None)
                if a is None:
                    continue
                if kind == "ints":
                    v = tuple(size(parse(x.data)) for x in a.data)
                    if any(isinstance(x, Sym) for x in v):
                        op.attributes[f"sym_{name}"] = ArrayAttr([StringAttr(str(x)) for x in v])
                        v = tuple(-1 if isinstance(x, Sym) else x for x in v)
                else:
                    v = size(parse(a.data))
                    if isinstance(v, Sym):
                        op.attributes[f"sym_{name}"] = StringAttr(str(v))
                        v = 0
                op.properties[name] = encode_param(kind, v, f"{op.name}.{name}")
        if isinstance(op, func.FuncOp):
            ft = op.function_type
            op.properties["function_type"] = FunctionType.from_lists(
                [typ(t, memo) for t in ft.inputs.data], [typ(t, memo) for t in ft.outputs.data])
    return m

