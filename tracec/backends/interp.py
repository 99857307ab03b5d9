"""The reference interpreter: runs tracec IR with the primitives' NumPy
implementations.  It is the oracle every other backend is checked against.

A module with symbolic sizes (``tensor<?x8xf32, ["B", "8"]>``) runs for
every size (``SIZE_GENERIC``): the primitives compute their results' shapes
from the arrays they get, and a parameter that is a size expression (a
``reshape`` to ``[B*T, 8]``) is evaluated per call, with each symbol read
from the argument dimension that is exactly it.

Invariant: a result has exactly the dtype its IR type names (bfloat16 data
rounded), as in eager mode; a failing op raises naming its primitive and the
user's file:line.  A symbolic module's executable runs a call only if the
call's sizes pass its size guards (``failed_guard``) and then gives what the
module specialized to those sizes gives.
"""
from __future__ import annotations

import numpy as np
from xdsl.dialects import func

from tracec import dtypes as dt
from tracec import ir
from tracec.ops import PRIMITIVES
from tracec.symbolic import Sym, evaluate, failed_size_guard, parse, size_sources

#: The executables serve symbolic modules (``tracec.size_generic``).
SIZE_GENERIC = True


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
            sized = [k for k, v in params.items() if _has_sym(v)]
            steps.append(("prim", (prim, params, out_dtype, sized), list(op.operands),
                          [op.results[0]], op))
    return steps


def _has_sym(v) -> bool:
    return isinstance(v, Sym) or (isinstance(v, tuple) and any(isinstance(x, Sym) for x in v))


def _at(v, sizes: dict):
    """A parameter's value at the call's ``sizes``."""
    if isinstance(v, Sym):
        return evaluate(v, sizes)
    return tuple(evaluate(x, sizes) if isinstance(x, Sym) else x for x in v)


class _Kernel:
    def __init__(self, op):
        self.args = list(op.body.block.args)
        self.steps = _plan_block(op.body.block)

    def __call__(self, arrays, sizes):
        return _run(self.steps, dict(zip(self.args, arrays)), sizes)


def _run(steps, env, sizes=None):
    """Run ``steps`` on ``env`` (SSA value -> array); ``sizes``: the
    symbols' values at this call (a symbolic module)."""
    for kind, fn, operands, results, op in steps:
        if kind == "prim":
            prim, params, out_dtype, sized = fn
            if sized:
                params = dict(params, **{k: _at(params[k], sizes) for k in sized})
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
            for r, v in zip(results, fn([env[o] for o in operands], sizes)):
                env[r] = v
        else:
            return [env[o] for o in operands]
    raise InterpError("block has no terminator")


class InterpExecutable:
    """A callable running the module's function on a list of arrays;
    ``size_guards``: of a symbolic module, the decisions the passes made
    from the sizes they ran for (``[lhs, op, rhs, result]``)."""

    def __init__(self, module, size_guards=()):
        fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        self.args = list(fn.body.block.args)
        self.steps = _plan_block(fn.body.block)
        sources, missing = size_sources([ir.shape_of(a.type) for a in self.args])
        if missing:
            raise InterpError(f"the sizes {sorted(missing)} are not a dimension of any "
                              "argument: the interpreter cannot read them at run time")
        #: ``[(symbol, argument, dim)]``: where each symbol's value is read
        self.symbols = [(name, i, d) for name, (i, d) in sorted(sources.items())]
        self.size_guards = [[parse(lhs), op, parse(rhs), res]
                            for lhs, op, rhs, res in size_guards]

    def failed_guard(self, env: dict) -> str | None:
        """None if this executable serves the sizes ``env``, else why not."""
        return failed_size_guard([name for name, _, _ in self.symbols], self.size_guards, env)

    def __call__(self, arrays):
        sizes = None
        if self.symbols:
            sizes = {name: np.shape(arrays[i])[d] for name, i, d in self.symbols}
            bad = self.failed_guard(sizes)
            if bad is not None:
                raise InterpError(f"sizes outside what this code serves: {bad}")
        return _run(self.steps, dict(zip(self.args, arrays)), sizes)


def compile_module(module, *, size_guards=None, **_options) -> InterpExecutable:
    return InterpExecutable(module, size_guards or ())
