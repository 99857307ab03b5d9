"""``tracec.compile(fn, check=True)``: run the reference interpreter beside
a backend, op by op, and report the first top-level op (usually a fused
kernel) whose results differ, naming the user's file:line of its ops.

Each top-level op of the optimized function is compiled on its own (a
one-op function whose arguments are the op's operands) and fed the
interpreter's values for those operands, so a mismatch is pinned to one
kernel rather than smeared over the whole function.
"""
from __future__ import annotations

import numpy as np
from xdsl.dialects import func

from tracec import ir
from tracec.backends import interp


class CheckError(AssertionError):
    """The backend and the interpreter disagree; the message says where."""


def _locations(op) -> list[str]:
    locs = []
    for o in op.walk():
        t = ir.loc_tuple(o)
        if t is not None:
            s = f"{t[0]}:{t[1]}"
            if s not in locs:
                locs.append(s)
    return locs


def _single_op_module(op):
    fn = ir.new_function("check_op", [o.type for o in op.operands])
    clone = op.clone()
    for i, arg in enumerate(fn.body.block.args):
        clone.operands[i] = arg
    fn.body.block.add_op(clone)
    ir.set_returns(fn, list(clone.results))
    return ir.new_module([fn])


def _close(a, b, dtype) -> bool:
    if a.shape != b.shape:
        return False
    if dtype.is_floating_point:
        tol = 1e-4 if dtype.itemsize <= 4 else 1e-9
        return bool(np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    return bool(np.array_equal(a, b))


def check_module(module, backend, arrays, *, options=None) -> int:
    """Compare ``backend`` with the interpreter on every top-level op of the
    module's function for these input arrays; returns the number of ops
    checked, raises ``CheckError`` at the first disagreement."""
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    env = dict(zip(fn.body.block.args, arrays))
    checked = 0
    for op in fn.body.block.ops:
        if isinstance(op, func.ReturnOp):
            break
        inputs = [env[o] for o in op.operands]
        single = _single_op_module(op)
        want = interp.compile_module(single)(inputs)
        if not isinstance(op, ir.ConstantOp):
            got = backend.compile_module(single, **(options or {}))(
                [np.ascontiguousarray(a) for a in inputs])
            for k, (w, g, r) in enumerate(zip(want, got, op.results)):
                d = ir.dtype_of(r.type)
                if not _close(np.asarray(w), np.asarray(g), d):
                    diff = (float(np.max(np.abs(np.asarray(w, np.float64) -
                                                np.asarray(g, np.float64))))
                            if np.asarray(w).shape == np.asarray(g).shape else float("nan"))
                    raise CheckError(
                        f"check=True: {op.name} (result {k}, {ir.format_type(r.type)}) differs "
                        f"from the interpreter by up to {diff:.3g}; its ops come from "
                        f"{', '.join(_locations(op)) or 'an unknown location'}\n"
                        f"{ir.print_op(op)}")
            checked += 1
        for r, w in zip(op.results, want):
            env[r] = w
    return checked
