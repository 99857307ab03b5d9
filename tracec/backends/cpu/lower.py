"""The lowering pass: optimized tracec IR -> xDSL ``llvm`` dialect.

One module holds one exported entry function (the C ABI in ``runtime.py``)
and one internal *kernel* function per loop nest::

    i32 @k(ptr noalias %buf0, ..., ptr %err, i64 %lo, i64 %hi)

A kernel runs its outermost loop over ``[lo, hi)``, so the entry either
calls it once over the whole range or, for large kernels, through
the module's ``run_for`` (see ``parallel.py``), which splits the range across
threads.
Kernels return 0 or an error code (1 + an index into the signature's
``errors``).  Buffers are planned by ``plan.py``; each kernel sees only
its buffers' base pointers, one argument per distinct buffer (marked
``noalias``: no kernel writes a buffer it reads, except an output donated
to the input it is computed from elementwise, which is then the same
argument).

What each op becomes: elementwise chains, reductions, movement ops and
``tracec.kernel`` bodies become loop programs (``fuse.py`` / ``loops.py``);
a kernel body that cannot be one loop program is lowered op by op with its
intermediates in the workspace; index ops, argmax/argmin, argsort and matmul have
their own emitters.  A ``transpose`` of the last two axes that only matmuls
read is not materialized: the matmul reads its source transposed (through
the GEMM's packing); other transposes that move the innermost axis are
cache-blocked kernels (``transpose.py``).  ``lower_module(donate=...)``
lets outputs that are new values of inputs (state updates) be computed in
place when ``_donations`` finds it safe.  Errors name the op, its types and
the user's file:line.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from tracec import dtypes as dt
from tracec import ir, symbolic
from tracec.backends.cpu import (collectives, gemm_small, indexing, matmul, padsum, parallel,
                                 profiling, recurrent, scalar, transpose)
from tracec.backends.cpu.builder import I1, I8, I32, I64, PTR, ModuleBuilder
from tracec.backends.cpu.codegen import PYOBJECT_DATA_OFFSET
from tracec.backends.cpu.fuse import REDUCE_KIND, NotFusable, ProgramBuilder, splat_value
from tracec.backends.cpu.loops import LoopProgram, check_messages, emit_program
from tracec.backends.cpu.plan import Plan, Step, Storage, plan_buffers
from tracec.backends.cpu.scalar import LoweringError

__all__ = ["lower_module", "LowerToLLVM", "Lowered", "LoweringError"]

#: Kernels with less estimated work (element operations) run on one thread.
PARALLEL_WORK = 1 << 18


def describe(op: Operation) -> str:
    """``tracec.add (f32[4,8] x, f32[8] model.0.bias) -> f32[4,8] at
    file.py:12:4``: operands that are the function's arguments by name."""
    ins = ", ".join(ir.format_type(v.type) + (f" {n}" if (n := _origin_name(v)) else "")
                    for v in op.operands)
    outs = ", ".join(ir.format_type(t) for t in op.result_types)
    return f"{op.name} ({ins}) -> {outs} at {ir.format_loc(op)}"


def _origin_name(v: SSAValue, depth: int = 32, memo: dict | None = None) -> str | None:
    """The name of the function argument ``v`` is (``y``), or is computed
    from alone (``from y``: a reshape, cast or transpose of it, or a kernel
    whose operands all come from it alone), seen through kernel bodies.
    ``memo`` keeps each (value, depth)'s answer for one call: kernels share
    operands, and without it a deep graph is walked once per path
    (exponentially many)."""
    memo = {} if memo is None else memo
    key = (id(v), depth)
    if key not in memo:
        memo[key] = _origin_name_walk(v, depth, memo)
    return memo[key]


def _origin_name_walk(v: SSAValue, depth: int, memo: dict) -> str | None:
    through = False
    for _ in range(depth):
        if isinstance(v, BlockArgument):
            parent = v.block.parent_op()
            if isinstance(parent, ir.KernelOp):
                v = parent.operands[v.index]
                continue
            n = ir.value_name(v)
            return None if n is None else (f"from {n}" if through else n)
        op = v.owner
        if isinstance(op, ir.KernelOp) and len(op.operands) > 1 and depth > 1:
            # where(y == -100, 0, y): several operands, one source
            names = {_origin_name(o, depth - 1, memo) for o in op.operands}
            names = {n[5:] if n and n.startswith("from ") else n for n in names}
            return f"from {names.pop()}" if len(names) == 1 and None not in names else None
        if not ((isinstance(op, ir.KernelOp) and len(op.operands) == 1)
                or (ir.primitive_name(op) in _VIEWS and op.operands)):
            return None
        v, through = op.operands[0], True
    return None


_VIEWS = frozenset({"reshape", "cast", "transpose", "broadcast_to"})


@dataclass
class Call:
    fn: str
    slots: list          # root values (or ("global", name)) per pointer argument
    n: int               # outermost extent
    parallel: bool
    can_fail: bool
    op: object = None    # the IR op (or copied output index) this call computes
    #: a symbolic kernel's work: run in parallel only where it is at least
    #: PARALLEL_WORK at run time (None: ``parallel`` decides)
    gate: object = None
    #: it fails only before writing anything (a collective's type check)
    fails_before_writing: bool = False
    #: ``((lhs, op, rhs), ...)`` sizes: the call runs only where these hold
    #: at run time (one of several kernels for an op of symbolic size,
    #: chosen per call: ``Kernels.only_where``); empty: always
    when: tuple = ()
    #: a parallel call's chunks are multiples of this many iterations
    align: object = 1


@dataclass
class Lowered:
    module: ModuleOp
    signature: dict
    wide: set             # kernels to vectorize with the widest registers
    helpers: dict = None      # declared name -> its definition as LLVM IR text
    #: kernels whose every call does at most ``SMALL_WORK`` work: compiled
    #: without optimization (``codegen._tune``)
    small: set = frozenset()


