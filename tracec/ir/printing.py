"""Text form of tracec IR: printing (with source locations) and parsing.

Invariant: for a verified module ``m``,
``parse_module(print_module(m)).is_structurally_equivalent(m)`` and every
op's ``location`` survives (structural equivalence ignores locations, so the
tests check them separately).
"""
from __future__ import annotations

import io

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer

from tracec.ir.dialect import TRACEC

__all__ = ["context", "print_module", "print_op", "parse_module"]


def context() -> Context:
    """A fresh xDSL context with the builtin, func and tracec dialects."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    ctx.load_dialect(TRACEC)
    return ctx


def print_op(op: Operation, *, debuginfo: bool = True, generic: bool = False) -> str:
    """Text of any op (a module, a function, one op), with ``loc(...)`` by
    default; ``generic=True`` prints MLIR's generic form."""
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=debuginfo, print_generic_format=generic).print_op(op)
    return out.getvalue() + "\n"


def print_module(module: ModuleOp, *, debuginfo: bool = True) -> str:
    """Custom-syntax text of a module, every op followed by its location."""
    return print_op(module, debuginfo=debuginfo)


def parse_module(text: str, *, verify: bool = True, ctx: Context | None = None) -> ModuleOp:
    """Parse module text (custom or generic syntax); verify it by default."""
    module = Parser(ctx or context(), text).parse_module()
    if verify:
        module.verify()
    return module
