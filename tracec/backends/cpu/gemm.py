"""Packed, register-tiled GEMM for large float32/float64 matmuls.

The classic blocked algorithm (Goto / BLIS), written with explicit LLVM
vectors so that its inner loop does not depend on the auto-vectorizer:

    for each batch, column block jc (a work-unit group), KC-deep slice pc:
        pack B[pc:pc+KC, jc:jc+nc] into NR-wide panels (k-major, zero-padded)
        for each MC-tall row block ic (the group's work units):
            pack A[ic:ic+MC, pc:pc+KC] into MR-tall panels (k-major)
            for each NR panel jr, MR panel ir:
                micro-kernel: C[MR x NR] (+)= Ap[ir] . Bp[jr]   over kc

The micro-kernel keeps the MR x NR tile of C in ``MR * NR / VL`` vector
registers (VL lanes per register: 16 float32 with AVX-512), loads NR/VL
vectors of B and broadcasts MR scalars of A per k, and issues one FMA per
accumulator: MR=8, NR=2*VL with AVX-512 (16 accumulators of 32 registers),
MR=6 with AVX2.  The first K slice stores C without reading it.  Edge tiles
store C with masked vector loads and stores; one at most VL wide (N = 200
leaves 8 columns of the last 32-wide tile) accumulates one vector per row,
not NR / VL.

Either operand may be stored transposed (``ta`` / ``tb``: the source of a
folded ``transpose``); only the packing differs.  Packing that keeps the
source's contiguous axis is a plain copy of rows; packing that transposes
it (A row-major, or B stored as ``[N, K]``) moves 8 x 8 tiles through
registers (vector loads along K, an in-register transpose by shuffles,
vector stores) in one shared ``pack_rows`` function.

Work units are (batch, column block, row block); the threads take them
dynamically (``parallel.py``) in runs that share a column block, so each
packs that block of B once.  N is cut into enough column blocks that every
thread has its own and a short product (a small batch: one row block)
still splits across threads.  Packing buffers come from ``aligned_alloc``
(64-byte aligned) per call of the kernel, so threads never share them.
The loops over one column block (``gemm_block``), the whole unbatched
driver (``gemm_run``), the micro-kernel and the packs depend only on the
element type and layouts: they are compiled once per machine into a
library (``gemm_lib.py``) that modules call (or, where a module builder
does not use libraries, emitted once per module and shared by its GEMMs).
"""
from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import BytesAttr, DenseArrayBase, DenseIntOrFPElementsAttr, i32

from tracec import dtypes as dt
from tracec.backends.cpu import codegen, gemm_lib
from tracec.backends.cpu.builder import F32, F64, I1, I32, I64, PTR, FuncBuilder, several, vec
from tracec.symbolic import hint_of, known

__all__ = ["suitable", "emit_gemm", "params_for"]

KC = 256
MC_PANELS = 16
NC = 2048
#: The fewest NR panels per column block worth packing A again for (when
#: row blocks alone give the threads enough work units).
MIN_SPLIT_PANELS = 16


def params_for(d: dt.DType) -> tuple[int, int, int]:
    """(VL, MR, NR) for dtype ``d`` on this CPU."""
    bits = codegen.vector_bits()
    vl = bits // (32 if d is dt.float32 else 64)
    mr = 8 if bits >= 512 else 6
    return vl, mr, 2 * vl


def suitable(d: dt.DType, M: int, N: int, K: int) -> bool:
    if d not in (dt.float32, dt.float64):
        return False
    vl, mr, nr = params_for(d)
    return M * N * K >= 48 ** 3 and N >= vl and M >= mr and K >= 8


def splat_zero(fb: FuncBuilder, vt, elt):
    key = ("zvec", str(vt))
    v = fb._consts.get(key)
    if v is None:
        nbytes = vt.get_shape()[0] * (4 if elt == F32 else 8)
        op = llvm.ConstantOp.create(result_types=[vt], properties={
            "value": DenseIntOrFPElementsAttr(vt, BytesAttr(bytes(nbytes)))})
        fb.entry.add_op(op)
        v = fb._consts[key] = op.results[0]
    return v


def broadcast(fb: FuncBuilder, x, vt):
    n = vt.get_shape()[0]
    undef = fb.emit(llvm.UndefOp(vt))
    ins = fb.emit(llvm.InsertElementOp(undef, x, fb.i32(0)))
    return fb.emit(llvm.ShuffleVectorOp(ins, undef, DenseArrayBase.from_list(i32, [0] * n), vt))