def function_key(fn: Operation) -> tuple:
    """An ``llvm.func``'s signature and body as a hashable value: op names,
    properties, attributes, result types, operand wiring and branch targets
    (blocks and values numbered in order); two functions with equal keys
    compute the same thing.  (xDSL attributes are frozen and compare by
    value, so they go into the key as they are: printing them would cost
    more than the LLVM time this saves.)"""
    ids: dict = {}
    blocks: dict = {}
    out: list = [fn.properties.get("function_type"), fn.properties.get("arg_attrs")]
    for region in fn.regions:
        for b in region.blocks:
            blocks[b] = len(blocks)
    for region in fn.regions:
        for b in region.blocks:
            for a in b.args:
                ids[a] = len(ids)
            out.append(tuple(a.type for a in b.args))
            for op in b.ops:
                out.append((op.name, tuple(sorted(op.properties.items())),
                            tuple(sorted(op.attributes.items())),
                            tuple(ids.get(o, -1) for o in op.operands),
                            tuple(blocks.get(x, -1) for x in op.successors),
                            tuple(r.type for r in op.results)))
                for r in op.results:
                    ids[r] = len(ids)
    return tuple(out)


def check_code(kernels, message: str) -> int:
    """The error code of a failed run-time check with this message, made
    once per message by ``kernels.error`` (so kernels reused by their key
    report the same one); a message marked ``INDEX_ERROR`` fails with
    IndexError (``CpuIndexError``), as PyTorch's index checks, one marked
    ``VALUE_ERROR`` with ValueError (``CpuValueError``)."""
    from tracec.ops.elementwise import check_kind
    _, kind, _, message = check_kind(message)
    for k, e in enumerate(kernels.errors):
        if e == [kind, message]:
            return k + 1
    return kernels.error(message, kind)


#: An elementwise kernel no call of which does more work than this
#: (elements) runs in well under a microsecond however it is compiled:
#: it is compiled without optimization (``optnone``: FastISel, no
#: vectorizer, no scheduler), which costs a fraction of O3's compile time.
#: Small models' training steps are mostly such kernels (a test program's
#: 4x8 activations); a model of real sizes has few.
SMALL_WORK = 512


