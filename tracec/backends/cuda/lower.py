"""Optimized tracec IR -> GPU kernel specs and a host-side launch plan.

The cpu backend's ``Lowering`` does the target-independent work unchanged:
it linearizes the function, builds the fused kernels' loop programs
(``fuse.py``), plans buffers (inputs, outputs, one workspace, constants)
and chooses donated outputs.  This subclass replaces what it emits: each
step becomes a ``KernelSpec`` (``kernels.py``) or a device copy, recorded
in order as the *launch plan*, a JSON-able list the runtimes execute:

* ``{"kind": "kernel", "fn", "refs", "units", "per_block", "block"}``:
  launch ``fn`` on ``ceil(units / per_block)`` blocks (at most
  ``MAX_GRID``) of ``block`` threads, its pointer arguments the buffers
  ``refs``, then ``err`` and the size symbols;
* ``{"kind": "copy", "dst", "src", "nbytes"}``.

A ref is ``["input", i]``, ``["output", i]``, ``["ws", offset]`` (bytes
into the workspace, an int or a size expression) or ``["const", name]``
(``signature["consts"]``: dtype, shape and base64 bytes).  The cpu backend's own
kernels for index ops, argmax/argmin, argsort and pad/concatenate run as
device functions called per thread over their outer range (``_serial`` in
``kernels.py``); collectives raise ``LoweringError`` naming the op and the
user's line.
"""
from __future__ import annotations

import base64
import math
import sys

from tracec import dtypes as dt
from tracec import ir, symbolic
from tracec.backends.cpu import collectives, scalar
from tracec.backends.cpu.fuse import REDUCE_KIND, splat_value
from tracec.backends.cpu.loops import check_messages
from tracec.backends.cpu.lower import Call, Lowering, check_code, describe
from tracec.backends.cpu.matmul import batch_strides
from tracec.backends.cpu.scalar import LoweringError
from tracec.backends.cuda.kernels import BLOCK, TILE, KernelSpec

__all__ = ["lower_for_gpu", "GpuLowered"]

#: Single-op steps that are loop programs (as in the cpu backend).
_PROGRAM_OPS = frozenset({"broadcast_to", "transpose", "slice", "iota", "full",
                          "random_uniform"}) | frozenset(REDUCE_KIND)


def _text(n):
    return n if isinstance(n, int) else str(n)