def _vptr(fb: FuncBuilder, base, idx, elt, vt):
    """A pointer to the vector starting at element ``idx`` of ``base``."""
    return fb.gep(fb.gep(base, idx, elt), fb.i64(0), vt)


def _emit_microkernel(mb, name: str, elt, vl: int, mr: int, nr: int) -> str:
    """``void @name(ptr Ap, ptr Bp, ptr C, i64 kc, i64 ldc, i1 first, i64 rows,
    i64 cols)``: C[rows x cols] (first ? = : +=) Ap . Bp.

    A tile at most ``vl`` wide (N's edge: N = 200 leaves 8 of a 32-wide
    tile) runs a loop of its own over one vector of B per k: half the FMAs
    of the full tile.  Edge tiles store C with masked vector loads and
    stores (``llvm.masked.*``: nothing outside the tile is touched)."""
    from tracec.backends.cpu.gemm_small import _lanes_below, _load, _store
    es = 4 if elt == F32 else 8
    vt = vec(elt, vl)
    nv = nr // vl
    fb = mb.function(name, [PTR, PTR, PTR, I64, I64, I1, I64, I64], None,
                     noalias=[True, True, True])
    ap, bp, cp, kc, ldc, first, rows, cols = fb.args
    zero = splat_zero(fb, vt, elt)

    def accumulate(nvec: int):
        def kstep(k, *accs):
            bvs = [fb.load(fb.gep(bp, fb.add(fb.mul(k, fb.i64(nv)), fb.i64(j)), vt), vt, 64)
                   for j in range(nvec)]
            out = list(accs)
            abase = fb.mul(k, fb.i64(mr))
            for r in range(mr):
                a = fb.load(fb.gep(ap, fb.add(abase, fb.i64(r)), elt), elt, es)
                av = broadcast(fb, a, vt)
                for j in range(nvec):
                    q = r * nvec + j
                    out[q] = fb.emit(llvm.FMAOp(av, bvs[j], out[q]))
            return out
        return fb.for_range(fb.i64(0), kc, kstep, carried=[zero] * (mr * nvec))

    def masked_out(accs, nvec: int):
        """C[r, j * vl + lane] for r < rows, j * vl + lane < cols."""
        left = [fb.ibin("sub", cols, fb.i64(j * vl)) for j in range(nvec)]
        for r in range(mr):
            inside = fb.icmp("slt", fb.i64(r), rows)
            for j in range(nvec):
                mask = _lanes_below(fb, vl, fb.select(inside, left[j], fb.i64(0)))
                p = fb.gep(cp, fb.add(fb.mul(fb.i64(r), ldc), fb.i64(j * vl)), elt)
                acc = accs[r * nvec + j]
                old = _load(fb, p, vt, es, mask)
                _store(fb, fb.select(first, acc, fb.fbin("fadd", old, acc)), p, es, mask)

    wideb, narrowb, done = fb.new_block(), fb.new_block(), fb.new_block()
    fb.cond_br(fb.icmp("sgt", cols, fb.i64(vl)), wideb, narrowb)

    fb.set_block(narrowb)
    masked_out(accumulate(1), 1)
    fb.br(done)

    fb.set_block(wideb)
    accs = accumulate(nv)
    full = fb.ibin("and", fb.icmp("eq", rows, fb.i64(mr)), fb.icmp("eq", cols, fb.i64(nr)))
    fullb, partb = fb.new_block(), fb.new_block()
    fb.cond_br(full, fullb, partb)

    fb.set_block(fullb)
    ptrs = [[_vptr(fb, cp, fb.add(fb.mul(fb.i64(r), ldc), fb.i64(j * vl)), elt, vt)
             for j in range(nv)] for r in range(mr)]

    def assign():        # the first K slice: C is not read (it may be fresh memory)
        for r in range(mr):
            for j in range(nv):
                fb.store(accs[r * nv + j], ptrs[r][j], es)

    def update():
        for r in range(mr):
            for j in range(nv):
                old = fb.load(ptrs[r][j], vt, es)
                fb.store(fb.fbin("fadd", old, accs[r * nv + j]), ptrs[r][j], es)
    fb.if_else(first, assign, update)
    fb.br(done)

    fb.set_block(partb)
    masked_out(accs, nv)
    fb.br(done)
    fb.set_block(done)
    fb.ret_()
    fb.finish()
    return name


