"""``tracec-fuse``: group elementwise chains (and one trailing reduction)
into ``tracec.kernel`` ops.

The kernel invariant (what a backend may rely on; ``check_kernel`` tests it):

* **Body ops.**  A kernel body holds only
  - ``tracec.constant`` ops of exactly one element (any rank);
  - elementwise primitives (``PRIMITIVES[name].kind == "elementwise"``);
  - ``tracec.broadcast_to`` whose operand is a block argument or a body
    constant (a broadcast of a kernel input, never of a computed value);
  - at most one reduction (``reduce_sum`` / ``reduce_max`` / ``reduce_min``),
    which is then the last op before ``tracec.yield``;
  and ends with ``tracec.yield``.
* **One iteration space.**  The kernel's *iteration shape* is the operand
  shape of its reduction if it has one, else the shape of its yielded
  values.  Every value in the body (block arguments included) has a shape
  that broadcasts, NumPy-style (trailing dimensions aligned), to the
  iteration shape.  A backend may therefore evaluate the body at each point
  of the iteration space, reading every input through broadcasting, and
  treat ``broadcast_to`` as the identity: an elementwise op of a smaller
  shape is simply recomputed at every point it broadcasts to.
* **Results.**  Every yielded value other than the reduction's result has
  exactly the iteration shape.  The reduction's result, if any, is yielded
  last, and the reduction's operand has the iteration shape.  Yield order is
  body order.
* The kernel is ``IsolatedFromAbove`` and ``Pure``; its location is that of
  the op that ended the group (its root).

The pass is one linear walk per block (not a greedy pattern rewrite: a
``PatternRewriteWalker`` re-walks the regions it has just created, so a
fusion pattern would re-match inside its own kernels, and grouping needs a
global view of users and positions that one op's neighbourhood does not
give).  Walking ops from last to first, each not-yet-grouped elementwise op
or reduction roots a group; producers are pulled in, latest first, while

* the producer is elementwise and not already in a group;
* every user of it is in the group, or its value has the iteration shape
  (it is then also yielded) and every outside user comes after the root
  (counting an op already in a later kernel at that kernel's position),
  so placing the kernel where the root was keeps every use dominated;
* matmul, indexing and movement ops are never pulled in: only scalar
  constants and broadcasts of kernel inputs are copied into the body.

Kernels are not walked again, so nothing fuses recursively.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from tracec import ir
from tracec.ops import PRIMITIVES
from tracec.symbolic import same

__all__ = ["FusePass", "REDUCTIONS", "fuse_block", "check_kernel", "count_kernels"]

#: The reductions a kernel may end with.
REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min")


def _kind(op: Operation) -> str | None:
    name = ir.primitive_name(op)
    return PRIMITIVES[name].kind if name else None


def _is_elementwise(op: Operation) -> bool:
    return _kind(op) == "elementwise"


def _is_root(op: Operation) -> bool:
    if _is_elementwise(op):
        return True
    # A reduction of a 0-d value is an identity the canonicalizer removes.
    return ir.primitive_name(op) in REDUCTIONS and bool(ir.shape_of(op.operands[0].type))


def _scalar_constant(v: SSAValue) -> bool:
    return isinstance(v.owner, ir.ConstantOp) and math.prod(ir.shape_of(v.type)) == 1


def _broadcasts_into(shape: tuple, iteration: tuple) -> bool:
    """``shape`` broadcasts to ``iteration``: each of its (right-aligned)
    sizes is 1 or the same size.  Structural on symbolic sizes (no guard:
    a symbol is never taken for a number it equals at the sizes traced;
    not fusing is always correct)."""
    if len(shape) > len(iteration):
        return False
    tail = iteration[len(iteration) - len(shape):]
    return all((type(d) is int and d == 1) or same(d, n) for d, n in zip(shape, tail))


def _same_shape(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


class _Grouping:
    """Group membership for one block: ``root_of[op]`` is the root of the
    group holding ``op``; positions are the ops' original indices."""

    def __init__(self, block: Block):
        self.ops = list(block.ops)
        self.pos = {op: i for i, op in enumerate(self.ops)}
        self.root_of: dict[Operation, Operation] = {}

    def effective_pos(self, op: Operation) -> int:
        """Where ``op`` (or the op of this block that holds it) will be once
        kernels are placed at their roots."""
        while op not in self.pos:
            op = op.parent_op()
        root = self.root_of.get(op)
        return self.pos[root if root is not None else op]

    def grow(self, root: Operation) -> list[Operation]:
        """The members of the group rooted at ``root``, in block order."""
        reduce = ir.primitive_name(root) in REDUCTIONS
        iteration = ir.shape_of((root.operands[0] if reduce else root.results[0]).type)
        members = {root}
        self.root_of[root] = root
        root_pos = self.pos[root]
        heap: list[int] = []  # negated positions: latest producer first
        queued: set[Operation] = set()

        def push_producers(op):
            for v in op.operands:
                p = v.owner
                if (isinstance(p, Operation) and p in self.pos and p not in queued
                        and p not in self.root_of and _is_elementwise(p)):
                    queued.add(p)
                    heapq.heappush(heap, -self.pos[p])

        push_producers(root)
        while heap:
            p = self.ops[-heapq.heappop(heap)]
            # Latest first: every user of p that could join has been decided.
            if self._may_join(p, members, iteration, root_pos):
                members.add(p)
                self.root_of[p] = root
                push_producers(p)
        return sorted(members, key=self.pos.__getitem__)

    def _may_join(self, p: Operation, members: set, iteration: tuple, root_pos: int) -> bool:
        shape = ir.shape_of(p.results[0].type)
        if not _broadcasts_into(shape, iteration):
            return False
        outside = [u.operation for u in p.results[0].uses if u.operation not in members]
        if not outside:
            return True
        return _same_shape(shape, iteration) and all(self.effective_pos(u) > root_pos
                                                      for u in outside)