class Kernels:
    """Creates kernel functions and records how the entry calls them."""

    def __init__(self, mb: ModuleBuilder, errors: list, buffer_of=lambda key: key,
                 reuse: "Kernels | None" = None):
        self.mb = mb
        #: the kernels of an earlier lowering of the same module, whose
        #: functions this one may take over (``_take_over``)
        self.reuse = reuse
        #: a function of ``reuse`` -> its name here, once taken over
        self.taken: dict[str, str] = {}
        self.errors = errors
        self.calls: list[Call] = []
        #: slot key -> a hashable name of the buffer it resolves to
        self.buffer_of = buffer_of
        #: a kernel function's structure -> the name it was first emitted under
        self.by_body: dict[tuple, str] = {}
        #: a caller's description of a kernel -> (function name, can fail)
        self.by_key: dict[tuple, tuple] = {}
        #: the conditions of the calls being made (``only_where``)
        self.when = ()
        #: function name -> the most work one of its calls does (a symbolic
        #: amount counts as unbounded): what decides ``Lowered.small``
        self.work: dict[str, float] = {}

    def only_where(self, *conds):
        """``with kernels.only_where((M, "<=", 32), ...):`` the calls made
        inside run only where the sizes satisfy every ``(lhs, op, rhs)`` at
        run time (and the conditions of enclosing ``only_where`` blocks); the
        caller makes other calls for the other sizes: no size guard."""
        kernels = self

        class _Where:
            def __enter__(self):
                self.old = kernels.when
                kernels.when = self.old + tuple(conds)

            def __exit__(self, *exc):
                kernels.when = self.old
                return False
        return _Where()

    def error(self, message: str, kind: str = "value") -> int:
        """Register a run-time failure; its return code."""
        self.errors.append([kind, message])
        return len(self.errors)

    def kernel(self, base: str, slots: list, n: int, body, *, work: int | None = None,
               parallel_ok: bool = True, can_fail: bool = False, align: int = 1,
               key=None, small_ok: bool = False) -> None:
        """Define a kernel over ``slots`` whose outer loop has extent ``n``;
        ``body(fb, ptrs, err, lo, hi, status)`` emits it (``status()``
        returns an i32 stack slot for errors found mid-loop; the kernel
        returns its value).  ``align``: split the range across threads in
        multiples of this many iterations where there are enough of them."""
        name = self.mb.unique(base)
        # Slots that resolve to one buffer (an output donated to an input it
        # is computed from) become one pointer argument: noalias holds.
        unique, where = [], []
        for s in slots:
            c = self.buffer_of(s)
            for i, u in enumerate(unique):
                if self.buffer_of(u) == c:
                    where.append(i)
                    break
            else:
                where.append(len(unique))
                unique.append(s)
        slots = unique
        k = len(slots)
        # (only a kernel whose caller says it may be ``small`` and declares
        # its work: the outer extent alone may hide a long inner loop)
        declared = work if work is not None and small_ok else float("inf")
        work = n if work is None else work
        gate = None
        if isinstance(n, int) and isinstance(work, int):
            par = parallel_ok and n > 1 and work >= PARALLEL_WORK
        else:
            # Symbolic sizes: both versions, chosen per call (no guard).
            par = parallel_ok and symbolic.known(n, "<=", 1) is not True \
                and symbolic.known(work, "<", PARALLEL_WORK) is not True
            if par and not (symbolic.known(n, ">", 1) and
                            symbolic.known(work, ">=", PARALLEL_WORK)):
                gate = (n, work)
        if key is not None:
            # ``key`` names what ``body`` emits: a kernel made before from the
            # same key is called again without building it (xDSL op
            # construction is most of the lowering's time).
            key = (key, tuple(where))
            if key in self.by_key:
                fn, can_fail = self.by_key[key]
                self.mb.release(name)
                self._note_work(fn, declared)
                self._call(fn, slots, n, par, can_fail, k, align, gate)
                return
            taken = self._take_over(key, name)
            if taken is not None:
                if taken != name:
                    self.mb.release(name)
                self.by_key[key] = (taken, False)
                self._note_work(taken, declared)
                self._call(taken, slots, n, par, False, k, align, gate)
                return
        fb = self.mb.function(name, [PTR] * k + [PTR, I64, I64], I32,
                              noalias=[True] * k)
        ptrs, err, lo, hi = [fb.args[i] for i in where], fb.args[k], fb.args[k + 1], fb.args[k + 2]
        fb.sizes = err          # the workspace: symbolic sizes are read from it
        status_slot = []

        def status():
            if not status_slot:
                status_slot.append(fb.stack_slot(I32, fb.i32(0)))
            return status_slot[0]

        body(fb, ptrs, err, lo, hi, status)
        if status_slot:
            fb.ret_(fb.load(status_slot[0], I32, 4))
            can_fail = True
        else:
            fb.ret_(fb.i32(0))
        fb.finish()
        # A kernel identical to one emitted before (the same layer again, an
        # optimizer update of a same-shaped parameter) reuses that function:
        # LLVM's time grows with the distinct kernels, not with depth.
        first = self.by_body.setdefault(function_key(fb.op_), name)
        if first != name:
            self.mb.ops.remove(fb.op_)
            name = first
        if key is not None:
            self.by_key[key] = (name, can_fail)
        self._note_work(name, declared)
        self._call(name, slots, n, par, can_fail, k, align, gate)

    def _take_over(self, key, name: str) -> str | None:
        """Move the function an earlier lowering of this module (``reuse``)
        built for ``key`` into this module, renamed ``name``, and return its
        name here (another's, where an earlier key took it over already);
        None where there is none or it is not self-contained.  The lowering without
        donations (``lower_module``'s second run) emits the same steps in
        the same order, so a key names the same body in both runs, except
        where the body depends on run-wide numbering: a kernel that can fail
        (its error codes) or that calls or addresses a symbol other than a
        plain external declaration (module helpers, the GEMM library,
        globals) is built again."""
        reuse = self.reuse
        if reuse is None or key not in reuse.by_key:
            return None
        old, can_fail = reuse.by_key[key]
        if can_fail:
            return None
        if old in self.taken:
            return self.taken[old]
        funcs = reuse.functions()
        fn = funcs.get(old)
        if fn is None:
            return None
        needs = {}
        for op in fn.walk():
            for prop in ("callee", "global_name"):
                ref = op.properties.get(prop)
                if ref is None:
                    continue
                sym = ref.root_reference.data
                fty = reuse.mb.declared(sym)
                if fty is None or sym in reuse.mb.helpers or sym.startswith("tracec_"):
                    return None
                needs[sym] = fty
        for sym, fty in needs.items():
            self.mb.declare(sym, fty.inputs.data, fty.output)
        del funcs[old]
        fn.detach()
        fn.sym_name = StringAttr(name)
        self.mb.ops.append(fn)
        if old in reuse.mb.wide:
            self.mb.wide.add(name)
        self.taken[old] = name
        return name

    def functions(self) -> dict:
        """Function name -> ``llvm.func`` op of this lowering's module."""
        if getattr(self, "_functions", None) is None:
            self._functions = {op.sym_name.data: op for op in self.mb.ops
                               if isinstance(op, llvm.FuncOp)}
        return self._functions

    def _note_work(self, name: str, work) -> None:
        w = work if isinstance(work, int) else float("inf")
        if w > self.work.get(name, -1):
            self.work[name] = w

    def _call(self, name, slots, n, par, can_fail, k, align, gate=None) -> None:
        if par and gate is not None:    # the serial call too, made where the gate is shut
            gate = (name,) + gate
        self.calls.append(Call(name, list(slots), n, par, can_fail, gate=gate, when=self.when,
                               align=align))

    def program(self, base: str, prog: LoopProgram, slots: list, cost: int = 1) -> None:
        """A kernel running one loop program."""
        n = prog.shape[0] if prog.shape else 1

        # Each run-time check's message (it names the user's line) its own code.
        codes = {m: check_code(self, m) for m in check_messages(prog)}

        def body(fb, ptrs, err, lo, hi, status):
            flags: dict = {}        # a check's message -> i32 slot: OR of its failures
            firsts: dict = {}       # an index check's message -> i64 slot: first failure

            def fail(k: int, message) -> None:
                # The smallest code wins: checks chained on one value
                # (one_hot's sign, then range) report as eager does.
                c = fb.i32(k)
                old = fb.load(status(), I32, 4)
                first = fb.ibin("or", fb.icmp("eq", old, fb.i32(0)), fb.icmp("ugt", old, c))
                fb.store(fb.select(first, c, old), status(), 4)
                if message in firsts:
                    # the index its message names (the runtime's {index}):
                    # read again at the first failing point
                    value = ev.value_at(message, fb.load(firsts[message], I64, 8))
                    fb.store(fb.select(first, value, fb.load(err, I64, 8)), err, 8)

            def on_error(cond, message, value=None, position=None):
                # A check ORs its failures into a flag, tested after the loop:
                # a reduction the loop vectorizes (a branch per element would
                # not, making the check cost 4x the ops it guards).
                if message not in flags:
                    flags[message] = fb.stack_slot(I32, fb.i32(0))
                slot = flags[message]
                fb.store(fb.ibin("or", fb.load(slot, I32, 4), fb.cast("zext", cond, I32)),
                         slot, 4)
                if position is not None:
                    # an index check: the first failing position, a min
                    # reduction (vectorizes as the flag's OR does)
                    if message not in firsts:
                        firsts[message] = fb.stack_slot(I64, fb.i64(_NO_POSITION))
                    at = firsts[message]
                    cand = fb.select(cond, position, fb.i64(_NO_POSITION))
                    old = fb.load(at, I64, 8)
                    fb.store(fb.select(fb.icmp("slt", cand, old), cand, old), at, 8)
            ev = emit_program(fb, prog, ptrs, lo, hi, on_error if codes else None)
            for message, slot in flags.items():
                fb.if_then(fb.icmp("ne", fb.load(slot, I32, 4), fb.i32(0)),
                           lambda k=codes[message], m=message: fail(k, m))
        # The program's dataclass repr describes it completely (shape,
        # nodes, accesses): the key of what emit_program builds.
        # Only an elementwise program may be ``small``: a reduction compiled
        # without optimization sums in another order than O3's vectorized
        # tree (PointNet's compiled step then left eager's tolerance).
        self.kernel(base, slots, n, body, work=prog.size * cost,
                    parallel_ok=prog.parallel_ok, key=("program", prog.body_key()),
                    small_ok=not prog.reductions)

        if cost > 1:
            # Compute-bound (transcendental math): worth the widest vectors.
            self.mb.wide.add(self.calls[-1].fn)


