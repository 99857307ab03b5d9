"""``tracec-gather-sink``: gathers of elementwise results, and scatters of
one element per line into zeros, rewritten so that fusion can do better.

The NLL loss over a log-softmax (a language model's ``[tokens, vocab]``
logits) is the motivating case: the forward materializes the whole
log-softmax only for a ``gather`` to read one element per row, and the
backward ``scatter_add``\\s the loss gradient into a zero ``[tokens, vocab]``
tensor that two kernels then read back in full.  Two rewrites:

* **Sinking** ``gather(f(u1, ..., uk), idx, axis)`` for an elementwise
  ``f``: ``f(g1, ..., gk)`` where ``gi`` is ``ui`` itself if it does not
  vary along ``axis`` (size 1 there: one value for every index) and
  ``gather(ui, idx, axis)`` otherwise.  ``f`` is then evaluated only at the
  gathered points, and the full ``f(...)`` (when nothing else reads it)
  fuses into its other readers or disappears.  Applied repeatedly, so
  gathers move down through chains of elementwise ops.  Only where the
  index is at most a quarter the size of the operand (the points are few),
  shapes are static, ``f``'s result varies along ``axis`` (so at least one
  gather, with the same index, remains and checks its bounds) and every
  operand that varies along ``axis`` has the result's shape up to leading
  dimensions (a broadcast operand would need materializing to gather); and
  only while every reader of ``f``'s result is elementwise, a reduction
  or a gather (``_fusable_readers``: else it is stored anyway).
* **One-hot scatter**: ``scatter_add(zeros, idx, src, axis)`` with one index
  per line (``idx`` of size 1 along ``axis``) is ``where(iota == idx', src
  + 0, 0)`` (``idx'``: negative indices counted from the end; ``src + 0``
  turns ``-0.0`` into ``+0.0`` as the scatter's addition does), an
  elementwise expression that fuses into its readers (one copy each, so
  that no kernel materializes it for another).  Only where a
  ``gather`` along the same axis of a same-size operand reads the very same
  index value (a gather's gradient: that gather checks the indices' bounds,
  which the ``where`` form would not).

Invariant: each rewrite computes exactly the values the original did, and
raises the same errors (index bounds are checked by a remaining gather with
the same index and axis size); the module still verifies.
"""
from __future__ import annotations

import math

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from tracec import dtypes as dt
from tracec import ir
from tracec.ops import PRIMITIVES
from tracec.passes.simplify import splat_value

__all__ = ["GatherSinkPass", "SINK_RATIO"]

#: A gather is sunk only if its operand has at least this many times as
#: many elements as its index.
SINK_RATIO = 4


def _static(shape) -> bool:
    return all(isinstance(n, int) for n in shape)


def _elementwise(op) -> bool:
    name = ir.primitive_name(op) if isinstance(op, Operation) else None
    return name is not None and PRIMITIVES[name].kind == "elementwise"


def _before(a: Operation, b: Operation) -> bool:
    """Whether ``a`` comes before ``b`` (another op of its block): a walk
    both ways from ``a``, as long as the distance between them (xDSL's
    ``is_before_in_block`` walks to the block's end when it does not)."""
    fwd, back = a.next_op, a.prev_op
    while fwd is not None or back is not None:
        if fwd is b:
            return True
        if back is b:
            return False
        fwd = fwd.next_op if fwd is not None else None
        back = back.prev_op if back is not None else None
    return False


def _fusable_readers(y: SSAValue) -> bool:
    """Whether every reader of ``y`` is elementwise, a reduction or a
    gather: then sinking the gathers lets ``y`` fuse into its readers
    instead of being stored.  Where another op reads it (a slice, a
    concatenate, a matmul), ``y`` is stored anyway and a sunk gather only
    recomputes the chain behind it: the gathers a CTC loss takes of its
    alpha recursion at each sequence end sank through every earlier time
    step (O(T^2) ops, one 4,700-op kernel at T=8, LLVM 55 s at T=12)."""
    for u in y.uses:
        o = u.operation
        if not (_elementwise(o) or ir.primitive_name(o) in ("gather", "reduce_sum",
                                                            "reduce_max", "reduce_min")):
            return False
    return True