def _outline(block: Block, members: list[Operation]) -> ir.KernelOp:
    """Replace ``members`` (one group, block order, root last) by a kernel op
    placed where the root was."""
    root = members[-1]
    member_set = set(members)

    def cloned_broadcast(v: SSAValue) -> bool:
        o = v.owner
        return (ir.primitive_name(o) == "broadcast_to" and o not in member_set
                and o.operands[0].owner not in member_set)

    inputs: list[SSAValue] = []
    seen: set[SSAValue] = set()

    def need(v: SSAValue) -> None:
        if v not in seen and not _scalar_constant(v):
            seen.add(v)
            inputs.append(v)

    for op in members:
        for v in op.operands:
            if v.owner in member_set:
                continue
            need(v.owner.operands[0] if cloned_broadcast(v) else v)

    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))

    def inside(v: SSAValue) -> SSAValue:
        if v in mapping:
            return mapping[v]
        if _scalar_constant(v):
            c = v.owner.clone()
            body.add_op(c)
            mapping[v] = c.results[0]
        else:  # a broadcast of a kernel input or of a scalar constant
            b = v.owner
            nb = ir.make_op("broadcast_to", [inside(b.operands[0])], ir.op_params(b),
                            b.results[0].type, loc=b.location)
            body.add_op(nb)
            mapping[v] = nb.results[0]
        return mapping[v]

    yielded = [op.results[0] for op in members
               if op is root or any(u.operation not in member_set for u in op.results[0].uses)]
    kernel = ir.KernelOp(inputs, [v.type for v in yielded], body, loc=root.location)
    block.insert_op_before(kernel, root)
    for op in members:
        new_operands = [v if v.owner in member_set else inside(v) for v in op.operands]
        op.detach()
        body.add_op(op)
        for i, v in enumerate(new_operands):
            if op.operands[i] is not v:
                op.operands[i] = v
    body.add_op(ir.YieldOp(yielded, loc=root.location))
    for old, new in zip(yielded, kernel.results):
        old.replace_uses_with_if(new, lambda use: use.operation.parent_block() is not body)
    return kernel


