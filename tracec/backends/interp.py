"""The reference interpreter: runs tracec IR with the primitives' NumPy
implementations.  It is the oracle every other backend is checked against.

Invariant: a result has exactly the dtype its IR type names (bfloat16 data
rounded), as in eager mode; a failing op raises naming its primitive and the
user's file:line.
"""
from __future__ import annotations

import numpy as np
from xdsl.dialects import func

from tracec import dtypes as dt
from tracec import ir
from tracec.ops import PRIMITIVES


class InterpError(RuntimeError):
    pass


def _plan_block(block):
    """Compile a block into a list of steps ``(kind, fn, operands, results)``."""
    steps = []
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            steps.append(("return", None, list(op.operands), [], op))
        elif isinstance(op, ir.ConstantOp):
            arr = ir.constant_array(op.value)
            steps.append(("const", arr, [], [op.results[0]], op))
        elif isinstance(op, ir.KernelOp):
            steps.append(("kernel", _Kernel(op), list(op.operands), list(op.results), op))
        elif isinstance(op, ir.YieldOp):
            steps.append(("return", None, list(op.operands), [], op))
        elif isinstance(op, ir.BackwardOp):
            raise InterpError(f"{ir.format_loc(op)}: tracec.backward must be expanded by the "
                              "autodiff pass before execution")
        else:
            name = ir.primitive_name(op)
            if name is None:
                raise InterpError(f"{ir.format_loc(op)}: the interpreter cannot run {op.name}")
            prim = PRIMITIVES[name]
            params = ir.op_params(op)
            out_dtype = ir.dtype_of(op.results[0].type)
            steps.append(("prim", (prim, params, out_dtype), list(op.operands),
                          [op.results[0]], op))
    return steps


class _Kernel:
    def __init__(self, op):
        self.args = list(op.body.block.args)
        self.steps = _plan_block(op.body.block)

    def __call__(self, arrays):
        return _run(self.steps, dict(zip(self.args, arrays)))


def _run(steps, env):
    for kind, fn, operands, results, op in steps:
        if kind == "prim":
            prim, params, out_dtype = fn
            try:
                res = prim.impl(*[env[o] for o in operands], **params)
            except Exception as e:
                raise InterpError(f"{ir.format_loc(op)}: {prim.name} failed: {e}") from None
            if type(res) is not np.ndarray:
                res = np.asarray(res)
            if res.dtype != out_dtype.np:
                res = res.astype(out_dtype.np)
            if out_dtype is dt.bfloat16 and prim.kind != "movement":
                res = dt.round_bfloat16(res)
            env[results[0]] = res
        elif kind == "const":
            env[results[0]] = fn
        elif kind == "kernel":
            for r, v in zip(results, fn([env[o] for o in operands])):
                env[r] = v
        else:
            return [env[o] for o in operands]
    raise InterpError("block has no terminator")


class InterpExecutable:
    """A callable running the module's function on a list of arrays."""

    def __init__(self, module):
        fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        self.args = list(fn.body.block.args)
        self.steps = _plan_block(fn.body.block)

    def __call__(self, arrays):
        return _run(self.steps, dict(zip(self.args, arrays)))


def compile_module(module, **_options) -> InterpExecutable:
    return InterpExecutable(module)
