"""User-facing names of a function's arguments and results.

An argument carries its name as an MLIR name location on the block
argument (``%model.0.weight: tensor<512x784xf32> loc("model.0.weight")``)
and as the SSA name hint the printer uses; a result carries it as the
``tracec.name`` result attribute (``-> (tensor<10xf32> {tracec.name =
"model.0.weight"})``).  Both print and parse back with xDSL, and both
survive the passes (which keep the function's block arguments and rebuild
neither the function nor its return).

Invariant: ``arg_name(a)`` returns exactly the name given to
``set_arg_name(a, name)``, before and after a print/parse round trip;
``set_returns`` (tracec.ir.function) clears result names, since the
returned values it sets are new.
"""
from __future__ import annotations

import re

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, NameLoc, NoneAttr, StringAttr
from xdsl.ir import BlockArgument, SSAValue

from tracec.ir import key_texts

__all__ = ["set_arg_name", "arg_name", "set_result_names", "result_names", "value_name",
           "NAME_ATTR"]

#: The result attribute holding a result's name.
NAME_ATTR = "tracec.name"


def _ssa_hint(name: str) -> str:
    """A valid SSA name (``[A-Za-z_$.-][\\w$.-]*``) that reads like ``name``:
    ``opt.state[model.0.weight].exp_avg`` -> ``opt.state.model.0.weight.exp_avg``."""
    s = re.sub(r"[\[\]'\"]+", ".", name)
    s = re.sub(r"[^\w$.-]+", "_", s)
    s = re.sub(r"\.{2,}", ".", s).strip(".")
    if not s or not re.match(r"[A-Za-z_$.-]", s[0]):
        s = "_" + s
    return s


def set_arg_name(arg: BlockArgument, name: str) -> None:
    """Name a function argument (location and SSA name)."""
    arg.location = loc = NameLoc(StringAttr(name), NoneAttr())
    key_texts.register(loc, "N", name)
    arg.name_hint = _ssa_hint(name)


def arg_name(arg: SSAValue) -> str | None:
    """The name ``set_arg_name`` gave ``arg``, or None."""
    loc = getattr(arg, "location", None)
    if isinstance(loc, NameLoc):
        return loc.desc.data
    return None


def value_name(v: SSAValue) -> str | None:
    """The user-facing name of ``v`` when it is a named function argument."""
    return arg_name(v) if isinstance(v, BlockArgument) else None


def set_result_names(fn: func.FuncOp, names) -> None:
    """Name the results of ``fn`` (one name, or None, per result)."""
    n = len(fn.function_type.outputs.data)
    names = list(names)
    if len(names) != n:
        raise ValueError(f"{len(names)} names for {n} results of @{fn.sym_name.data}")
    fn.res_attrs = ArrayAttr([DictionaryAttr({NAME_ATTR: StringAttr(s)} if s else {})
                              for s in names])


def result_names(fn: func.FuncOp) -> list:
    """The names of ``fn``'s results (None where unnamed)."""
    n = len(fn.function_type.outputs.data)
    attrs = fn.res_attrs.data if fn.res_attrs is not None else ()
    out = []
    for i in range(n):
        a = attrs[i].data.get(NAME_ATTR) if i < len(attrs) else None
        out.append(a.data if isinstance(a, StringAttr) else None)
    return out