def _split_scalar_producers(block: Block) -> None:
    """Give each fusable user of a one-element elementwise value its own
    copy of the op computing it (and, recursively, of its one-element
    elementwise producers): a learning rate cast once and read by every
    parameter's update then folds into each update kernel (recomputed per
    element, hoisted out of the loop by LLVM) instead of being a kernel of
    its own that all of them wait for.

    Only values that reach a larger kernel are split (a program of
    one-element values fuses whole without copies), and the copies are
    capped (``_SPLIT_BUDGET``): each copy of a value adds a use to each of
    its producers, so a deep one-element DAG (atan2's composite of 0-d
    tensors) grows with its number of paths: 172,000 ops from 100, and an
    LLVM compile that did not end."""
    ops = list(block.ops)
    budget = _SPLIT_BUDGET + 2 * len(ops)
    reaches_big: set = set()
    for op in reversed(ops):
        if not _is_elementwise(op) or len(op.results) != 1 or \
                math.prod(ir.shape_of(op.results[0].type)) != 1:
            continue
        users = [u.operation for u in op.results[0].uses]
        if any(u in reaches_big or not all(_one_element(r) for r in u.results)
               for u in users):
            reaches_big.add(op)
        else:
            continue
        uses = [u for u in op.results[0].uses if _is_root(u.operation)]
        if len(uses) < 2 or len(uses) != len(users) or len(uses) - 1 > budget:
            continue
        budget -= len(uses) - 1
        for u in uses[1:]:
            clone = op.clone()
            block.insert_op_after(clone, op)
            u.operation.operands[u.index] = clone.results[0]
            reaches_big.add(clone)


#: Copies ``_split_scalar_producers`` may make beyond twice a block's ops.
_SPLIT_BUDGET = 256


def _one_element(v: SSAValue) -> bool:
    """Whether ``v`` is a tensor of one element (True for non-tensors: a
    ``func.return`` reads its operands without making anything larger)."""
    try:
        shape = ir.shape_of(v.type)
    except Exception:    # not a tracec tensor type
        return True
    return math.prod(shape) == 1


def fuse_block(block: Block) -> list[ir.KernelOp]:
    """Fuse the ops of one block (a function body); returns the new kernels."""
    _split_scalar_producers(block)
    grouping = _Grouping(block)
    groups = []
    for op in reversed(grouping.ops):
        if op not in grouping.root_of and _is_root(op):
            groups.append(grouping.grow(op))
    return [_outline(block, g) for g in groups]


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Group elementwise chains, with at most one trailing reduction, into
    ``tracec.kernel`` ops (see the module docstring for the invariant).
    Leaves now-unused scalar constants and broadcasts for DCE."""

    name = "tracec-fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            for block in f.body.blocks:
                fuse_block(block)


# --- checking and counting -----------------------------------------------------------

def check_kernel(k: ir.KernelOp) -> None:
    """Raise AssertionError unless ``k`` keeps the kernel invariant above."""
    body = k.body.block
    ops = list(body.ops)
    term = ops[-1]
    assert isinstance(term, ir.YieldOp), "kernel body must end with tracec.yield"
    reductions = [o for o in ops if ir.primitive_name(o) in REDUCTIONS]
    assert len(reductions) <= 1, "at most one reduction per kernel"
    if reductions:
        assert ops[-2] is reductions[0], "the reduction must be the last op"
        assert term.operands[-1] is reductions[0].results[0], "reduction result yielded last"
        iteration = ir.shape_of(reductions[0].operands[0].type)
    else:
        iteration = ir.shape_of(term.operands[0].type)
    for o in ops[:-1]:
        name = ir.primitive_name(o)
        if isinstance(o, ir.ConstantOp):
            assert math.prod(ir.shape_of(o.results[0].type)) == 1, "only 1-element constants"
        elif name == "broadcast_to":
            src = o.operands[0]
            assert src.owner is body or isinstance(src.owner, ir.ConstantOp), \
                "broadcast_to only of a kernel input or a body constant"
        else:
            assert name in REDUCTIONS or PRIMITIVES[name].kind == "elementwise", \
                f"{o.name} is not allowed in a kernel"
        values = o.operands if name in REDUCTIONS else (*o.operands, *o.results)
        for v in values:
            assert _broadcasts_into(ir.shape_of(v.type), iteration), \
                f"{o.name}: a value does not broadcast to the iteration shape {iteration}"
    for a in body.args:
        assert _broadcasts_into(ir.shape_of(a.type), iteration), "input shape"
    for v in term.operands:
        if not (reductions and v is reductions[0].results[0]):
            assert ir.shape_of(v.type) == iteration, "yields have the iteration shape"
            assert isinstance(v.owner, Operation), "yields are computed in the body"


def count_kernels(module: ModuleOp) -> int:
    """The number of ``tracec.kernel`` ops in ``module``."""
    return sum(1 for o in module.walk() if isinstance(o, ir.KernelOp))
