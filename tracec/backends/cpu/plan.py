"""Buffer planning: where every tensor of a function lives.

A function's values live in one of four places: an input buffer (function
argument), an output buffer (a returned value is computed straight into the
caller's output array), the workspace (one scratch block per call, reused
by values whose live ranges do not overlap), or a constant global.
``reshape`` results and kernel results that just forward a value *alias*
their source's storage (all buffers are C-contiguous).

A *donated* output (``donated``: output index -> input index, chosen by
the lowering, see ``lower.Lowering._donations``) lives in its input's
buffer: the step that computes it overwrites the input in place, and the
caller gets the input array back as that output.

Invariants: an op never writes a buffer it reads (an op's results are
placed before its dead operands are freed), except a donated output, which
only an elementwise step writes at the indices it reads, after every other
read of that input; workspace offsets are 64-byte aligned and the first 64
bytes are reserved (the error slot: the offending index of a failed bounds
check), then, in a symbolic module, one i64 per size symbol (its value at
this call, stored by the entry function's caller: ``builder.SIZES_INDEX``);
a value returned twice, or a returned input or constant, gets an
explicit copy step.

Symbolic sizes: a value's size and workspace offset may be expressions in
the symbols (``tracec.symbolic.Sym``), computed at run time; a free block
is reused for a value only where its size is known to suffice for every
size of the symbols (``symbolic.known``), so planning adds no guard.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from tracec import ir
from tracec.backends.cpu import scalar
from tracec.symbolic import hint_of, known

__all__ = ["Storage", "Step", "Plan", "plan_buffers", "ERROR_SLOT_BYTES"]

ERROR_SLOT_BYTES = 64


@dataclass(eq=False)
class Storage:
    """Where a root value's bytes live."""
    kind: str            # input | output | ws | global | none
    index: int = 0       # input/output position, or workspace offset
    nbytes: int = 0
    name: str = ""       # global symbol


@dataclass(eq=False)
class Step:
    """One unit of lowering: ``kind`` is "op" (a primitive op), "program"
    (a fused kernel op: ``payload`` its op), or "copy" (``reads[0]`` into
    output ``payload``)."""
    kind: str
    payload: object
    reads: list[SSAValue] = field(default_factory=list)
    writes: list[SSAValue] = field(default_factory=list)


class Plan:
    def __init__(self):
        self.steps: list[Step] = []
        self.alias: dict[SSAValue, SSAValue] = {}
        self.storage: dict[SSAValue, Storage] = {}
        self.workspace = ERROR_SLOT_BYTES
        #: bytes at the start of the workspace not planned (error slot, sizes)
        self.reserved = ERROR_SLOT_BYTES

    def root(self, v: SSAValue) -> SSAValue:
        while v in self.alias:
            v = self.alias[v]
        return v


def nbytes(v: SSAValue) -> int:
    return math.prod(ir.shape_of(v.type)) * scalar.itemsize(ir.dtype_of(v.type))


def plan_buffers(plan: Plan, inputs: list[SSAValue], returns: list[SSAValue],
                 donated: dict[int, int] | None = None) -> None:
    """Fill ``plan.storage`` for every root value used by ``plan.steps``
    and the returns, appending copy steps where a return needs one;
    ``donated`` outputs (already checked safe) take their input's buffer."""
    root = plan.root
    for i, a in enumerate(inputs):
        plan.storage[a] = Storage("input", i, nbytes(a))
    produced = {root(w) for s in plan.steps for w in s.writes}
    bound: set = set()
    copies = []
    for k, i in (donated or {}).items():
        r = root(returns[k])
        plan.storage[r] = Storage("input", i, nbytes(r))
        bound.add(r)
    for j, v in enumerate(returns):
        r = root(v)
        if donated and j in donated:
            continue
        if r in produced and r not in bound:
            plan.storage[r] = Storage("output", j, nbytes(r))
            bound.add(r)
        else:
            copies.append(Step("copy", j, [v], []))
    plan.steps.extend(copies)

    # Live ranges of workspace values, in step order.
    first: dict = {}
    last: dict = {}
    for k, s in enumerate(plan.steps):
        for w in s.writes:
            first.setdefault(root(w), k)
            last[root(w)] = max(last.get(root(w), k), k)
        for r in s.reads:
            last[root(r)] = k
    free: list[tuple[int, int]] = []      # (offset, size)
    top = plan.reserved
    ending: dict[int, list] = {}
    for v, k in last.items():
        ending.setdefault(k, []).append(v)
    for k, s in enumerate(plan.steps):
        for w in s.writes:
            r = root(w)
            if r in plan.storage or first.get(r) != k:
                continue
            size = (nbytes(r) + 63) // 64 * 64
            for i, (off, sz) in enumerate(free):
                if known(sz, ">=", size):
                    plan.storage[r] = Storage("ws", off, nbytes(r))
                    if known(sz, "==", size):
                        free.pop(i)
                    else:
                        free[i] = (off + size, sz - size)
                    break
            else:
                plan.storage[r] = Storage("ws", top, nbytes(r))
                top += size
        for r in ending.get(k, ()):
            st = plan.storage.get(r)
            if st is not None and st.kind == "ws":
                free.append((st.index, (st.nbytes + 63) // 64 * 64))
                free.sort(key=lambda f: hint_of(f[0]))   # (no guard: order only)
                free[:] = _merge(free)
    plan.workspace = top


def _merge(free):
    out = []
    for off, sz in free:
        if out and known(out[-1][0] + out[-1][1], "==", off):
            out[-1] = (out[-1][0], out[-1][1] + sz)
        else:
            out.append((off, sz))
    return out
