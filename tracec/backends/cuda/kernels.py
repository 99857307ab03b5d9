"""GPU kernels: loop programs and matmuls in the launch model of ``launch.py``.

Every kernel is a function ``(ptr buf..., ptr err, i64 sym...)`` (the
emulation adds ``i64 nblocks``) over the buffers of its ``KernelSpec``;
``sym`` are the module's size symbols (a symbolic size is a kernel
argument: ``FuncBuilder``'s symbol cache is seeded with them), ``err`` the
workspace's error word (a failing check stores its code there).

* elementwise (a loop program without reductions): a grid-stride loop over
  the domain's elements, each thread decomposing its linear index;
* reductions: one block per output element (a grid-stride loop over the
  outputs), its threads striding over the reduced elements with a private
  accumulator, then a tree in shared memory (``block/2, block/4, ..., 1``,
  a barrier between steps); thread 0 stores the result;
* a cpu-backend kernel (index ops, argmax, argsort: ``kind="serial"``):
  its body as a device function over ``[lo, hi)``, called per thread for
  chunks of its outer range (which the cpu backend splits across threads
  too, so they are independent);
* matmul: 16x16 output tiles, one per block (grid-stride over batch x
  tiles), A and B staged through shared memory a 16-wide K slice at a time
  (two barriers per slice), one output element per thread.

``KernelSpec.units`` / ``per_block`` say how many blocks a launch needs
(``ceil(units / per_block)``, capped at ``MAX_GRID``; the grid-stride loops
cover the rest).  Invariant: a kernel writes exactly what the CPU backend's
kernel for the same program writes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tracec import dtypes as dt
from tracec.backends.cpu import scalar
from tracec.backends.cpu.builder import I1, I8, I32, I64, PTR, FuncBuilder, bits_of
from tracec.backends.cpu.loops import LoopProgram, _Eval
from tracec.backends.cpu.matmul import batch_offset
from tracec.backends.cuda.launch import DeviceLaunch, HostLaunch

__all__ = ["KernelSpec", "build_kernel", "error_word", "BLOCK", "TILE", "MAX_GRID", "ERROR_CODE"]

#: Threads per block of elementwise and reduction kernels.
BLOCK = 256
#: The matmul's output tile edge (TILE x TILE threads per block).
TILE = 16
#: Byte of the workspace holding the error code (after a failed index).
ERROR_CODE = 8
#: Blocks per launch at most (grid-stride loops cover larger domains).
MAX_GRID = 4096


@dataclass
class KernelSpec:
    """One kernel launch: ``kind`` is "program" (``prog``) or "matmul"
    (``mm``: dtype, nb, M, N, K, bshape, sa, sb, ta, tb); ``refs`` the
    buffers of its pointer arguments (``lower.py``)."""
    kind: str
    name: str
    refs: list
    prog: LoopProgram | None = None
    mm: dict = field(default_factory=dict)
    error: int = 0
    #: a run-time check's message -> its error code (``loops.check_messages``)
    checks: dict = field(default_factory=dict)
    block: int = BLOCK
    units: object = 1
    per_block: int = BLOCK
    noalias: bool = True
    #: "serial" kernels: the cpu body, its outer extent, chunk, independence
    body: object = None
    n: object = 1
    align: int = 1
    parallel: bool = True


def build_kernel(mb, spec: KernelSpec, host: bool, symbols: list[str]) -> str:
    """Emit ``spec`` into module builder ``mb`` (device code unless
    ``host``); the function's name.  Returns the launch's shared bytes in
    ``mb.shared['bytes']`` (the largest of the module's kernels)."""
    k = len(spec.refs)
    args = [PTR] * k + [PTR] + [I64] * len(symbols) + ([I64] if host else [])
    fb = mb.function(spec.name, args, None, noalias=[spec.noalias] * k)
    ptrs, err = fb.args[:k], fb.args[k]
    for s, a in zip(symbols, fb.args[k + 1:]):
        fb._consts[("atom", s)] = a          # symbolic sizes: the kernel's arguments
    launch = (HostLaunch if host else DeviceLaunch)(fb, spec.block)

    def on_error(cond, message=None, value=None, position=None):
        code = spec.error if message is None else spec.checks[message]

        def failed():
            if value is not None:        # an index check's index: the message's {index}
                fb.store(value, err, 8)
            fb.store(fb.i32(code), error_word(fb, err), 4)
        fb.if_then(cond, failed)
    fails = spec.error or spec.checks

    def body():
        if spec.kind == "serial":
            _serial(fb, launch, spec, ptrs, err, fb.args[k + 1:k + 1 + len(symbols)], symbols)
        elif spec.kind == "matmul":
            _matmul(fb, launch, ptrs, **spec.mm)
        elif spec.prog.reductions:
            _reduction(fb, launch, spec.prog, ptrs, on_error if fails else None)
        else:
            _elementwise(fb, launch, spec.prog, ptrs, on_error if fails else None)
    if host:
        launch.nblocks = fb.args[-1]

        def per_block(b):
            launch.bid = b
            body()
        fb.for_range(fb.i64(0), launch.nblocks, per_block)
    else:
        body()
    fb.ret_()
    fb.finish()
    mb.shared["bytes"] = max(mb.shared.get("bytes", 0), launch.shared_bytes)
    return spec.name


def error_word(fb: FuncBuilder, err):
    """The i32 error code in the workspace's error slot (byte ``ERROR_CODE``;
    the bytes before it hold a failed index check's index, as on the cpu)."""
    return fb.gep(err, fb.i64(ERROR_CODE // 4), I32)


def _serial(fb, launch, spec, ptrs, err, syms, symbols) -> None:
    """A cpu-backend kernel body (``body(fb, ptrs, err, lo, hi, status)``
    over an outer range whose iterations are independent) as a device
    function, called by each thread for its chunks of ``align`` iterations
    (one thread for the whole range where they are not independent)."""
    k = len(ptrs)
    helper = fb.mb.function(spec.name + "_body", [PTR] * (k + 1) + [I64, I64] + [I64] * len(syms),
                            I32, noalias=[spec.noalias] * k)
    for s, a in zip(symbols, helper.args[k + 3:]):
        helper._consts[("atom", s)] = a
    status_slot = []

    def status():
        if not status_slot:
            status_slot.append(helper.stack_slot(I32, helper.i32(0)))
        return status_slot[0]
    spec.body(helper, helper.args[:k], helper.args[k], helper.args[k + 1], helper.args[k + 2],
              status)
    helper.ret_(helper.load(status_slot[0], I32, 4) if status_slot else helper.i32(0))
    helper.finish()
    n, align = fb.i64(spec.n), spec.align

    def run(lo, hi):
        rc = fb.call(helper.name, [*ptrs, err, lo, hi, *syms], I32)
        fb.if_then(fb.icmp("ne", rc, fb.i32(0)),
                   lambda: fb.store(rc, error_word(fb, err), 4))

    def thread(tid):
        if not spec.parallel:
            first = fb.ibin("and", fb.icmp("eq", tid, fb.i64(0)),
                            fb.icmp("eq", launch.block_id(), fb.i64(0)))
            fb.if_then(first, lambda: run(fb.i64(0), n))
            return
        start = fb.mul(fb.add(fb.mul(launch.block_id(), fb.i64(launch.block)), tid),
                       fb.i64(align))
        step = fb.mul(fb.mul(launch.num_blocks(), fb.i64(launch.block)), fb.i64(align))

        def chunk(lo):
            end = fb.add(lo, fb.i64(align))
            run(lo, fb.select(fb.icmp("slt", end, n), end, n))
        launch.grid_stride(start, n, step, chunk)
    launch.threads(thread, sync=False)


def _unravel(fb: FuncBuilder, i, shape) -> list:
    """The multi-index of linear index ``i`` over ``shape`` (row-major)."""
    idx = [None] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        if d == 0:
            idx[d] = i
        else:
            n = fb.i64(shape[d])
            idx[d] = fb.ibin("srem", i, n)
            i = fb.ibin("sdiv", i, n)
    return idx


def _elementwise(fb, launch, prog: LoopProgram, ptrs, on_error) -> None:
    ev = _Eval(fb, prog, ptrs, on_error)
    total = fb.i64(math.prod(prog.shape))
    wanted = [k for k, _ in prog.stores]

    def thread(tid):
        start = fb.add(fb.mul(launch.block_id(), fb.i64(launch.block)), tid)
        step = fb.mul(launch.num_blocks(), fb.i64(launch.block))

        def point(i):
            idx = _unravel(fb, i, prog.shape)
            for (_, a), v in zip(prog.stores, ev.run(idx, wanted)):
                scalar.store(fb, v, ptrs[a.slot], ev.offset(a, idx), a.dtype)
        launch.grid_stride(start, total, step, point)
    launch.threads(thread, sync=False)


def _sh_store(fb, v, p) -> None:
    if v.type == I1:
        v = fb.cast("zext", v, I8)
    fb.store(v, p, max(_bytes(v.type), 1))


def _sh_load(fb, p, t):
    if t == I1:
        return fb.icmp("ne", fb.load(p, I8, 1), fb.const(0, I8))
    return fb.load(p, t, max(_bytes(t), 1))


def _bytes(t) -> int:
    return bits_of(t) // 8 if t != I1 else 1


def _reduction(fb, launch, prog: LoopProgram, ptrs, on_error) -> None:
    ev = _Eval(fb, prog, ptrs, on_error)
    shape, reduced = prog.shape, prog.reduced
    kept = [d for d in range(len(shape)) if not reduced[d]]
    red = [d for d in range(len(shape)) if reduced[d]]
    n_out = fb.i64(math.prod([shape[d] for d in kept]))
    n_red = fb.i64(math.prod([shape[d] for d in red]))
    reds = prog.reductions
    types = [scalar.compute_type(r.acc_dtype) for r in reds]
    types = [I1 if r.acc_dtype is dt.bool_ else t for r, t in zip(reds, types)]
    shared = [launch.shared(I8 if t == I1 else t, launch.block) for t in types]
    accs = [launch.private(t) for t in types]
    wanted = [k for k, _ in prog.stores] + [r.node for r in reds]
    B = launch.block

    def elem(base, t, tid):
        return fb.gep(base, tid, I8 if t == I1 else t)

    def output(o):
        oidx = _unravel(fb, o, [shape[d] for d in kept])
        full = [None] * len(shape)
        for d, v in zip(kept, oidx):
            full[d] = v

        def partial(tid):
            for acc, r in zip(accs, reds):
                _sh_store(fb, scalar.identity(fb, r.kind, r.acc_dtype), acc(tid))

            def point(j):
                ridx = _unravel(fb, j, [shape[d] for d in red])
                idx = list(full)
                for d, v in zip(red, ridx):
                    idx[d] = v
                vals = ev.run(idx, wanted)
                for (_, a), v in zip(prog.stores, vals):
                    scalar.store(fb, v, ptrs[a.slot], ev.offset(a, idx), a.dtype)
                for acc, r, t, x in zip(accs, reds, types, vals[len(prog.stores):]):
                    x = scalar.cast(fb, x, prog.nodes[r.node].dtype, r.acc_dtype) \
                        if prog.nodes[r.node].dtype is not r.acc_dtype else x
                    _sh_store(fb, scalar.accumulate(fb, r.kind, _sh_load(fb, acc(tid), t), x,
                                                    r.acc_dtype), acc(tid))
            launch.grid_stride(tid, n_red, fb.i64(B), point)
            for sh, acc, t in zip(shared, accs, types):
                _sh_store(fb, _sh_load(fb, acc(tid), t), elem(sh, t, tid))
        launch.threads(partial)
        s = B // 2
        while s >= 1:
            def step(tid, s=s):
                def combine():
                    for sh, r, t in zip(shared, reds, types):
                        a = _sh_load(fb, elem(sh, t, tid), t)
                        b = _sh_load(fb, elem(sh, t, fb.add(tid, fb.i64(s))), t)
                        _sh_store(fb, scalar.accumulate(fb, r.kind, a, b, r.acc_dtype),
                                  elem(sh, t, tid))
                fb.if_then(fb.icmp("slt", tid, fb.i64(s)), combine)
            launch.threads(step)
            s //= 2

        def finish(tid):
            def write():
                for sh, r, t in zip(shared, reds, types):
                    v = _sh_load(fb, elem(sh, t, fb.i64(0)), t)
                    if r.out.dtype in (dt.float16, dt.bfloat16):
                        v = scalar.round_to(fb, v, r.out.dtype)
                    scalar.store(fb, v, ptrs[r.out.slot], ev.offset(r.out, full), r.out.dtype)
            fb.if_then(fb.icmp("eq", tid, fb.i64(0)), write)
        launch.threads(finish)
    launch.grid_stride(launch.block_id(), n_out, launch.num_blocks(), output)


def _matmul(fb, launch, ptrs, *, dtype, nb, M, N, K, bshape, sa, sb, ta, tb, reg=1) -> None:
    """C[b] = A[b] @ B[b] in output tiles of ``TILE * reg`` squared, one per
    block of TILE x TILE threads (grid-stride over batch x tiles).  Thread
    (ty, tx) owns the ``reg x reg`` outputs at rows ``ty + TILE*i`` and
    columns ``tx + TILE*j`` of the tile, in private accumulators (registers):
    each K slice of ``TILE`` staged in shared memory (A as [k][row], B as
    [k][col], so a warp reads consecutive words or one broadcast word) is
    read ``2*reg`` times per ``reg*reg`` multiply-adds.  Global loads walk
    each operand's contiguous dimension with consecutive threads."""
    d = dtype
    ct = scalar.compute_type(d)
    cp, ap, bp = ptrs
    T = TILE
    BM = BN = T * reg
    threads = T * T
    sam, sak = (1, M) if ta else (K, 1)
    sbk, sbn = (1, K) if tb else (N, 1)
    tm = (M + BM - 1) // BM
    tn = (N + BN - 1) // BN
    sA = launch.shared(ct, T * BM)
    sB = launch.shared(ct, T * BN)
    accs = [[launch.private(ct) for _ in range(reg)] for _ in range(reg)]
    zero = fb.const(0.0, ct)
    nbytes = _bytes(ct)
    n_tiles = fb.mul(fb.i64(nb), fb.mul(fb.i64(tm), fb.i64(tn)))

    def at(base, v1, s1, v2, s2):
        return fb.add(fb.add(base, fb.mul(v1, fb.i64(s1))), fb.mul(v2, fb.i64(s2)))

    def tile(t):
        b = fb.ibin("sdiv", t, fb.mul(fb.i64(tm), fb.i64(tn)))
        rest = fb.ibin("srem", t, fb.mul(fb.i64(tm), fb.i64(tn)))
        m0 = fb.mul(fb.ibin("sdiv", rest, fb.i64(tn)), fb.i64(BM))
        n0 = fb.mul(fb.ibin("srem", rest, fb.i64(tn)), fb.i64(BN))
        a_base = batch_offset(fb, b, bshape, sa)
        b_base = batch_offset(fb, b, bshape, sb)
        c_base = fb.mul(b, fb.mul(fb.i64(M), fb.i64(N)))

        def yx(tid):
            return fb.ibin("sdiv", tid, fb.i64(T)), fb.ibin("srem", tid, fb.i64(T))

        def clear(tid):
            for row in accs:
                for acc in row:
                    fb.store(zero, acc(tid), nbytes)
        launch.threads(clear, sync=False)

        def kslice(k0):
            def guarded(ok, ptr, off):
                slot = fb.stack_slot(ct, zero)
                fb.store(zero, slot, nbytes)
                fb.if_then(ok, lambda: fb.store(scalar.load(fb, ptr, off, d), slot, nbytes))
                return fb.load(slot, ct, nbytes)

            def load(e, span, x0, sx, sk, lim_x, x_fast, ptr, base, shared):
                """Element ``e`` of a ``T x span`` slice staged as shared[k][x]:
                global (x0 + x, k0 + k) at strides (sx, sk); consecutive
                threads walk x where x is the contiguous dimension."""
                if x_fast:
                    x, k = fb.ibin("srem", e, fb.i64(span)), fb.ibin("sdiv", e, fb.i64(span))
                else:
                    x, k = fb.ibin("sdiv", e, fb.i64(T)), fb.ibin("srem", e, fb.i64(T))
                xg, kg = fb.add(x0, x), fb.add(k0, k)
                ok = fb.ibin("and", fb.icmp("slt", xg, fb.i64(lim_x)),
                             fb.icmp("slt", kg, fb.i64(K)))
                fb.store(guarded(ok, ptr, at(base, xg, sx, kg, sk)),
                         fb.gep(shared, fb.add(fb.mul(k, fb.i64(span)), x), ct), nbytes)

            def stage(tid):
                for r in range(reg):
                    e = fb.add(tid, fb.i64(threads * r))
                    load(e, BM, m0, sam, sak, M, ta, ap, a_base, sA)         # A[m, k]
                    load(e, BN, n0, sbn, sbk, N, not tb, bp, b_base, sB)     # B[k, n]
            launch.threads(stage)

            def product(tid):
                ty, tx = yx(tid)
                s = [[fb.load(acc(tid), ct, nbytes) for acc in row] for row in accs]
                for kk in range(T):
                    xs = [fb.load(fb.gep(sA, fb.add(ty, fb.i64(kk * BM + T * i)), ct), ct,
                                  nbytes) for i in range(reg)]
                    ys = [fb.load(fb.gep(sB, fb.add(tx, fb.i64(kk * BN + T * j)), ct), ct,
                                  nbytes) for j in range(reg)]
                    # fused multiply-adds, as the cpu backend's GEMM (PTX's
                    # mul.rn/add.rn pairs are never fused by ptxas)
                    s = [[fb.intr("llvm.fma", [xs[i], ys[j], s[i][j]], ct, overload=[ct])
                          for j in range(reg)] for i in range(reg)]
                for i in range(reg):
                    for j in range(reg):
                        fb.store(s[i][j], accs[i][j](tid), nbytes)
            launch.threads(product)
        launch.grid_stride(fb.i64(0), fb.i64(K), fb.i64(T), kslice)

        def write(tid):
            ty, tx = yx(tid)
            for i in range(reg):
                m = fb.add(fb.add(m0, ty), fb.i64(T * i))
                for j in range(reg):
                    n = fb.add(fb.add(n0, tx), fb.i64(T * j))
                    ok = fb.ibin("and", fb.icmp("slt", m, fb.i64(M)), fb.icmp("slt", n, fb.i64(N)))
                    fb.if_then(ok, lambda i=i, j=j, m=m, n=n: scalar.store(
                        fb, fb.load(accs[i][j](tid), ct, nbytes), cp, at(c_base, m, N, n, 1), d))
        launch.threads(write, sync=False)
    launch.grid_stride(launch.block_id(), n_tiles, launch.num_blocks(), tile)