class _GpuKernels:
    """Stands in for the cpu ``Kernels``: records specs instead of emitting."""

    def __init__(self, low: "GpuLowering"):
        self.low = low
        self.errors = low.errors
        self.calls: list[Call] = []
        self.specs: list[KernelSpec] = []
        self.by_key: dict = {}

    def error(self, message: str, kind: str = "value") -> int:
        self.errors.append([kind, message])
        return len(self.errors)

    def program(self, base, prog, slots, error_msg="", cost=1) -> None:
        code = self.error(error_msg) if error_msg else 0
        checks = {m: check_code(self, m) for m in check_messages(prog)}
        if prog.reductions:
            n_red = math.prod(n for n, r in zip(prog.shape, prog.reduced) if r)
            units = math.prod(n for n, r in zip(prog.shape, prog.reduced) if not r)
            block = BLOCK
            if isinstance(n_red, int):     # a short reduction: a smaller tree
                block = max(32, min(BLOCK, 1 << max(0, (n_red - 1).bit_length())))
            per_block = 1
        else:
            units, block, per_block = prog.size, BLOCK, BLOCK
        key = ("program", repr(prog), code, block)
        self._add(base, key, slots, dict(kind="program", prog=prog, error=code, checks=checks,
                                         block=block, units=units, per_block=per_block),
                  bool(code or checks))

    def kernel(self, base, slots, n, body, *, work=None, parallel_ok=True, can_fail=False,
               align=1, key=None) -> None:
        """A cpu-backend kernel body run by GPU threads (``kernels._serial``)."""
        per = BLOCK * align
        self._add(base, ("serial", id(body)), slots,
                  dict(kind="serial", body=body, n=n, align=align, parallel=parallel_ok,
                       units=n if parallel_ok else 1, per_block=per if parallel_ok else 1,
                       block=BLOCK if parallel_ok else 1), True)

    def matmul(self, slots, mm: dict) -> None:
        mm = dict(mm, reg=matmul_reg(mm["nb"], mm["M"], mm["N"]))
        T = TILE * mm["reg"]
        tiles = mm["nb"] * ((mm["M"] + T - 1) // T) * ((mm["N"] + T - 1) // T)
        key = ("matmul", repr(sorted((k, repr(v)) for k, v in mm.items())))
        self._add("matmul", key, slots, dict(kind="matmul", mm=mm, block=TILE * TILE,
                                             units=tiles, per_block=1), False)

    def _add(self, base, key, slots, fields, can_fail) -> None:
        # Kernels with one body (the same layer again, an optimizer update
        # of a same-shaped parameter) are one function: LLVM's time grows
        # with the distinct kernels only.
        refs = [self.low.ref(s) for s in slots]
        # A donated output shares its input's buffer: then no noalias.
        noalias = len({repr(r) for r in refs}) == len(refs)
        key = (key, noalias)
        name = self.by_key.get(key)
        fresh = name is None
        if fresh:
            name = self.by_key[key] = self.low.mb.unique(base)
        spec = KernelSpec(name=name, refs=refs, noalias=noalias, **fields)
        if fresh:
            self.specs.append(spec)
        self.low.launches.append({"kind": "kernel", "fn": name, "refs": refs,
                                  "units": _text(spec.units), "per_block": spec.per_block,
                                  "block": spec.block})
        self.calls.append(Call(name, list(slots), 1, False, can_fail))


#: Blocks a product should have at least to spread over a GPU's
#: multiprocessors (an H100/H200 has 132) before its tiles grow.
MATMUL_MIN_BLOCKS = 128


def matmul_reg(nb, M, N) -> int:
    """Outputs per thread along each side of a matmul's tile (the tile is
    ``TILE * reg`` square): 4 (64 x 64 tiles, the most reuse of each
    staged element) where both sides fill such a tile and the product
    still has ``MATMUL_MIN_BLOCKS`` tiles, else 2, else 1 (16 x 16 tiles:
    thin or small products keep every multiprocessor busy).  Symbolic sizes
    count where their lower bounds decide it."""
    for reg in (4, 2):
        T = TILE * reg
        tiles = nb * ((M + T - 1) // T) * ((N + T - 1) // T)
        if symbolic.known(M, ">=", T) and symbolic.known(N, ">=", T) and \
                symbolic.known(tiles, ">=", MATMUL_MIN_BLOCKS):
            return reg
    return 1


class GpuLowered:
    """What ``lower_for_gpu`` returns: ``specs`` (distinct kernels, to build
    per target), ``symbols`` (the kernels' size arguments, in order) and the
    JSON-able ``signature`` holding the launch plan (``launches``)."""

    def __init__(self, specs, symbols, signature, where=None):
        self.specs, self.symbols, self.signature = specs, symbols, signature
        #: kernel name -> the op it was first made for, for errors raised
        #: while making code (``describe(op)`` names the user's file:line)
        self.where = where or {}


class GpuLowering(Lowering):
    def __init__(self, module, symbol: str):
        super().__init__(module, symbol)
        self.kernels = _GpuKernels(self)
        self.launches: list[dict] = []
        self.consts: dict[str, list] = {}

    def ref(self, key) -> list:
        if isinstance(key, tuple):
            if key[0] == "global":
                return ["const", key[1]]
            return ["output", key[1]]
        st = self.plan.storage[key]
        if st.kind in ("input", "output"):
            return [st.kind, st.index]
        if st.kind == "ws":
            return ["ws", _text(st.index)]
        raise LoweringError(f"no storage for {key}")

    def _global(self, op) -> str:
        v = op.results[0]
        name = self.globals.get(v)
        if name is None:
            arr = ir.constant_array(op.value)
            d = ir.dtype_of(v.type)
            raw = (arr.astype("u1") if d is dt.bool_ else arr.astype(d.np.newbyteorder("<")))
            name = self.globals[v] = f"const{len(self.consts)}"
            self.consts[name] = [d.name, list(arr.shape),
                                 base64.b64encode(raw.tobytes()).decode()]
        return name

    def _emit_entry(self, inputs, returns) -> None:
        """The launch plan replaces the cpu entry function."""

    def _emit_copy(self, out_index: int, v) -> None:
        r = self.plan.root(v)
        if isinstance(r.owner, ir.ConstantOp) and splat_value(r.owner) is not None:
            super()._emit_copy(out_index, v)        # a fill kernel
            return
        nbytes = math.prod(ir.shape_of(v.type)) * scalar.itemsize(ir.dtype_of(v.type))
        self.launches.append({"kind": "copy", "dst": ["output", out_index],
                              "src": self.ref(self.slot_value(v)), "nbytes": _text(nbytes)})

    def _emit_step(self, step) -> None:
        if step.kind == "program":
            self._program_step(step.payload)
            return
        if step.kind == "copy":
            self._emit_copy(step.payload, step.reads[0])
            return
        if step.kind in ("slices", "padsum"):
            # Steps of several values (a max pool's window taps; a sum over
            # a pad) are loop programs or cpu bodies: the cpu emitters
            # record them through ``_GpuKernels``.  (Taken as one op, only
            # the first tap was written.)
            super()._emit_step(step)
            return
        op = step.payload
        name = ir.primitive_name(op)
        if name in scalar.ELEMENTWISE or name in _PROGRAM_OPS:
            self.single_op_program(op, name)
        elif name == "matmul":
            self._matmul(op, self.mm_operands.get(op))
        elif name in collectives.COLLECTIVES or name in ("rnn_scan", "rnn_scan_grad"):
            # (recurrent layers recorded for cuda run their step loops:
            # ``SCANS`` in this package)
            raise LoweringError(f"{describe(op)}: the cuda backend has no kernel for {name}")
        else:
            super()._emit_step(step)     # index ops, argmax, argsort, pad: cpu bodies

    def _matmul(self, op, operands) -> None:
        res = op.results[0]
        (a, ta), (b, tb) = operands or [(v, False) for v in op.operands]
        ashape, bshape_ = ir.shape_of(op.operands[0].type), ir.shape_of(op.operands[1].type)
        d = ir.dtype_of(res.type)
        if not d.is_floating_point:
            raise LoweringError(f"{describe(op)}: the cuda backend multiplies float matrices "
                                f"only, not {d.name}")
        M, K, N = ashape[-2], ashape[-1], bshape_[-1]
        bshape = ir.shape_of(res.type)[:-2]
        nb = math.prod(bshape)
        if symbolic.known(nb * M * N, "==", 0):
            return
        mm = dict(dtype=d, nb=nb, M=M, N=N, K=K, bshape=tuple(bshape),
                  sa=tuple(batch_strides(bshape, ashape, M * K)),
                  sb=tuple(batch_strides(bshape, bshape_, K * N)), ta=ta, tb=tb)
        self.kernels.matmul([self.slot_value(res), self.slot_value(a), self.slot_value(b)],
                            mm)


def lower_for_gpu(module, symbol: str = "tracec_main", donate=None) -> GpuLowered:
    """Lower a module holding one optimized tracec function (``donate`` as
    in the cpu backend: output index -> input index allowed in place)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 100_000))
    try:
        low = GpuLowering(module, symbol)
        lowered = low.run(donate)
        if not lowered.signature["atomic"]:
            low = GpuLowering(module, symbol)
            lowered = low.run({})
    finally:
        sys.setrecursionlimit(limit)
    sig = dict(lowered.signature, launches=low.launches, consts=low.consts)
    for k in ("entry", "entry_py"):
        sig.pop(k, None)
    where = {}
    for c in low.kernels.calls:
        if c.fn not in where and hasattr(c.op, "operands"):
            where[c.fn] = c.op
    return GpuLowered(low.kernels.specs, list(low.mb.symbols), sig, where)
