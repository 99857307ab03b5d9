"""Dead-code elimination in one backward sweep (``DeadCode``).

xDSL's ``dce`` (``region_dce``) propagates liveness to a fixed point and
asks every operation for its memory effects; on a traced training step of
tens of thousands of operations that was ~6% of a cold compile.  Traced
IR is almost all straight-line blocks, where one sweep from the last
operation to the first finds everything dead: an operation is erased when
none of its results is used (checked first: cheap, and false for most
operations) and xDSL's ``would_be_trivially_dead`` says it has no effect
beyond its results.  Nested regions are swept before the operation that
holds them is looked at, so uses inside them are gone when they are dead.

What the sweep leaves that the fixed point removes: values dead only in
a cycle (a loop-carried block argument feeding itself), and, in regions
of several blocks, uses in a block swept later.  Both are kept, which is
correct; the pipeline's IR has neither in the ops it traces.
"""
from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Region
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import would_be_trivially_dead

__all__ = ["DeadCode", "sweep_region"]


def sweep_region(region: Region) -> bool:
    """Erase the dead operations of ``region`` (and of regions inside it);
    whether any was erased."""
    changed = False
    for block in reversed(region.blocks):
        op = block.last_op
        while op is not None:
            prev = op.prev_op
            if all(r.first_use is None for r in op.results) and would_be_trivially_dead(op):
                block.erase_op(op, safe_erase=False)
                changed = True
            else:
                for r in op.regions:
                    changed |= sweep_region(r)
            op = prev
    return changed


class DeadCode(ModulePass):
    """``dce`` in one sweep (module docstring)."""

    name = "tracec-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        sweep_region(op.body)
