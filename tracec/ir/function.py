"""Functions and modules: xDSL ``func.func`` / ``func.return`` inside a
``builtin.module``.

Invariant kept by ``set_returns``: a function's ``function_type`` always
equals (its entry block's argument types) -> (its return's operand types).
"""
from __future__ import annotations

from typing import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue

from tracec.ir.attrs import to_location
from tracec.ir.types import tensor_type

__all__ = ["new_function", "set_returns", "new_module"]


def _as_type(t) -> Attribute:
    return t if isinstance(t, Attribute) else tensor_type(*t)


def new_function(name: str, arg_types: Sequence, arg_names: Sequence[str] | None = None,
                 loc=None) -> func.FuncOp:
    """A ``func.func @name`` with one empty entry block whose arguments have
    ``arg_types`` (TensorTypes or ``(shape, dtype)`` pairs) and, optionally,
    names (printed as ``%name``).  Its results are set by ``set_returns``."""
    types = [_as_type(t) for t in arg_types]
    fn = func.FuncOp(name, (types, []))
    fn.location = to_location(loc)
    if arg_names is not None:
        for arg, n in zip(fn.body.block.args, arg_names, strict=True):
            arg.name_hint = n
    return fn


def set_returns(fn: func.FuncOp, values: Sequence[SSAValue | Operation],
                loc=None) -> func.ReturnOp:
    """Append ``func.return values`` to ``fn`` and update its type."""
    vals = [v.results[0] if isinstance(v, Operation) else v for v in values]
    ret = func.ReturnOp(*vals)
    ret.location = to_location(loc)
    block = fn.body.block
    block.add_op(ret)
    fn.function_type = FunctionType.from_lists([a.type for a in block.args],
                                               [v.type for v in vals])
    fn.res_attrs = None    # names of the old results (tracec.ir.names) no longer apply
    return ret


def new_module(ops: Sequence[Operation] = ()) -> ModuleOp:
    """A ``builtin.module`` holding ``ops`` (usually functions)."""
    return ModuleOp(list(ops))
