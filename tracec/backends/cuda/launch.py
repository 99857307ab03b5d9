"""The GPU launch model, written once and built for two targets.

A kernel is emitted against a ``Launch``: the block's index and the grid's
size (``block_id()``, ``num_blocks()``), *thread sections*
(``threads(body)``: ``body(tid)`` runs for every thread of the block,
followed by a barrier unless ``sync=False``), shared memory
(``shared(elt, n)``) and per-thread values that live across barriers
(``private(elt)``).  Code outside a thread section is *uniform*: it may
depend on the block only (grid-stride loops over tiles or outputs, tree
steps), never on the thread, and writes memory only inside sections.

* ``DeviceLaunch`` (NVPTX): every thread runs the whole kernel; the indices
  are the ``llvm.nvvm.read.ptx.sreg.*`` intrinsics, a section is its body
  followed by ``barrier0``, shared memory is one ``addrspace(3)`` buffer
  per module and a private value is a one-element stack slot (registers
  after SROA).
* ``HostLaunch`` (the emulation, host CPU): the kernel function takes the
  block count and loops over the blocks itself; a section is a loop over
  the block's threads, so every thread finishes a section before any
  starts the next -- exactly the guarantee of a barrier -- shared memory
  is a stack array and a private value an array indexed by the thread.

Invariant: a kernel written to this contract computes the same on both
targets (up to the order of float sums across threads, which both fix the
same way: the tree reductions in ``kernels.py`` are part of the code).
"""
from __future__ import annotations

from tracec.backends.cpu.builder import I8, I32, I64, PTR, FuncBuilder, bits_of

__all__ = ["DeviceLaunch", "HostLaunch", "SHARED_SYMBOL", "shared_definition"]

#: The function returning the module's shared-memory buffer (a generic
#: pointer; xDSL 0.74's converter cannot address an ``addrspace(3)`` global,
#: so the buffer and this accessor are LLVM IR text, ``shared_definition``).
SHARED_SYMBOL = "tracec_shared_base"


def shared_definition(nbytes: int) -> str:
    """LLVM IR defining the module's shared buffer of ``nbytes`` bytes and
    its accessor (spliced in place of the accessor's declaration)."""
    n = max(nbytes, 16)
    return (f"@tracec_shared = internal addrspace(3) global [{n} x i8] undef, align 16\n"
            f"define internal ptr @{SHARED_SYMBOL}() alwaysinline {{\n"
            f"  ret ptr addrspacecast (ptr addrspace(3) @tracec_shared to ptr)\n}}")


class _Launch:
    """What both targets share: shared-memory carving and private values."""

    def __init__(self, fb: FuncBuilder, block: int):
        self.fb = fb
        #: threads per block (a compile-time constant, the launch's blockDim.x)
        self.block = block
        self.shared_bytes = 0

    def _carve(self, elt, n: int) -> int:
        off = (self.shared_bytes + 15) // 16 * 16
        self.shared_bytes = off + n * max(bits_of(elt) // 8, 1)
        return off

    def grid_stride(self, start, total, step, body) -> None:
        """``for i in range(start, total, step): body(i)`` with run-time
        ``start`` and ``step`` (i64 values)."""
        fb = self.fb
        fb.while_loop(lambda i: fb.icmp("slt", i, total),
                      lambda i: (body(i), [fb.add(i, step)])[1], [start])


class DeviceLaunch(_Launch):
    """Device code for the NVPTX target (see the module docstring)."""

    def _sreg(self, name: str):
        fb = self.fb
        return fb.cast("zext", fb.intr(f"llvm.nvvm.read.ptx.sreg.{name}", [], I32), I64)

    def block_id(self):
        return self._sreg("ctaid.x")

    def num_blocks(self):
        return self._sreg("nctaid.x")

    def threads(self, body, sync: bool = True) -> None:
        body(self._sreg("tid.x"))
        if sync:
            self.fb.intr("llvm.nvvm.barrier0", [], None)

    def shared(self, elt, n: int):
        fb = self.fb
        off = self._carve(elt, n)
        fb.mb.declare(SHARED_SYMBOL, [], PTR)
        base = fb.call(SHARED_SYMBOL, [], PTR)
        return fb.gep(base, fb.i64(off), I8)

    def private(self, elt):
        p = self.fb.alloca(elt, 1, max(bits_of(elt) // 8, 1))
        return lambda tid: p


class HostLaunch(_Launch):
    """Host code emulating a launch; ``bid`` and ``nblocks`` are the block
    loop's variable and bound, set by ``kernels.build_kernel``."""

    bid = None
    nblocks = None

    def block_id(self):
        return self.bid

    def num_blocks(self):
        return self.nblocks

    def threads(self, body, sync: bool = True) -> None:
        fb = self.fb
        fb.for_range(fb.i64(0), fb.i64(self.block), lambda t: body(t) and None)

    def shared(self, elt, n: int):
        self._carve(elt, n)
        return self.fb.alloca(elt, n, 16)

    def private(self, elt):
        fb = self.fb
        p = fb.alloca(elt, self.block, 16)
        return lambda tid: fb.gep(p, tid, elt)