#: The first failing position of an index check that has not failed.
_NO_POSITION = (1 << 63) - 1

_COSTLY = frozenset({"exp", "expm1", "log", "log1p", "tanh", "logistic", "erf", "sin", "cos", "pow", "sqrt",
                     "rsqrt", "div"})


class Lowering:
    def __init__(self, module: ModuleOp, symbol: str, profile: bool = False,
                 reuse: Kernels | None = None):
        #: A profiling build: the entry times every kernel call (profiling.py).
        self.profile = profile
        fns = [op for op in module.ops if isinstance(op, func.FuncOp)]
        if len(fns) != 1:
            raise LoweringError(f"the cpu backend expects one function, found {len(fns)}")
        self.fn = fns[0]
        self.symbol = symbol
        self.mb = ModuleBuilder(symbol + "_")
        # The GEMM routines come from a library compiled once (gemm_lib).
        self.mb.use_libraries = os.environ.get("TRACEC_GEMM_LIBRARY", "1") != "0"
        self.errors: list[list[str]] = []
        self.kernels = Kernels(self.mb, self.errors, self._buffer_of, reuse)
        self.plan = Plan()
        self.globals: dict[SSAValue, str] = {}
        self.programs: dict[Operation, tuple] = {}
        self.mm_operands: dict[Operation, list] = {}
        self.folded_views: set = set()            # read only through pad / concatenate
        #: slices read only by fused kernels, not (yet) materialized: each
        #: kernel program reads their source strided (``_materialize_views``
        #: gives one a step where a reader is not one program)
        self.kernel_views: set = set()
        #: strided slices of one source copied by one step: first -> all
        self.slice_groups: dict[Operation, list] = {}
        self.grouped_slices: set = set()
        self.movement_inside: dict[Operation, frozenset] = {}
        #: fused kernels starting with a sum of zero pads (padsum.py), and
        #: those pads (they get no step of their own)
        self.padsums: dict[Operation, padsum.PadSum] = {}
        self.padsum_pads: set = set()
        #: matrix transposes materialized for short matmuls to read
        self.kept_transposes: set = set()

    # --- linearization --------------------------------------------------------------

    def _linearize(self, block) -> list[SSAValue] | None:
        """Append steps for the ops of ``block``; returns the returned values."""
        plan = self.plan
        for op in block.ops:
            if isinstance(op, ir.KernelOp):
                ps = padsum.match(op)
                if ps is not None:
                    self.padsums[op] = ps
                    self.padsum_pads.update(ps.pads)
        for op in block.ops:
            if isinstance(op, (func.ReturnOp, ir.YieldOp)):
                return list(op.operands)
            if isinstance(op, ir.ConstantOp):
                continue
            if isinstance(op, ir.BackwardOp):
                raise LoweringError(f"{describe(op)}: tracec.backward must be expanded by "
                                    "the autodiff pass before lowering")
            if isinstance(op, ir.KernelOp):
                if op in self.padsums and self._padsum_steps(op):
                    continue
                if self._fusable(op):
                    plan.steps.append(Step("program", op, self._kernel_reads(op.operands),
                                           list(op.results)))
                else:
                    self._materialize_views(op)
                    body = op.body.block
                    for a, v in zip(body.args, op.operands):
                        plan.alias[a] = v
                    yields = self._linearize(body)
                    for r, y in zip(op.results, yields):
                        plan.alias[r] = y
                continue
            name = ir.primitive_name(op)
            if name is None:
                raise LoweringError(f"{op.name} at {ir.format_loc(op)}: the cpu backend "
                                    "cannot lower this op")
            if name == "reshape":
                plan.alias[op.results[0]] = op.operands[0]
                continue
            if op in self.grouped_slices:
                continue        # copied with the first of its group
            if name == "broadcast_to" and indexing.accumulate_fill(op.results[0]) is not None:
                continue       # filled by the index ops that read it
            if name == "transpose" and self._folds_into_matmuls(op) and \
                    not self._kept_for_short_matmuls(op):
                continue
            if indexing.folds_into_kernels(op, self.kernel_views):
                self.kernel_views.add(op)
                continue
            if indexing.folds_into_movement(op):
                self.folded_views.add(op)
                continue
            if op in self.padsum_pads:
                continue
            if name in indexing.MOVEMENT:
                reads, inside = indexing.movement_reads(op, self.folded_views)
                self.movement_inside[op] = frozenset(inside)
                plan.steps.append(Step("op", op, reads, list(op.results)))
                continue
            if name == "slice":
                group = indexing.sibling_slices(op, self.kernel_views)
                if len(group) > 1:
                    self.slice_groups[op] = group
                    self.grouped_slices.update(group)
                    plan.steps.append(Step("slices", op, [op.operands[0]],
                                           [o.results[0] for o in group]))
                    continue
            if name == "matmul":
                srcs = self.mm_operands[op] = [self._matmul_operand(v) for v in op.operands]
                plan.steps.append(Step("op", op, [v for v, _ in srcs], list(op.results)))
                continue
            plan.steps.append(Step("op", op, list(op.operands), list(op.results)))
        return None

    # --- transposes read by matmuls -------------------------------------------------

    @staticmethod
    def _matrix_transpose(op) -> bool:
        return (isinstance(op, Operation) and ir.primitive_name(op) == "transpose"
                and matmul.swaps_last_two(ir.op_params(op)["perm"]))

    def _folds_into_matmuls(self, op) -> bool:
        """A transpose of the last two axes that only matmuls read (directly
        or through more such transposes) is never materialized: they read
        its source transposed (``_matmul_operand``)."""
        return self._matrix_transpose(op) and all(
            ir.primitive_name(u.operation) == "matmul" or self._folds_into_matmuls(u.operation)
            for u in op.results[0].uses)

    def _kept_for_short_matmuls(self, op) -> bool:
        """A weight's transpose (``[N, K]`` -> ``[K, N]``) that several short
        matmuls read as B (an RNN's ``h @ W_hh.T``, once per time step): it is
        materialized once, so that each product runs the unpacked small-M
        kernel (``gemm_small``: B stored ``[K, N]``) instead of packing
        (transposing) the whole weight for a few rows of A every time."""
        if op in self.kept_transposes:
            return True
        src, res = op.operands[0], op.results[0]
        shape = ir.shape_of(src.type)
        uses = list(res.uses)
        if len(shape) != 2 or not all(isinstance(n, int) for n in shape) or len(uses) < 2:
            return False
        d = ir.dtype_of(res.type)
        K, N = shape[1], shape[0]
        for u in uses:
            mm = u.operation
            if ir.primitive_name(mm) != "matmul" or u.index != 1 or mm.operands[0] is res:
                return False
            ashape = ir.shape_of(mm.operands[0].type)
            M = math.prod(ashape[:-1]) if all(isinstance(n, int) for n in ashape) else None
            if M is None or not gemm_small.suitable(d, M, N, K, False):
                return False
        self.kept_transposes.add(op)
        return True

    def _matmul_operand(self, v: SSAValue) -> tuple[SSAValue, bool]:
        """The value a matmul reads for operand ``v`` and whether it reads it
        transposed: through chains of last-two-axes transposes (and aliases
        of the same shape), whether or not those are materialized for other
        users."""
        trans = False
        while True:
            while v in self.plan.alias and \
                    ir.shape_of(self.plan.alias[v].type) == ir.shape_of(v.type):
                v = self.plan.alias[v]
            if not self._matrix_transpose(v.owner) or v.owner in self.kept_transposes:
                return v, trans
            v = v.owner.operands[0]
            trans = not trans

    def _padsum_steps(self, op: ir.KernelOp) -> bool:
        """Steps for a kernel starting with a sum of zero pads: the sum
        (into the kernel's result, or its own buffer that the rest of the
        kernel, one loop program, reads); False (after steps for its pads)
        where the rest is not one program."""
        ps = self.padsums[op]
        plan = self.plan
        self._materialize_views(op)
        reads = padsum.reads(self, ps)
        if ps.whole:
            plan.steps.append(Step("padsum", op, reads, [op.results[0]]))
            return True
        if self._fusable(op, exclude=frozenset(ps.adds)):
            plan.steps.append(Step("padsum", op, reads, [ps.total]))
            rest = [v for v in op.operands if v.owner not in ps.pads] + [ps.total]
            plan.steps.append(Step("program", op, rest, list(op.results)))
            return True
        for p in ps.pads:
            self.padsum_pads.discard(p)
            preads, inside = indexing.movement_reads(p, self.folded_views)
            self.movement_inside[p] = frozenset(inside)
            plan.steps.append(Step("op", p, preads, list(p.results)))
        del self.padsums[op]
        return False

    def _kernel_reads(self, values) -> list:
        """The values a program step reads: a kernel view's source for it."""
        return [v.owner.operands[0] if v.owner in self.kernel_views else v for v in values]

    def _materialize_views(self, op: ir.KernelOp) -> None:
        """A step for each pending kernel view ``op`` reads (``op`` is not
        one program): later readers read the copy."""
        for v in op.operands:
            if v.owner in self.kernel_views:
                self.kernel_views.discard(v.owner)
                self.plan.steps.append(Step("op", v.owner, [v.owner.operands[0]], [v]))

    def _fusable(self, op: ir.KernelOp, exclude: frozenset = frozenset()) -> bool:
        """Whether ``op`` is one loop program (kept for ``_program_step``),
        its ``exclude`` ops read from memory rather than computed."""
        try:
            self.programs[op] = self._kernel_program(op, exclude)
            return True
        except NotFusable:
            return False

    # --- storage ---------------------------------------------------------------------

    def slot_value(self, v: SSAValue):
        """The key the entry function resolves to a base pointer."""
        r = self.plan.root(v)
        if isinstance(r.owner, ir.ConstantOp):
            return ("global", self._global(r.owner))
        return r

    def _buffer_of(self, key):
        if isinstance(key, SSAValue):
            st = self.plan.storage.get(key)
            if st is not None and st.kind in ("input", "output"):
                return (st.kind, st.index)
        return key

    def _global(self, op: ir.ConstantOp) -> str:
        v = op.results[0]
        name = self.globals.get(v)
        if name is None:
            arr = ir.constant_array(op.value)
            d = ir.dtype_of(v.type)
            if d is dt.bool_:
                arr = arr.astype("u1")
            raw = arr.astype(d.np.newbyteorder("<") if d is not dt.bool_ else "u1").tobytes()
            name = self.mb.global_constant("const", scalar.storage_type(d), max(arr.size, 1),
                                           raw or bytes(scalar.itemsize(d)))
            self.globals[v] = name
        return name

    # --- programs ----------------------------------------------------------------------

    def _builder(self, shape, reduced, inside, slots, subst=None):
        def slot_of(v):
            key = self.slot_value(v)
            for i, s in enumerate(slots):
                if s is key or s == key:
                    return i
            slots.append(key)
            return len(slots) - 1

        def const_slot(op):
            return slot_of(op.results[0])
        return ProgramBuilder(shape, reduced, inside, slot_of, const_slot, subst)

    def _kernel_program(self, op: ir.KernelOp, exclude: frozenset = frozenset()):
        body = op.body.block
        inside = {o for o in body.ops if not isinstance(o, ir.YieldOp) and o not in exclude}
        yields = list(body.last_op.operands)
        env = dict(zip(body.args, op.operands))
        subst = {a: v for a, v in env.items() if v.owner in self.kernel_views}
        inside.update(v.owner for v in subst.values())
        reds = [y.owner for y in yields if isinstance(y.owner, Operation)
                and y.owner in inside and ir.primitive_name(y.owner) in REDUCE_KIND]
        for o in inside:
            if ir.primitive_name(o) in REDUCE_KIND or ir.primitive_name(o) in (
                    "argmax", "argmin"):
                if o not in reds:
                    raise NotFusable("reduction feeding other ops")
                for r in o.results:
                    if any(u.operation is not body.last_op for u in r.uses):
                        raise NotFusable("reduction feeding other ops")
        if reds:
            shape = ir.shape_of(reds[0].operands[0].type)
            axes = ir.op_params(reds[0])["axes"]
            for r in reds[1:]:
                if ir.shape_of(r.operands[0].type) != shape or ir.op_params(r)["axes"] != axes:
                    raise NotFusable("reductions over different domains")
            reduced = [k in axes for k in range(len(shape))]
        else:
            shape = ir.shape_of(yields[0].type)
            reduced = [False] * len(shape)
        for y in yields:
            if y.owner not in reds and ir.shape_of(y.type) != shape:
                raise NotFusable("results of different shapes")
        slots: list = []
        for a, v in env.items():
            self.plan.alias[a] = v
        pb = self._builder(shape, reduced, inside, slots, subst)
        out_slots = []
        for r in op.results:
            out_slots.append(len(slots))
            slots.append(self.slot_value(r))
        for y, s in zip(yields, out_slots):
            if y.owner in reds:
                pb.reduce(y.owner, s)
            else:
                pb.store(y, s)
        return pb.finish(), slots

    def _program_step(self, op: ir.KernelOp) -> None:
        prog, slots = self.programs.pop(op)
        names = {ir.primitive_name(o) for o in op.body.block.ops}
        cost = 4 if names & _COSTLY else 1
        self.kernels.program("kernel", prog, slots, cost)

    def single_op_program(self, op: Operation, name: str) -> None:
        res = op.results[0]
        shape = ir.shape_of(res.type)
        slots: list = []
        if name in REDUCE_KIND:
            x = op.operands[0]
            axes = ir.op_params(op)["axes"]
            xs = ir.shape_of(x.type)
            if name != "reduce_sum" and math.prod(xs) == 0 and any(xs[a] == 0 for a in axes):
                raise LoweringError(f"{describe(op)}: cannot reduce over a zero-size dimension")
            pb = self._builder(xs, [k in axes for k in range(len(xs))], set(), slots)
            out = len(slots)
            slots.append(self.slot_value(res))
            pb.reduce(op, out)
        else:
            pb = self._builder(shape, [False] * len(shape), {op}, slots)
            out = len(slots)
            slots.append(self.slot_value(res))
            pb.store(res, out)
        prog = pb.finish()
        self.kernels.program(name, prog, slots, 4 if name in _COSTLY else 1)

    # --- driver ------------------------------------------------------------------------

    def run(self, donate: dict[int, int] | None = None) -> Lowered:
        fn = self.fn
        inputs = list(fn.body.block.args)
        returns = self._linearize(fn.body.block)
        sources = _size_sources(inputs)
        if sources:
            # Each symbol's value at this call sits in the workspace after the
            # error slot (builder.SIZES_INDEX), stored by the caller.
            self.mb.symbols = sorted(sources)
            self.plan.reserved += (8 * len(sources) + 63) // 64 * 64
        donated = self._donations(inputs, returns, donate or {})
        plan_buffers(self.plan, inputs, returns, donated)
        for step in self.plan.steps:
            n_calls = len(self.kernels.calls)
            try:
                self._emit_step(step)
                for c in self.kernels.calls[n_calls:]:
                    c.op = step.payload
            except NotFusable as e:
                raise LoweringError(f"{describe(step.payload)}: {e}") from None
            except (TypeError, ValueError, KeyError, NotImplementedError) as e:
                op = step.payload if isinstance(step.payload, Operation) else None
                where = describe(op) if op is not None else "copy"
                raise LoweringError(f"{where}: the cpu backend cannot lower it: {e}") from e
        self._emit_entry(inputs, returns)
        # A call is all-or-nothing for its inputs when no kernel that can fail
        # runs after the first one writing a donated output (into its input).
        written = {self.plan.root(returns[k]) for k in donated}
        calls = self.kernels.calls
        first_write = next((i for i, c in enumerate(calls)
                            if any(not isinstance(s, tuple) and s in written for s in c.slots)),
                           len(calls))
        atomic = not any(c.can_fail and not (i == first_write and c.fails_before_writing)
                         for i, c in enumerate(calls[first_write:], first_write))
        sig = {
            "entry": self.symbol,
            "entry_py": self.symbol + "_py",
            "inputs": [[_dims(a.type), ir.dtype_of(a.type).name] for a in inputs],
            "outputs": [[_dims(v.type), ir.dtype_of(v.type).name] for v in returns],
            "workspace": _size_text(self.plan.workspace),
            "errors": list(self.errors),
            "donated": sorted([k, j] for k, j in donated.items()),
            "atomic": atomic,
        }
        if "pool_slot" in self.mb.shared:
            sig["pool_slot"] = self.mb.shared["pool_slot"]
        if self.mb.libraries:
            # The GEMM library's routines the code calls: the loader
            # resolves them (gemm_lib.addresses), tracec build links them.
            sig["libraries"] = sorted(self.mb.libraries)
        if "comms" in self.mb.shared:
            # communicator handles, written to the workspace by the caller
            # (collectives.COMMS_INDEX)
            sig["comms"] = list(self.mb.shared["comms"])
        if self.profile:
            sig.update(profiling.signature_info(self, calls))
        if sources:
            # symbol -> [input, dim] it is read from (the order of the words)
            sig["symbols"] = [[name, *sources[name]] for name in self.mb.symbols]
        small = {fn for fn, w in getattr(self.kernels, "work", {}).items() if w <= SMALL_WORK}
        return Lowered(self.mb.module(), sig, set(self.mb.wide), dict(self.mb.helpers), small)

    # --- donated outputs ----------------------------------------------------------------

    def _donations(self, inputs, returns, donate: dict[int, int]) -> dict[int, int]:
        """The requested ``output -> input`` donations that are safe: the
        output is computed by one elementwise step that reads the input only
        at the index it writes (or not at all), no later step and no return
        reads the input, and the two have one type.  The output then lives
        in the input's buffer (``plan_buffers``)."""
        if not donate:
            return {}
        root = self.plan.root
        writer: dict = {}
        last_read: dict = {}
        for n, s in enumerate(self.plan.steps):
            for w in s.writes:
                writer.setdefault(root(w), n)
            for r in s.reads:
                last_read[root(r)] = n
        ret_roots = [root(v) for v in returns]
        out: dict[int, int] = {}
        for k, j in sorted(donate.items()):
            if not (0 <= k < len(returns) and 0 <= j < len(inputs)) or j in out.values():
                continue
            r, x = ret_roots[k], inputs[j]
            if r.type != x.type or ret_roots.count(r) != 1 or x in ret_roots:
                continue
            n = writer.get(r)
            if n is None or last_read.get(x, -1) > n:
                continue
            if self._writes_in_place(self.plan.steps[n], r, x):
                out[k] = j
        return out

    def _writes_in_place(self, step: Step, r: SSAValue, x: SSAValue) -> bool:
        """Whether ``step`` may write ``r`` over ``x``'s buffer: it reads
        ``x`` (if at all) only at the index where it writes ``r``."""
        if step.kind == "op":
            op = step.payload
            name = ir.primitive_name(op)
            if name in ("all_reduce", "broadcast"):
                return True      # MPI_IN_PLACE (collectives.py)
            if name not in scalar.ELEMENTWISE:
                return False
            return all(ir.shape_of(u.type) == ir.shape_of(r.type)
                       for u in op.operands if self.plan.root(u) is x)
        if step.kind != "program":
            return False
        prog, slots = self.programs[step.payload]
        if prog.reductions:
            return False
        si = [i for i, s in enumerate(slots) if s is x]
        so = [i for i, s in enumerate(slots) if s is r]
        stores = [a for _, a in prog.stores if a.slot in so]
        if len(so) != 1 or len(stores) != 1:
            return False
        want = stores[0]
        for node in prog.nodes:
            a = node.access
            if a is None or a.slot not in si:
                continue
            if node.kind != "load" or a.offset != want.offset or a.strides != want.strides \
                    or a.dtype is not want.dtype:
                return False
        return True

    def _emit_step(self, step: Step) -> None:
        if step.kind == "padsum":
            padsum.emit(self, self.padsums[step.payload], step.writes[0])
            return
        if step.kind == "program":
            self._program_step(step.payload)
            return
        if step.kind == "copy":
            self._emit_copy(step.payload, step.reads[0])
            return
        if step.kind == "slices":
            indexing.emit_slices(self, self.slice_groups[step.payload])
            return
        op = step.payload
        name = ir.primitive_name(op)
        if name == "transpose" and math.prod(ir.shape_of(op.results[0].type)):
            blocked = transpose.plan_transpose(ir.shape_of(op.operands[0].type),
                                               ir.op_params(op)["perm"])
            if blocked is not None:
                transpose.emit_transpose(self, op, *blocked)
                return
        if name in scalar.ELEMENTWISE or name in ("broadcast_to", "transpose", "slice",
                                                  "iota", "full", "random_uniform") \
                or name in REDUCE_KIND:
            self.single_op_program(op, name)
        elif name in ("pad", "concatenate"):
            indexing.emit_movement(self, op, name, self.movement_inside.get(op, frozenset()))
        elif name in ("take", "gather") or name in indexing.ACCUMULATE:
            indexing.emit_index(self, op, name)
        elif name in ("argmax", "argmin"):
            indexing.emit_arg(self, op, name)
        elif name == "argsort":
            indexing.emit_argsort(self, op)
        elif name == "matmul":
            matmul.emit_matmul(self, op, self.mm_operands.get(op))
        elif name in collectives.COLLECTIVES:
            collectives.emit_collective(self, op, name)
        elif name == "rnn_scan":
            recurrent.emit_rnn_scan(self, op)
        elif name == "rnn_scan_grad":
            recurrent.emit_rnn_scan_grad(self, op)
        else:
            raise LoweringError(f"{describe(op)}: no cpu lowering for {name}")

    def _emit_copy(self, out_index: int, v: SSAValue) -> None:
        """Output ``out_index`` := ``v`` (an input, a constant, or a value
        already returned elsewhere)."""
        r = self.plan.root(v)
        d = ir.dtype_of(v.type)
        shape = ir.shape_of(v.type)
        target = ("output", out_index)
        if isinstance(r.owner, ir.ConstantOp) and splat_value(r.owner) is not None:
            slots = [target]
            pb = self._builder(shape, [False] * len(shape), set(), slots)
            pb.store_const(splat_value(r.owner), d, 0)
            self.kernels.program("fill", pb.finish(), slots)
            return
        nbytes = math.prod(shape) * scalar.itemsize(d)
        src = self.slot_value(v)

        def body(fb, ptrs, err, lo, hi, status):
            if nbytes:
                fb.intr("llvm.memcpy", [ptrs[0], ptrs[1], fb.i64(nbytes), fb.const(False, I1)],
                        None, overload=[PTR, PTR, I64])
        self.kernels.kernel("copy", [target, src], 1, body)

    def _emit_entry(self, inputs, returns) -> None:
        fb = self.mb.function(self.symbol, [PTR, PTR, PTR, I64], I32, exported=True)
        ins, outs, ws, nthreads = fb.args
        fb.sizes = ws
        cache: dict = {}

        def ptr(key):
            k = key if isinstance(key, tuple) else ("v", key)
            p = cache.get(k)
            if p is None:
                if isinstance(key, tuple) and key[0] == "global":
                    p = fb.addressof(key[1])
                elif isinstance(key, tuple) and key[0] == "output":
                    p = fb.load(fb.gep(outs, fb.i64(key[1]), PTR), PTR, 8)
                else:
                    st: Storage = self.plan.storage[key]
                    if st.kind == "input":
                        p = fb.load(fb.gep(ins, fb.i64(st.index), PTR), PTR, 8)
                    elif st.kind == "output":
                        p = fb.load(fb.gep(outs, fb.i64(st.index), PTR), PTR, 8)
                    else:
                        p = fb.gep(ws, fb.i64(st.index), I8)
                cache[k] = p
            return p

        timer = profiling.EntryTimer(self, fb, ws) if self.profile else None
        for i, c in enumerate(self.kernels.calls):
            args = [ptr(s) for s in c.slots] + [ws]
            if timer:
                timer.start()
            if not c.when:
                rc = _emit_call(fb, c, args, nthreads)
            else:
                # (args and sizes are computed before the branch: later
                # calls reuse them)
                cond = None
                for lhs, op, rhs in c.when:
                    x = fb.icmp(_SIGNED[op], fb.i64(lhs), fb.i64(rhs))
                    cond = x if cond is None else fb.ibin("and", cond, x)
                for x in (c.n, *(c.gate or ())[1:]):
                    fb.i64(x)
                slot = fb.stack_slot(I32, fb.i32(0))
                fb.if_then(cond, lambda: fb.store(_emit_call(fb, c, args, nthreads), slot, 4))
                rc = fb.load(slot, I32, 4)
            if timer:
                timer.stop(i)
            if c.can_fail:
                fb.if_return(fb.icmp("ne", rc, fb.i32(0)), rc)
        if timer:
            timer.finish()
        fb.ret_(fb.i32(0))
        fb.finish()
        self._emit_py_entry(len(inputs), len(returns))

    def _emit_py_entry(self, n_in: int, n_out: int) -> None:
        """``i32 @<entry>_py(PyObject **ins, PyObject **outs, ptr ws, i64 n)``:
        the entry for the Python runtime, which passes the NumPy arrays
        themselves; it reads each array's data pointer (the first field after
        the object header, NumPy's stable ``PyArrayObject`` layout; the
        runtime checks that layout before using this entry) and calls the
        C entry.  It saves the Python side the slow ``a.ctypes.data``."""
        fb = self.mb.function(self.symbol + "_py", [PTR, PTR, PTR, I64], I32, exported=True)
        objs_in, objs_out, ws, nthreads = fb.args
        field = PYOBJECT_DATA_OFFSET // 8
        arrays = []
        for objs, n in ((objs_in, n_in), (objs_out, n_out)):
            arr = fb.alloca(PTR, max(n, 1), 8)
            for i in range(n):
                obj = fb.load(fb.gep(objs, fb.i64(i), PTR), PTR, 8)
                data = fb.load(fb.gep(obj, fb.i64(field), PTR), PTR, 8)
                fb.store(data, fb.gep(arr, fb.i64(i), PTR), 8)
            arrays.append(arr)
        fb.ret_(fb.call(self.symbol, arrays + [ws, nthreads], I32))
        fb.finish()


