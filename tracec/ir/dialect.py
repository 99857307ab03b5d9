"""The ``tracec`` xDSL dialect object: every op class of this package.

Invariant: ``TRACEC.operations`` holds exactly the 49 primitive ops plus
``constant``, ``backward``, ``custom_vjp``, ``kernel`` and ``yield``; the dialect defines no
attributes or types of its own (tensors are builtin ``tensor<..>``).
"""
from __future__ import annotations

from xdsl.ir import Dialect

from tracec.ir.ops import OP_BY_PRIMITIVE
from tracec.ir.structural import BackwardOp, ConstantOp, CustomVJPOp, KernelOp, YieldOp

__all__ = ["TRACEC"]

TRACEC = Dialect(
    "tracec",
    [*OP_BY_PRIMITIVE.values(), ConstantOp, BackwardOp, CustomVJPOp, KernelOp, YieldOp],
    [],
)