class _Sinker:
    def __init__(self, block: Block):
        self.block = block
        self.memo: dict = {}
        self.padded: set = set()       # gathers made of a reshape made here
        self.made: list = []           # gathers made by the last sink()

    def _insert(self, op: Operation, before: Operation) -> SSAValue:
        self.block.insert_op_before(op, before)
        return op.results[0]

    def gathered(self, u: SSAValue, idx: SSAValue, axis: int, at: Operation) -> SSAValue:
        """``gather(u, idx, axis)``, ``u`` of the index's shape off ``axis``
        (up to missing leading dims, added by a reshape)."""
        key = (u, idx, axis)
        g = self.memo.get(key)
        if g is not None and g.owner.parent is self.block:
            if not _before(g.owner, at):
                # made for a later reader: move it (and its reshape) up
                # here; its operands are defined before any gather sunk
                # from the same original one
                for o in ([g.owner.operands[0].owner] if g.owner in self.padded else []) + \
                        [g.owner]:
                    o.detach()
                    self.block.insert_op_before(o, at)
            return g
        ishape = ir.shape_of(idx.type)
        ushape = ir.shape_of(u.type)
        src = u
        if len(ushape) < len(ishape):
            full = (1,) * (len(ishape) - len(ushape)) + tuple(ushape)
            src = self._insert(ir.make_op("reshape", [u], {"shape": full},
                                          (full, ir.dtype_of(u.type)), loc=at.location), at)
        g = self.memo[key] = self._insert(
            ir.make_op("gather", [src, idx], {"axis": axis},
                       (ishape, ir.dtype_of(u.type)), loc=at.location), at)
        if src is not u:
            self.padded.add(g.owner)
        self.made.append(g.owner)
        return g

    def sink(self, op: Operation) -> bool:
        """Rewrite the gather ``op`` one level down; whether it did."""
        y, idx = op.operands
        axis = ir.op_params(op)["axis"]
        f = y.owner
        if not _elementwise(f) or not _fusable_readers(y):
            return False
        shape, ishape = ir.shape_of(y.type), ir.shape_of(idx.type)
        if not (_static(shape) and _static(ishape)) or shape[axis] < 2 or \
                math.prod(ishape) * SINK_RATIO > math.prod(shape):
            return False
        name = ir.primitive_name(f)
        rank = len(shape)
        plan = []
        for u in f.operands:
            us = ir.shape_of(u.type)
            if not _static(us):
                return False
            full = (1,) * (rank - len(us)) + tuple(us)
            if full[axis] == 1:
                plan.append(False)
            elif all(a == b for i, (a, b) in enumerate(zip(full, shape)) if i != axis):
                plan.append(True)
            else:
                return False
        args = [self.gathered(u, idx, axis, op) if g else u for u, g in zip(f.operands, plan)]
        new = ir.make_op(name, args, ir.op_params(f), (ishape, ir.dtype_of(y.type)),
                         loc=f.location)
        self.block.insert_op_before(new, op)
        op.results[0].replace_all_uses_with(new.results[0])
        self.block.erase_op(op)
        return True


def _checked_indices(block: Block) -> set:
    """``(idx, axis, size)`` of every gather in ``block`` whose result is read."""
    out = set()
    for op in block.ops:
        if ir.primitive_name(op) == "gather" and op.results[0].uses:
            x, idx = op.operands
            axis = ir.op_params(op)["axis"]
            out.add((idx, axis, ir.shape_of(x.type)[axis]))
    return out


def _one_hot(op: Operation, checked: set, block: Block) -> bool:
    base, idx, src = op.operands
    axis = ir.op_params(op)["axis"]
    shape, ishape = ir.shape_of(base.type), ir.shape_of(idx.type)
    d = ir.dtype_of(base.type)
    if not (_static(shape) and _static(ishape)) or ishape[axis] != 1 or d is dt.bool_ \
            or (idx, axis, shape[axis]) not in checked:
        return False
    zero = splat_value(base)
    if zero is None or zero != 0 or np.signbit(zero):
        return False
    n = shape[axis]
    idd = ir.dtype_of(idx.type)
    loc = op.location
    new: list[Operation] = []

    def add(o: Operation) -> SSAValue:
        new.append(o)
        return o.results[0]

    def const(v, dd):
        return add(ir.constant(np.asarray(v, dd.np), dd, loc=loc))

    bshape = tuple(ishape)
    ishape_axis = tuple(n if i == axis else 1 for i in range(len(shape)))
    iota = add(ir.make_op("iota", [], {"shape": ishape_axis, "dtype": idd, "axis": axis},
                          (ishape_axis, idd), loc=loc))
    # One copy of the (cheap) expression per reader, so that each fuses into
    # its reader instead of one kernel materializing it for the others.
    for use in list(op.results[0].uses):
        neg = add(ir.make_op("lt", [idx, const(0, idd)], {}, (bshape, dt.bool_), loc=loc))
        wrapped = add(ir.make_op("add", [idx, const(n, idd)], {}, (bshape, idd), loc=loc))
        norm = add(ir.make_op("where", [neg, wrapped, idx], {}, (bshape, idd), loc=loc))
        hit = add(ir.make_op("eq", [iota, norm], {}, (tuple(shape), dt.bool_), loc=loc))
        val = src
        if d.is_floating_point:       # the scatter's 0 + src: -0.0 -> +0.0
            val = add(ir.make_op("add", [src, const(0, d)], {}, (bshape, d), loc=loc))
        out = add(ir.make_op("where", [hit, val, const(0, d)], {}, (tuple(shape), d),
                             loc=loc))
        use.operation.operands[use.index] = out
    for o in new:
        block.insert_op_before(o, op)
    block.erase_op(op)
    return True


class GatherSinkPass(ModulePass):
    """Sink gathers through elementwise ops; scatters of one element per
    line into zeros become one-hot ``where``\\s (see the module docstring)."""

    name = "tracec-gather-sink"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in op.ops:
            if isinstance(fn, func.FuncOp):
                run_block(fn.body.block)


def run_block(block: Block) -> None:
    sinker = _Sinker(block)
    # Level by level, as sweeps of the whole block would go (a gather sinks
    # one level per rewrite, and the gathers of one level are all made
    # before any of them sinks, so readers of one operand share its gather),
    # but visiting only the gathers the last level made: sweeping the block
    # once per level is quadratic when a gather sinks back through a long
    # chain (CTC's end-of-sequence gathers through every time step of the
    # alpha recursion).
    level = [op for op in block.ops if ir.primitive_name(op) == "gather"]
    while level:
        made = []
        for op in level:
            if op.parent is block and sinker.sink(op):
                made.extend(sinker.made)
            sinker.made.clear()
        level = made
    checked = _checked_indices(block)
    for op in list(block.ops):
        if ir.primitive_name(op) == "scatter_add":
            _one_hot(op, checked, block)