_SIGNED = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}


def _emit_call(fb, c: Call, args, nthreads):
    """The call of kernel ``c`` (its return code): serial, parallel, or
    gated (parallel where its symbolic work is large enough)."""
    if c.gate is not None:
        serial, n, work = c.gate
        slot = fb.stack_slot(I32, fb.i32(0))
        big = fb.ibin("and", fb.icmp("sgt", fb.i64(n), fb.i64(1)),
                      fb.icmp("sge", fb.i64(work), fb.i64(PARALLEL_WORK)))
        fb.if_else(big,
                   lambda: fb.store(parallel.parallel_call(fb, c.fn, args, fb.i64(n), nthreads,
                                                           c.align), slot, 4),
                   lambda: fb.store(fb.call(serial, args + [fb.i64(0), fb.i64(n)], I32),
                                    slot, 4))
        return fb.load(slot, I32, 4)
    if c.parallel:
        return parallel.parallel_call(fb, c.fn, args, fb.i64(c.n), nthreads, c.align)
    return fb.call(c.fn, args + [fb.i64(0), fb.i64(c.n)], I32)


def _size_text(n):
    """A size for the JSON signature: an int, or a symbolic size's text."""
    return n if isinstance(n, int) else str(n)


def _dims(t) -> list:
    return [_size_text(n) for n in ir.shape_of(t)]


