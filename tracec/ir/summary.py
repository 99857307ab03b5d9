"""Short descriptions of ops for people: what a kernel is and where its
ops came from (profiles, graph views, ``tracec explain``).

Invariant: these read the IR only; they never change it.
"""
from __future__ import annotations

from tracec.ir.attrs import loc_tuple
from tracec.ir.ops import primitive_name
from tracec.ir.structural import ConstantOp, KernelOp, YieldOp

__all__ = ["op_label", "op_lines"]


def op_label(op) -> str:
    """``matmul``, ``fused add+max_elementwise``, ``copy``: what a kernel is."""
    if isinstance(op, int):
        return "copy"
    if isinstance(op, KernelOp):
        names = []
        for o in op.body.block.ops:
            n = primitive_name(o)
            if n and n not in names and not isinstance(o, (ConstantOp, YieldOp)):
                names.append(n)
        return "fused " + "+".join(names)
    return primitive_name(op) or op.name


def op_lines(op) -> list[str]:
    """The user's ``file:line``s of an op (and of the ops fused into it)."""
    ops = [op] if not isinstance(op, KernelOp) else \
        [o for o in op.body.block.ops if not isinstance(o, YieldOp)]
    out = []
    for o in ops:
        t = loc_tuple(o)
        if t and f"{t[0]}:{t[1]}" not in out:
            out.append(f"{t[0]}:{t[1]}")
    return out