def _smin(fb, a, b):
    return fb.select(fb.icmp("slt", a, b), a, b)


def _expected_threads() -> int:
    """The machine's core count (capped): what the work decomposition of a
    GEMM is cut for (not the per-call thread count, so that an object does
    not depend on the environment it was compiled in)."""
    import os
    return max(1, min(os.cpu_count() or 1, 8))


def _cdiv(a, b):
    """``ceil(a / b)`` for sizes (ints or symbolic, both positive)."""
    return (a + b - 1) // b


def _column_blocks(nb: int, mt: int, npan: int, threads: int) -> int:
    """How many column blocks to cut each product's N into.  Each block is a
    group of work units (one per row block) that packs its slice of B once:
    enough groups that every thread packs its own B, and enough units (two
    per thread) for the dynamic schedule to balance; no more, since every
    column block packs A again: where the row blocks alone give the threads
    enough units, only into blocks of at least ``MIN_SPLIT_PANELS`` panels
    (a narrow N, 200 of [M, 10000] @ [10000, 200], stays whole: A is
    packed once)."""
    nsplit = min(npan, max(1, _cdiv(threads, nb)))
    if nb * mt >= 2 * threads:
        # Enough row blocks to share: a split's cost, packing A again per
        # column block, outweighs its gain unless the blocks stay wide
        # (N = 200 in two blocks: A, [M, K], packed twice for 12 panels).
        nsplit = min(nsplit, max(1, npan // MIN_SPLIT_PANELS))
    if nb * nsplit * mt < 2 * threads:
        nsplit = min(npan, _cdiv(2 * threads, nb * mt))
    return max(1, nsplit)


def emit_gemm(low, slots, d: dt.DType, nb: int, M: int, N: int, K: int, bshape, sa, sb,
              ta: bool = False, tb: bool = False) -> None:
    """``ta`` / ``tb``: the operand buffer holds the matrix transposed
    (``[..., K, M]`` / ``[..., N, K]``); only the packing differs.
    (Sizes may be symbolic: ceil divisions stay expressions, computed at
    run time; kc_max of a symbolic K is KC, the most it can be.)"""
    vl, mr, nr = params_for(d)
    mc = MC_PANELS * mr
    mt = _cdiv(M, mc)
    threads = _expected_threads()
    if isinstance(N, int) and isinstance(nb, int) and not isinstance(M, int):
        # A symbolic M (a batch): the column split the static code would
        # make for each run of row-block counts, chosen per call.
        ranges = _split_ranges(nb, _cdiv(N, nr), threads)
        live = []
        for lo, hi, nsplit in ranges:
            conds = [] if lo == 1 else [(M, ">", (lo - 1) * mc)]
            conds += [] if hi is None else [(M, "<=", hi * mc)]
            if any(known(*c) is False for c in conds):
                continue
            live.append(([c for c in conds if known(*c) is not True], nsplit))
        if len(live) > 1:
            for conds, nsplit in live:
                with low.kernels.only_where(*conds):
                    _emit_split(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb, nsplit)
            return
    # The column split is a choice of speed: for other symbolic sizes it is
    # made for the sizes being compiled for (their hints) and is right for any.
    nsplit = _column_blocks(hint_of(nb), hint_of(mt), hint_of(_cdiv(N, nr)), threads)
    _emit_split(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb, nsplit)


def _split_ranges(nb: int, npan: int, threads: int) -> list:
    """``[(lo, hi, nsplit)]``: ``_column_blocks`` for row-block counts
    ``lo..hi`` (``hi`` None: and above), in order."""
    out: list = []
    mt = 1
    while True:
        nsplit = _column_blocks(nb, mt, npan, threads)
        if out and out[-1][2] == nsplit:
            out[-1][1] = mt
        else:
            out.append([mt, mt, nsplit])
        # Past 2 * threads row blocks the split no longer depends on them.
        if mt >= 2 * threads:
            out[-1][1] = None
            return [tuple(r) for r in out]
        mt += 1


def _emit_split(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb, nsplit: int) -> None:
    """The GEMM kernel with N cut into ``nsplit`` column blocks."""
    from tracec.backends.cpu.matmul import batch_offset
    elt = F32 if d is dt.float32 else F64
    es = 4 if elt == F32 else 8
    vl, mr, nr = params_for(d)
    mc = MC_PANELS * mr
    mt = _cdiv(M, mc)
    ncb = min(NC, _cdiv(hint_of(_cdiv(N, nr)), nsplit) * nr)   # columns per work unit
    nt = _cdiv(N, ncb)
    kc_max = min(KC, K) if isinstance(K, int) else KC
    # One error code for every GEMM of the module (the message is the same):
    # a code per call would make each call site's kernel distinct, and an
    # unrolled loop's repeated matmuls would each be compiled (an LSTM step
    # unrolled 35 times: hundreds of GEMM kernels instead of a few).
    oom = low.mb.shared.get(("gemm_oom",))
    if oom is None:
        oom = low.mb.shared[("gemm_oom",)] = low.kernels.error(
            "matmul: out of memory for packing buffers")
    # What the body emits is fixed by these (the shared functions by d and
    # the layouts), so a GEMM made before from the same key is called again.
    key = ("gemm", d.name, nb, M, N, K, tuple(bshape), tuple(sa), tuple(sb), ta, tb, ncb)
    if nb == 1:
        run = gemm_lib.declare(low.mb, "run", d, ta, tb) if low.mb.use_libraries else \
            _run_fn(low.mb, elt, vl, mr, nr, ta, tb)

        def body1(fb, ptrs, err, lo, hi, status):
            cp, ap, bp = ptrs
            rc = fb.call(run, [cp, ap, bp, lo, hi] + [fb.i64(v) for v in (M, N, K, mt, nt, ncb)],
                         I32)
            fb.if_then(fb.icmp("ne", rc, fb.i32(0)), lambda: fb.store(fb.i32(oom), status(), 4))
        low.kernels.kernel("gemm", slots, nt * mt, body1, work=M * N * K, align=mt, key=key)
        return
    block = gemm_lib.declare(low.mb, "block", d, ta, tb) if low.mb.use_libraries else \
        _block_fn(low.mb, elt, vl, mr, nr, ta, tb)
    low.mb.declare("aligned_alloc", [I64, I64], PTR)
    low.mb.declare("free", [PTR], None)

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs
        abuf = fb.call("aligned_alloc", [fb.i64(64), fb.i64(mc * kc_max * es)], PTR)
        bbuf = fb.call("aligned_alloc", [fb.i64(64), fb.i64(kc_max * ncb * es)], PTR)
        bad = fb.ibin("or", _is_null(fb, abuf), _is_null(fb, bbuf))

        def fail():
            fb.call("free", [abuf], None)
            fb.call("free", [bbuf], None)
            fb.store(fb.i32(oom), status(), 4)
        fb.if_then(bad, fail)
        okb, endb = fb.new_block(), fb.new_block()
        fb.cond_br(bad, endb, okb)
        fb.set_block(okb)

        # Work unit u = (batch * nt + column block) * mt + row block; a
        # thread runs [lo, hi), packing each B block once for its row blocks.
        g_lo = fb.ibin("sdiv", lo, fb.i64(mt))
        g_hi = fb.ibin("sdiv", fb.ibin("sub", hi, fb.i64(1)), fb.i64(mt))

        def group(g):
            t_lo = fb.ibin("sub", _smax(fb, lo, fb.mul(g, fb.i64(mt))), fb.mul(g, fb.i64(mt)))
            t_hi = fb.ibin("sub", _smin(fb, hi, fb.mul(fb.add(g, fb.i64(1)), fb.i64(mt))),
                           fb.mul(g, fb.i64(mt)))
            b = fb.ibin("sdiv", g, fb.i64(nt)) if several(nt) else g
            jc = fb.mul(fb.ibin("srem", g, fb.i64(nt)), fb.i64(ncb)) if several(nt) \
                else fb.i64(0)
            ncur = _smin(fb, fb.i64(ncb), fb.ibin("sub", fb.i64(N), jc))
            a0 = fb.gep(ap, batch_offset(fb, b, bshape, sa), elt)
            b0 = fb.gep(bp, batch_offset(fb, b, bshape, sb), elt)
            c0 = fb.gep(cp, fb.mul(b, fb.i64(M * N)), elt)
            fb.call(block, [c0, a0, b0, abuf, bbuf, t_lo, t_hi, jc, ncur, fb.i64(M), fb.i64(N),
                            fb.i64(K)], None)
            return ()
        fb.for_range(g_lo, fb.add(g_hi, fb.i64(1)), group)
        fb.call("free", [abuf], None)
        fb.call("free", [bbuf], None)
        fb.br(endb)
        fb.set_block(endb)

    low.kernels.kernel("gemm", slots, nb * nt * mt, body, work=nb * M * N * K, align=mt,
                       key=key)


def _is_null(fb, p):
    addr = fb.emit(llvm.PtrToIntOp.create(operands=[p], result_types=[I64]))
    return fb.icmp("eq", addr, fb.i64(0))


def _run_fn(mb, elt, vl: int, mr: int, nr: int, ta: bool, tb: bool) -> str:
    """``i32 @gemm_run(ptr c, ptr a, ptr b, i64 lo, i64 hi, i64 M, i64 N, i64 K,
    i64 mt, i64 nt, i64 ncb)``: work units ``[lo, hi)`` of one (unbatched)
    product (unit = column block * mt + row block, ``ncb`` columns per
    block); 1 if the packing buffers cannot be allocated.  Shared by the
    module's unbatched GEMMs with these operand layouts."""
    key = ("gemm_run", str(elt), ta, tb)
    if key in mb.shared:
        return mb.shared[key]
    es = 4 if elt == F32 else 8
    mc = MC_PANELS * mr
    block = _block_fn(mb, elt, vl, mr, nr, ta, tb)
    mb.declare("aligned_alloc", [I64, I64], PTR)
    mb.declare("free", [PTR], None)
    name = mb.unique(f"gemm_run_{'t' if ta else 'n'}{'t' if tb else 'n'}_{elt}")
    fb = mb.function(name, [PTR] * 3 + [I64] * 8, I32, noalias=[True] * 3)
    cp, ap, bp, lo, hi, M, N, K, mt, nt, ncb = fb.args
    kc = _smin(fb, fb.i64(KC), K)
    abuf = fb.call("aligned_alloc", [fb.i64(64), fb.mul(kc, fb.i64(mc * es))], PTR)
    bbuf = fb.call("aligned_alloc", [fb.i64(64), fb.mul(fb.mul(kc, ncb), fb.i64(es))], PTR)
    bad = fb.ibin("or", _is_null(fb, abuf), _is_null(fb, bbuf))
    okb, failb = fb.new_block(), fb.new_block()
    fb.cond_br(bad, failb, okb)
    fb.set_block(failb)
    fb.call("free", [abuf], None)
    fb.call("free", [bbuf], None)
    fb.ret_(fb.i32(1))
    fb.set_block(okb)
    g_lo = fb.ibin("sdiv", lo, mt)
    g_hi = fb.ibin("sdiv", fb.ibin("sub", hi, fb.i64(1)), mt)

    def group(g):
        base = fb.mul(g, mt)
        t_lo = fb.ibin("sub", _smax(fb, lo, base), base)
        t_hi = fb.ibin("sub", _smin(fb, hi, fb.add(base, mt)), base)
        jc = fb.mul(g, ncb)
        ncur = _smin(fb, ncb, fb.ibin("sub", N, jc))
        fb.call(block, [cp, ap, bp, abuf, bbuf, t_lo, t_hi, jc, ncur, M, N, K], None)
        return ()
    fb.for_range(g_lo, fb.add(g_hi, fb.i64(1)), group)
    fb.call("free", [abuf], None)
    fb.call("free", [bbuf], None)
    fb.ret_(fb.i32(0))
    fb.finish()
    mb.shared[key] = name
    return name


def _block_fn(mb, elt, vl: int, mr: int, nr: int, ta: bool, tb: bool) -> str:
    """``void @gemm_block(ptr c0, ptr a0, ptr b0, ptr abuf, ptr bbuf, i64 t_lo,
    i64 t_hi, i64 jc, i64 ncur, i64 M, i64 N, i64 K)``: C[row blocks t_lo..t_hi,
    columns jc..jc+ncur] of one matrix product, over all of K: per KC slice,
    pack that slice of B's columns, then per row block pack A and run the
    micro-kernel over the tiles.  Shared by every GEMM of the module with
    the same element type and operand layouts (the shapes are arguments)."""
    key = ("gemm_block", str(elt), ta, tb)
    if key in mb.shared:
        return mb.shared[key]
    mc = MC_PANELS * mr
    ukernel, pack_a, pack_b = _shared(mb, elt, vl, mr, nr, ta, tb)
    name = mb.unique(f"gemm_block_{'t' if ta else 'n'}{'t' if tb else 'n'}_{elt}")
    fb = mb.function(name, [PTR] * 5 + [I64] * 7, None, noalias=[True] * 5)
    c0, a0, b0, abuf, bbuf, t_lo, t_hi, jc, ncur, M, N, K = fb.args
    lda = M if ta else K
    ldb = K if tb else N

    # K in balanced slices of at most KC (784 = 4 x 196, not 3 x 256 + 16:
    # a thin last slice costs a full pass over C and the packing for little work).
    nsl = fb.ibin("sdiv", fb.add(K, fb.i64(KC - 1)), fb.i64(KC))
    kc = fb.ibin("sdiv", fb.add(K, fb.ibin("sub", nsl, fb.i64(1))), nsl)

    def kblock(s):
        pc = fb.mul(s, kc)
        kcur = _smin(fb, kc, fb.ibin("sub", K, pc))
        first = fb.icmp("eq", s, fb.i64(0))
        fb.call(pack_b, [bbuf, b0, pc, kcur, jc, ncur, ldb], None)

        def mtile(t):
            ic = fb.mul(t, fb.i64(mc))
            mcur = _smin(fb, fb.i64(mc), fb.ibin("sub", M, ic))
            fb.call(pack_a, [abuf, a0, ic, mcur, pc, kcur, lda], None)

            def jpanel(jr):
                cols = _smin(fb, fb.i64(nr), fb.ibin("sub", ncur, jr))
                bpan = fb.gep(bbuf, fb.mul(jr, kcur), elt)

                def ipanel(ir):
                    rows = _smin(fb, fb.i64(mr), fb.ibin("sub", mcur, ir))
                    apan = fb.gep(abuf, fb.mul(ir, kcur), elt)
                    crow = fb.add(fb.mul(fb.add(ic, ir), N), fb.add(jc, jr))
                    fb.call(ukernel, [apan, bpan, fb.gep(c0, crow, elt), kcur, N, first, rows,
                                      cols], None)
                    return ()
                fb.for_range(fb.i64(0), mcur, ipanel, step=mr)
                return ()
            fb.for_range(fb.i64(0), ncur, jpanel, step=nr)
            return ()
        fb.for_range(t_lo, t_hi, mtile)
        return ()
    fb.for_range(fb.i64(0), nsl, kblock)
    fb.ret_()
    fb.finish()
    mb.shared[key] = name
    return name


def _smax(fb, a, b):
    return fb.select(fb.icmp("sgt", a, b), a, b)


def _shared(mb, elt, vl: int, mr: int, nr: int, ta: bool, tb: bool) -> tuple[str, str, str]:
    """The module's micro-kernel and packing functions for ``elt`` and the
    operands' layouts (emitted once per module, shared by every GEMM in it)."""
    shared = mb.shared
    t = str(elt)
    es = 4 if elt == F32 else 8
    key = ("gemm_ukernel", t)
    if key not in shared:
        shared[key] = _emit_microkernel(mb, mb.unique(f"gemm_ukernel_{t}"), elt, vl, mr, nr)
    packs = []
    for which, trans, emit, width in (("a", ta, _pack_a_t if ta else _pack_a, mr),
                                      ("b", tb, _pack_b_t if tb else _pack_b, nr)):
        key = ("gemm_pack", which, trans, t)
        if key not in shared:
            name = mb.unique(f"gemm_pack_{which}{'t' if trans else ''}_{t}")
            fb = mb.function(name, [PTR, PTR] + [I64] * 5, None, noalias=[True, True])
            emit(fb, *fb.args, width, elt, es)
            fb.ret_()
            fb.finish()
            shared[key] = name
        packs.append(shared[key])
    return shared[("gemm_ukernel", t)], packs[0], packs[1]


def _pack_cols(fb, buf, src, k0, kcur, c0, ncols, ld, w: int, elt, es: int) -> None:
    """The copying pack (the source's contiguous axis stays contiguous):
    buf[(c / w) * kcur * w + k * w + c % w] = src[(k0 + k) * ld + c0 + c]
    (0 past ``ncols``).  Rows of the source are read in order, each spread
    over the panels (sequential reads; the writes stay in the buffer)."""
    zero = fb.const(0.0, elt)
    nfull = fb.ibin("sdiv", ncols, fb.i64(w))
    rem = fb.ibin("sub", ncols, fb.mul(nfull, fb.i64(w)))
    pstride = fb.mul(kcur, fb.i64(w))

    def krow(k):
        srow = fb.add(fb.mul(fb.add(k0, k), ld), c0)
        drow = fb.mul(k, fb.i64(w))

        def panel(p):
            s0 = fb.add(srow, fb.mul(p, fb.i64(w)))
            d0 = fb.add(drow, fb.mul(p, pstride))

            def col(c):
                v = fb.load(fb.gep(src, fb.add(s0, c), elt), elt, es)
                fb.store(v, fb.gep(buf, fb.add(d0, c), elt), es)
                return ()
            fb.for_range(fb.i64(0), fb.i64(w), col)
            return ()
        fb.for_range(fb.i64(0), nfull, panel)

        def tail():
            s0 = fb.add(srow, fb.mul(nfull, fb.i64(w)))
            d0 = fb.add(drow, fb.mul(nfull, pstride))

            def col(c):
                inside = fb.icmp("slt", c, rem)
                v = fb.load(fb.gep(src, fb.add(s0, fb.select(inside, c, fb.i64(0))), elt),
                            elt, es)
                fb.store(fb.select(inside, v, zero), fb.gep(buf, fb.add(d0, c), elt), es)
                return ()
            fb.for_range(fb.i64(0), fb.i64(w), col)
        fb.if_then(fb.icmp("sgt", rem, fb.i64(0)), tail)
        return ()
    fb.for_range(fb.i64(0), kcur, krow)


def _pack_b(fb, buf, b0, pc, kcur, jc, ncur, N, nr: int, elt, es: int) -> None:
    """buf[(j / nr) * kcur * nr + k * nr + j % nr] = B[pc + k, jc + j] (0 past N)."""
    _pack_cols(fb, buf, b0, pc, kcur, jc, ncur, N, nr, elt, es)


def _pack_a(fb, buf, a0, ic, mcur, pc, kcur, K, mr: int, elt, es: int) -> None:
    """buf[(i / mr) * kcur * mr + k * mr + i % mr] = A[ic + i, pc + k] (0 past M)."""
    npan = fb.ibin("sdiv", fb.add(mcur, fb.i64(mr - 1)), fb.i64(mr))

    def panel(p):
        i0 = fb.mul(p, fb.i64(mr))
        width = _smin(fb, fb.i64(mr), fb.ibin("sub", mcur, i0))
        _pack_rows(fb, fb.gep(buf, fb.mul(fb.mul(p, kcur), fb.i64(mr)), elt), a0,
                   fb.add(ic, i0), width, pc, kcur, K, mr, elt, es)
        return ()
    fb.for_range(fb.i64(0), npan, panel)


def _shuffle(fb, x, y, mask: list[int], vt):
    return fb.emit(llvm.ShuffleVectorOp(x, y, DenseArrayBase.from_list(i32, mask), vt))


def _transpose_tile(fb, rows: list, vt):
    """Transpose t vectors of t lanes (t a power of two) with two-input
    shuffles: log2(t) stages, each swapping the off-diagonal h x h blocks
    of every 2h x 2h block."""
    t = len(rows)
    rows = list(rows)
    h = t // 2
    while h >= 1:
        lo_mask = [j if not j & h else t + j - h for j in range(t)]
        hi_mask = [j + h if not j & h else t + j for j in range(t)]
        for i in range(t):
            if i & h:
                continue
            x, y = rows[i], rows[i + h]
            rows[i] = _shuffle(fb, x, y, lo_mask, vt)
            rows[i + h] = _shuffle(fb, x, y, hi_mask, vt)
        h //= 2
    return rows


#: Edge of the register tiles of transposing packs (8 lanes: one 256-bit
#: vector of float32, 512-bit of float64).
PACK_TILE = 8


def _pack_rows_fn(mb, elt, es: int) -> str:
    """``void @pack_rows(ptr dst, ptr src, i64 r0, i64 width, i64 k0, i64 kcur,
    i64 ld, i64 w)``, the transposing pack of one panel, shared by A's and
    (transposed) B's packing: dst[k * w + r] = src[(r0 + r) * ld + k0 + k] for
    r < width (0 for width <= r < w), k < kcur.  Full panels move t x t
    tiles through registers (t vector loads along k, an in-register
    transpose, t vector stores); edges go element by element."""
    key = ("pack_rows", str(elt))
    if key in mb.shared:
        return mb.shared[key]
    name = mb.unique(f"gemm_pack_rows_{elt}")
    fb = mb.function(name, [PTR, PTR] + [I64] * 6, None, noalias=[True, True])
    dst, src, r0, width, k0, kcur, ld, w = fb.args
    zero = fb.const(0.0, elt)
    vl = codegen.vector_bits() // (es * 8)
    t = min(PACK_TILE, vl)

    def scalar_rows(klo):
        def row(r):
            inside = fb.icmp("slt", r, width)
            base = fb.add(fb.mul(fb.add(r0, fb.select(inside, r, fb.i64(0))), ld), k0)

            def kcol(k):
                v = fb.load(fb.gep(src, fb.add(base, k), elt), elt, es)
                fb.store(fb.select(inside, v, zero),
                         fb.gep(dst, fb.add(fb.mul(k, w), r), elt), es)
                return ()
            fb.for_range(klo, kcur, kcol)
            return ()
        fb.for_range(fb.i64(0), w, row)

    vt = vec(elt, t)
    kvec = fb.mul(fb.ibin("sdiv", kcur, fb.i64(t)), fb.i64(t))

    def full():
        def group(g):
            bases = [fb.add(fb.mul(fb.add(r0, fb.add(g, fb.i64(r))), ld), k0) for r in range(t)]

            def chunk(kk):   # a t x t tile: t loads along k, transpose, t stores
                vs = [fb.load(_vptr(fb, src, fb.add(bases[r], kk), elt, vt), vt, es)
                      for r in range(t)]
                for j, c in enumerate(_transpose_tile(fb, vs, vt)):
                    k = fb.add(kk, fb.i64(j))
                    fb.store(c, _vptr(fb, dst, fb.add(fb.mul(k, w), g), elt, vt), es)
                return ()
            fb.for_range(fb.i64(0), kvec, chunk, step=t)
            return ()
        fb.for_range(fb.i64(0), w, group, step=t)
        fb.if_then(fb.icmp("slt", kvec, kcur), lambda: scalar_rows(kvec))
    tiled = fb.ibin("and", fb.icmp("eq", width, w),
                    fb.icmp("eq", fb.ibin("srem", w, fb.i64(t)), fb.i64(0)))
    fb.if_else(tiled, full, lambda: scalar_rows(fb.i64(0)))
    fb.ret_()
    fb.finish()
    mb.shared[key] = name
    return name


def _pack_rows(fb, dst, src, r0, width, k0, kcur, ld, w: int, elt, es: int) -> None:
    fb.call(_pack_rows_fn(fb.mb, elt, es), [dst, src, r0, width, k0, kcur, ld, fb.i64(w)], None)


def _pack_a_t(fb, buf, a0, ic, mcur, pc, kcur, M, mr: int, elt, es: int) -> None:
    """As ``_pack_a`` from A stored transposed (``At[k, i]``, ``M`` columns):
    buf[(i / mr) * kcur * mr + k * mr + i % mr] = At[pc + k, ic + i], a
    copying pack."""
    _pack_cols(fb, buf, a0, pc, kcur, ic, mcur, M, mr, elt, es)


def _pack_b_t(fb, buf, b0, pc, kcur, jc, ncur, K, nr: int, elt, es: int) -> None:
    """As ``_pack_b`` from B stored transposed (``Bt[j, k]``, ``K`` columns):
    buf[(j / nr) * kcur * nr + k * nr + j % nr] = Bt[jc + j, pc + k] (0 past
    ``ncur``), a transposing pack like ``_pack_a``'s."""
    npan = fb.ibin("sdiv", fb.add(ncur, fb.i64(nr - 1)), fb.i64(nr))

    def panel(p):
        j0 = fb.mul(p, fb.i64(nr))
        width = _smin(fb, fb.i64(nr), fb.ibin("sub", ncur, j0))
        _pack_rows(fb, fb.gep(buf, fb.mul(fb.mul(p, kcur), fb.i64(nr)), elt), b0,
                   fb.add(jc, j0), width, pc, kcur, K, nr, elt, es)
        return ()
    fb.for_range(fb.i64(0), npan, panel)