def _size_sources(inputs) -> dict:
    """``{symbol: (input index, dim)}``: where the run time reads each size
    symbol of the function (``symbolic.size_sources``); every symbol in an
    input's shape must have one."""
    out, missing = symbolic.size_sources([ir.shape_of(a.type) for a in inputs])
    if missing:
        raise LoweringError(f"the sizes {sorted(missing)} are not a dimension of any input: "
                            "the cpu backend cannot read them at run time")
    return out


def lower_module(module: ModuleOp, symbol: str = "tracec_main",
                 donate: dict[int, int] | None = None, profile: bool = False) -> Lowered:
    """Lower a module holding one optimized tracec function; ``donate``:
    outputs that may reuse an input's buffer (output index -> input index;
    the signature's ``donated`` lists those found safe).  Invariant: a call
    that fails leaves its inputs unchanged -- donations that would let a
    kernel fail after one wrote its update in place are all dropped
    (``signature["atomic"]``).  ``profile``: a profiling build
    (``profiling.py``), its own executable."""
    # Building a kernel walks its expression DAG recursively, once per op of
    # its longest chain (a 1000-op chain is legal IR: a loop in the user's
    # code).  Python 3.11's calls between Python functions use no C stack,
    # so a higher limit for the lowering is safe.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 100_000))
    try:
        first = Lowering(module, symbol, profile)
        low = first.run(donate)
        if not low.signature["atomic"]:
            # Again without donations, taking over the first run's kernels
            # (most are the same: building them is most of the lowering).
            low = Lowering(module, symbol, profile, reuse=first.kernels).run({})
    finally:
        sys.setrecursionlimit(limit)
    return low


class LowerToLLVM(ModulePass):
    """``tracec-to-llvm``: replaces a module's tracec function by the llvm
    dialect module of the cpu backend (entry function ``tracec_main``)."""

    name = "tracec-to-llvm"

    def apply(self, ctx, op: ModuleOp) -> None:
        lowered = lower_module(op)
        for o in list(op.ops):
            o.detach()
        for o in list(lowered.module.ops):
            o.detach()
            op.body.block.add_op(o)
