"""The autodiff pass: expands each ``tracec.backward`` op into reverse-mode
IR built by the primitives' own VJP rules (the ones the eager tape runs).

``IRValue`` is a value type primitives can be bound to (like ``Tensor``):
binding emits the primitive's op before the backward op being expanded,
after checking operands with the primitive's shape and dtype rules.

Guarantees: after the pass no ``tracec.backward`` or ``tracec.custom_vjp``
remains (a custom_vjp's gradient is the user's backward recorded beside it,
its seed replaced by the cotangent; then it is its value); each former
result is the sum over all paths of the VJPs from the loss to that wrt
value (fan-out accumulates, broadcasts reduce), or zeros where no path
exists; backward ops carry the location of the forward op they
differentiate.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from tracec import dtypes as dt
from tracec import ir
from tracec.ops import PRIMITIVES, creation
from tracec.ops.core import Aval


class _Builder:
    """Where IRValue bindings go: before ``anchor``, at location ``loc``."""

    def __init__(self, anchor):
        self.anchor = anchor
        self.loc = None
        self.scalars = {}

    def insert(self, op):
        self.anchor.parent_block().insert_op_before(op, self.anchor)
        return op

    def scalar(self, v, dtype):
        key = (type(v), v, dtype.name)
        if key not in self.scalars:
            op = self.insert(ir.constant(np.asarray(v, dtype=dtype.np), dtype, loc=self.loc))
            self.scalars[key] = op.results[0]
        return self.scalars[key]


_BUILDER: list = []


@contextlib.contextmanager
def building(anchor):
    _BUILDER.append(_Builder(anchor))
    try:
        yield _BUILDER[-1]
    finally:
        _BUILDER.pop()


class IRValue:
    """An SSA value of the function being differentiated."""

    __slots__ = ("ssa",)

    def __init__(self, ssa):
        self.ssa = ssa

    @property
    def shape(self):
        return ir.shape_of(self.ssa.type)

    @property
    def dtype(self):
        return ir.dtype_of(self.ssa.type)

    @property
    def ndim(self):
        return len(self.shape)

    @classmethod
    def _bind_primitive(cls, prim, args, params):
        b = _BUILDER[-1]
        ref = None
        for a in args:
            if isinstance(a, IRValue) and (ref is None or a.dtype.category > ref.category):
                ref = a.dtype
        operands, avals = [], []
        for a in args:
            if isinstance(a, IRValue):
                operands.append(a.ssa)
                avals.append(Aval(a.shape, a.dtype))
            else:
                operands.append(b.scalar(a, ref))
                avals.append(Aval((), ref))
        aval = prim.abstract_eval(*avals, **params)
        op = b.insert(ir.make_op(prim.name, operands, params,
                                 ir.tensor_type(aval.shape, aval.dtype), loc=b.loc))
        return IRValue(op.results[0])


def _is_float(v) -> bool:
    return ir.dtype_of(v.type).is_floating_point


def expand_backward(bop) -> None:
    """Replace one ``tracec.backward`` op by its reverse-mode expansion."""
    block = bop.parent_block()
    before = []
    for op in block.ops:
        if op is bop:
            break
        before.append(op)
    wrt = list(bop.wrt)
    wrt_values = set(wrt)
    # Values that depend on a wrt value through differentiable primitives.
    depends = set(wrt)
    for op in before:
        if isinstance(op, ir.CustomVJPOp):
            if any(x in depends for x in op.inputs):
                depends.add(op.result)
            continue
        name = ir.primitive_name(op)
        prim = PRIMITIVES.get(name) if name else None
        if prim is None or prim.vjp is None:
            continue
        if any(o in depends for i, o in enumerate(op.operands) if i not in prim.nondiff_argnums):
            if _is_float(op.results[0]):
                depends.add(op.results[0])
    with building(bop) as b:
        b.loc = bop.location
        if bop.seed is not None:
            seed = IRValue(bop.seed)
        else:
            loss_t = bop.loss.type
            seed = creation.full(ir.shape_of(loss_t), 1.0, ir.dtype_of(loss_t),
                                 like=IRValue(bop.loss))
        ct = {bop.loss: seed}
        position = None     # op -> its index in ``before`` (custom_vjp ops only)
        for op in reversed(before):
            if not op.results or op.results[0] not in ct or op.results[0] not in depends:
                continue
            if op.results[0] in wrt_values:
                # A leaf given a new value earlier in the call (``p.data *= m``,
                # ``with no_grad(): p.mul_(m)``): its gradient is the cotangent
                # of that value, which goes no further back (PyTorch's leaves
                # have no history; the op that made the value may have no VJP).
                continue
            b.loc = op.location
            g = ct.pop(op.results[0])
            if isinstance(op, ir.CustomVJPOp):
                if position is None:
                    position = {o: i for i, o in enumerate(before)}
                for x, c in zip(op.inputs, _custom_vjp(op, g, before, position)):
                    if x in depends:
                        ct[x] = PRIMITIVES["add"].bind(ct[x], c) if x in ct else c
                continue
            prim = PRIMITIVES[ir.primitive_name(op)]
            cts = prim.vjp(g, *[IRValue(o) for o in op.operands], out=IRValue(op.results[0]),
                           **ir.op_params(op))
            for i, (o, c) in enumerate(zip(op.operands, cts)):
                if c is None or o not in depends or i in prim.nondiff_argnums:
                    continue
                if c.dtype is not ir.dtype_of(o.type):
                    c = c.__class__._bind_primitive(PRIMITIVES["cast"], (c,),
                                                    {"dtype": ir.dtype_of(o.type)})
                ct[o] = PRIMITIVES["add"].bind(ct[o], c) if o in ct else c
        b.loc = bop.location
        results = []
        for w in wrt:
            if w in ct:
                results.append(ct[w].ssa)
            else:
                results.append(creation.zeros(ir.shape_of(w.type), ir.dtype_of(w.type),
                                              like=IRValue(w)).ssa)
    for res, new in zip(bop.results, results):
        res.replace_all_uses_with(new)
    block.erase_op(bop)


def _custom_vjp(op, g, before, position) -> list:
    """The gradients of ``op``'s inputs for cotangent ``g``: the recorded
    ops from its seed to its grads (the user's backward), copied before the
    backward being expanded with ``g`` in the seed's place; a grad that
    does not read the seed is used as it is.  Only the ops between the
    seed's and ``op`` are looked at (``position``: indices in ``before``)."""
    mapper = {op.seed: g.ssa}
    reads_seed = {op.seed}
    b = _BUILDER[-1]
    owner = op.seed.owner
    start = position.get(owner, -1) + 1 if not isinstance(owner, Block) else 0
    for o in before[start:position[op]]:
        if any(v in reads_seed for v in o.operands):
            reads_seed.update(o.results)
            b.insert(o.clone(value_mapper=mapper))
    return [IRValue(mapper.get(v, v)) for v in op.grads]


def strip_custom_vjps(module) -> None:
    """Each ``tracec.custom_vjp`` replaced by its value (after every backward
    is expanded: what only the user's backward read is then dead code)."""
    for op in [o for o in module.walk() if isinstance(o, ir.CustomVJPOp)]:
        op.result.replace_all_uses_with(op.value)
        op.parent_block().erase_op(op)


@dataclass(frozen=True)
class AutodiffPass(ModulePass):
    """Expand every ``tracec.backward`` into reverse-mode primitive IR."""

    name = "tracec-autodiff"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for bop in [o for o in op.walk() if isinstance(o, ir.BackwardOp)]:
            expand_backward(bop)
        strip_custom_vjps(op)
