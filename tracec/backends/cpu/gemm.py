"""Packed, register-tiled GEMM for large float32/float64 matmuls.

The classic blocked algorithm (Goto / BLIS), written with explicit LLVM
vectors so that its inner loop does not depend on the auto-vectorizer:

    for each batch, NC-wide column block jc, KC-deep slice pc:
        pack B[pc:pc+KC, jc:jc+NC] into NR-wide panels (k-major, zero-padded)
        for each MC-tall row block ic (the threads split these):
            pack A[ic:ic+MC, pc:pc+KC] into MR-tall panels (k-major)
            for each NR panel jr, MR panel ir:
                micro-kernel: C[MR x NR] (+)= Ap[ir] . Bp[jr]   over kc

The micro-kernel keeps the MR x NR tile of C in ``MR * NR / VL`` vector
registers (VL lanes per register: 16 float32 with AVX-512), loads NR/VL
vectors of B and broadcasts MR scalars of A per k, and issues one FMA per
accumulator: MR=8, NR=2*VL with AVX-512 (16 accumulators of 32 registers),
MR=6 with AVX2.  Packing buffers come from ``aligned_alloc`` (64-byte
aligned) per kernel call, so threads never share them.  Edge tiles are
computed in full into a stack tile and copied out element by element.
"""
from __future__ import annotations

import math

from xdsl.dialects import llvm
from xdsl.dialects.builtin import BytesAttr, DenseArrayBase, DenseIntOrFPElementsAttr, i32

from tracec import dtypes as dt
from tracec.backends.cpu import codegen
from tracec.backends.cpu.builder import F32, F64, I1, I64, PTR, FuncBuilder, vec

__all__ = ["suitable", "emit_gemm", "params_for"]

KC = 256
MC_PANELS = 16
NC = 2048


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


def _splat_zero(fb: FuncBuilder, vt, elt):
    key = ("zvec", str(vt))
    v = fb._consts.get(key)
    if v is None:
        nbytes = vt.get_shape()[0] * (4 if elt == F32 else 8)
        op = llvm.ConstantOp.create(result_types=[vt], properties={
            "value": DenseIntOrFPElementsAttr(vt, BytesAttr(bytes(nbytes)))})
        fb.entry.add_op(op)
        v = fb._consts[key] = op.results[0]
    return v


def _broadcast(fb: FuncBuilder, x, vt):
    n = vt.get_shape()[0]
    undef = fb.emit(llvm.UndefOp(vt))
    ins = fb.emit(llvm.InsertElementOp(undef, x, fb.i32(0)))
    return fb.emit(llvm.ShuffleVectorOp(ins, undef, DenseArrayBase.from_list(i32, [0] * n), vt))


def _vptr(fb: FuncBuilder, base, idx, elt, vt):
    """A pointer to the vector starting at element ``idx`` of ``base``."""
    return fb.gep(fb.gep(base, idx, elt), fb.i64(0), vt)


def _emit_microkernel(mb, name: str, elt, vl: int, mr: int, nr: int) -> str:
    """``void @name(ptr Ap, ptr Bp, ptr C, i64 kc, i64 ldc, i1 first, i64 rows,
    i64 cols)``: C[rows x cols] (first ? = : +=) Ap . Bp."""
    es = 4 if elt == F32 else 8
    vt = vec(elt, vl)
    nv = nr // vl
    fb = mb.function(name, [PTR, PTR, PTR, I64, I64, I1, I64, I64], None,
                     noalias=[True, True, True])
    ap, bp, cp, kc, ldc, first, rows, cols = fb.args
    zero = _splat_zero(fb, vt, elt)

    def kstep(k, *accs):
        bvs = [fb.load(fb.gep(bp, fb.add(fb.mul(k, fb.i64(nv)), fb.i64(j)), vt), vt, 64)
               for j in range(nv)]
        out = list(accs)
        abase = fb.mul(k, fb.i64(mr))
        for r in range(mr):
            a = fb.load(fb.gep(ap, fb.add(abase, fb.i64(r)), elt), elt, es)
            av = _broadcast(fb, a, vt)
            for j in range(nv):
                q = r * nv + j
                out[q] = fb.emit(llvm.FMAOp(av, bvs[j], out[q]))
        return out
    accs = fb.for_range(fb.i64(0), kc, kstep, carried=[zero] * (mr * nv))

    full = fb.ibin("and", fb.icmp("eq", rows, fb.i64(mr)), fb.icmp("eq", cols, fb.i64(nr)))
    fullb, partb, done = fb.new_block(), fb.new_block(), fb.new_block()
    fb.cond_br(full, fullb, partb)

    fb.set_block(fullb)
    for r in range(mr):
        row = fb.mul(fb.i64(r), ldc)
        for j in range(nv):
            p = _vptr(fb, cp, fb.add(row, fb.i64(j * vl)), elt, vt)
            old = fb.load(p, vt, es)
            new = fb.fbin("fadd", old, accs[r * nv + j])
            fb.store(fb.select(first, accs[r * nv + j], new), p, es)
    fb.br(done)

    fb.set_block(partb)
    tile = fb.alloca(elt, mr * nr, 64)
    for r in range(mr):
        for j in range(nv):
            fb.store(accs[r * nv + j], fb.gep(tile, fb.i64(r * nv + j), vt), 64)

    def prow(r):
        def pcol(c):
            v = fb.load(fb.gep(tile, fb.add(fb.mul(r, fb.i64(nr)), c), elt), elt, es)
            p = fb.gep(cp, fb.add(fb.mul(r, ldc), c), elt)
            old = fb.load(p, elt, es)
            fb.store(fb.select(first, v, fb.fbin("fadd", old, v)), p, es)
            return ()
        fb.for_range(fb.i64(0), cols, pcol)
        return ()
    fb.for_range(fb.i64(0), rows, prow)
    fb.br(done)
    fb.set_block(done)
    fb.ret_()
    fb.finish()
    return name


def _smin(fb, a, b):
    return fb.select(fb.icmp("slt", a, b), a, b)


def emit_gemm(low, slots, d: dt.DType, nb: int, M: int, N: int, K: int, bshape, sa, sb) -> None:
    from tracec.backends.cpu.matmul import batch_offset
    elt = F32 if d is dt.float32 else F64
    es = 4 if elt == F32 else 8
    vl, mr, nr = params_for(d)
    mc = MC_PANELS * mr
    mt = math.ceil(M / mc)
    nc = min(NC, math.ceil(N / nr) * nr)
    kc_max = min(KC, K)
    ukernel, pack_a, pack_b = _shared(low.mb, elt, vl, mr, nr)
    oom = low.kernels.error("matmul: out of memory for packing buffers")
    low.mb.declare("aligned_alloc", [I64, I64], PTR)
    low.mb.declare("free", [PTR], None)

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs
        abuf = fb.call("aligned_alloc", [fb.i64(64), fb.i64(mc * kc_max * es)], PTR)
        bbuf = fb.call("aligned_alloc", [fb.i64(64), fb.i64(kc_max * nc * es)], PTR)
        def is_null(p):
            addr = fb.emit(llvm.PtrToIntOp.create(operands=[p], result_types=[I64]))
            return fb.icmp("eq", addr, fb.i64(0))
        bad = fb.ibin("or", is_null(abuf), is_null(bbuf))

        def fail():
            fb.call("free", [abuf], None)
            fb.call("free", [bbuf], None)
            fb.store(fb.i32(oom), status(), 4)
        fb.if_then(bad, fail)
        okb, endb = fb.new_block(), fb.new_block()
        fb.cond_br(bad, endb, okb)
        fb.set_block(okb)

        b_lo = fb.ibin("sdiv", lo, fb.i64(mt))
        b_hi = fb.ibin("sdiv", fb.ibin("sub", hi, fb.i64(1)), fb.i64(mt))

        def batch(b):
            t_lo = fb.ibin("sub", _smax(fb, lo, fb.mul(b, fb.i64(mt))), fb.mul(b, fb.i64(mt)))
            t_hi = fb.ibin("sub", _smin(fb, hi, fb.mul(fb.add(b, fb.i64(1)), fb.i64(mt))),
                           fb.mul(b, fb.i64(mt)))
            a0 = fb.gep(ap, batch_offset(fb, b, bshape, sa), elt)
            b0 = fb.gep(bp, batch_offset(fb, b, bshape, sb), elt)
            c0 = fb.gep(cp, fb.mul(b, fb.i64(M * N)), elt)

            def jblock(jc):
                ncur = _smin(fb, fb.i64(nc), fb.ibin("sub", fb.i64(N), jc))

                def kblock(pc):
                    kcur = _smin(fb, fb.i64(KC), fb.ibin("sub", fb.i64(K), pc))
                    first = fb.icmp("eq", pc, fb.i64(0))
                    fb.call(pack_b, [bbuf, b0, pc, kcur, jc, ncur, fb.i64(N)], None)

                    def mtile(t):
                        ic = fb.mul(t, fb.i64(mc))
                        mcur = _smin(fb, fb.i64(mc), fb.ibin("sub", fb.i64(M), ic))
                        fb.call(pack_a, [abuf, a0, ic, mcur, pc, kcur, fb.i64(K)], None)

                        def jpanel(jr):
                            cols = _smin(fb, fb.i64(nr), fb.ibin("sub", ncur, jr))
                            bpan = fb.gep(bbuf, fb.mul(jr, kcur), elt)

                            def ipanel(ir):
                                rows = _smin(fb, fb.i64(mr), fb.ibin("sub", mcur, ir))
                                apan = fb.gep(abuf, fb.mul(ir, kcur), elt)
                                crow = fb.add(fb.mul(fb.add(ic, ir), fb.i64(N)), fb.add(jc, jr))
                                fb.call(ukernel, [apan, bpan, fb.gep(c0, crow, elt), kcur,
                                                  fb.i64(N), first, rows, cols], None)
                                return ()
                            fb.for_range(fb.i64(0), mcur, ipanel, step=mr)
                            return ()
                        fb.for_range(fb.i64(0), ncur, jpanel, step=nr)
                        return ()
                    fb.for_range(t_lo, t_hi, mtile)
                    return ()
                fb.for_range(fb.i64(0), fb.i64(K), kblock, step=KC)
                return ()
            fb.for_range(fb.i64(0), fb.i64(N), jblock, step=nc)
            return ()
        fb.for_range(b_lo, fb.add(b_hi, fb.i64(1)), batch)
        fb.call("free", [abuf], None)
        fb.call("free", [bbuf], None)
        fb.br(endb)
        fb.set_block(endb)

    low.kernels.kernel("gemm", slots, nb * mt, body, work=nb * M * N * K)


def _smax(fb, a, b):
    return fb.select(fb.icmp("sgt", a, b), a, b)


def _shared(mb, elt, vl: int, mr: int, nr: int) -> tuple[str, str, str]:
    """The module's micro-kernel and packing functions for ``elt`` (emitted
    once per module, shared by every GEMM in it)."""
    shared = mb.shared
    key = ("gemm", str(elt))
    if key not in shared:
        es = 4 if elt == F32 else 8
        t = str(elt)
        uk = _emit_microkernel(mb, mb.unique(f"gemm_ukernel_{t}"), elt, vl, mr, nr)
        pa = mb.unique(f"gemm_pack_a_{t}")
        fb = mb.function(pa, [PTR, PTR] + [I64] * 5, None, noalias=[True, True])
        _pack_a(fb, *fb.args, mr, elt, es)
        fb.ret_()
        fb.finish()
        pb = mb.unique(f"gemm_pack_b_{t}")
        fb = mb.function(pb, [PTR, PTR] + [I64] * 5, None, noalias=[True, True])
        _pack_b(fb, *fb.args, nr, elt, es)
        fb.ret_()
        fb.finish()
        shared[key] = (uk, pa, pb)
    return shared[key]


def _pack_b(fb, buf, b0, pc, kcur, jc, ncur, N, nr: int, elt, es: int) -> None:
    """buf[(j / nr) * kcur * nr + k * nr + j % nr] = B[pc + k, jc + j] (0 past N)."""
    zero = fb.const(0.0, elt)
    npan = fb.ibin("sdiv", fb.add(ncur, fb.i64(nr - 1)), fb.i64(nr))

    def panel(p):
        j0 = fb.mul(p, fb.i64(nr))
        width = _smin(fb, fb.i64(nr), fb.ibin("sub", ncur, j0))
        dst0 = fb.mul(fb.mul(p, kcur), fb.i64(nr))

        def copy(masked):
            def krow(k):
                src = fb.add(fb.mul(fb.add(pc, k), N), fb.add(jc, j0))
                dst = fb.add(dst0, fb.mul(k, fb.i64(nr)))

                def col(c):
                    if not masked:
                        v = fb.load(fb.gep(b0, fb.add(src, c), elt), elt, es)
                        fb.store(v, fb.gep(buf, fb.add(dst, c), elt), es)
                        return ()
                    inside = fb.icmp("slt", c, width)
                    v = fb.load(fb.gep(b0, fb.add(src, fb.select(inside, c, fb.i64(0))), elt),
                                elt, es)
                    fb.store(fb.select(inside, v, zero), fb.gep(buf, fb.add(dst, c), elt), es)
                    return ()
                fb.for_range(fb.i64(0), fb.i64(nr), col)
                return ()
            fb.for_range(fb.i64(0), kcur, krow)
        fb.if_else(fb.icmp("eq", width, fb.i64(nr)), lambda: copy(False), lambda: copy(True))
        return ()
    fb.for_range(fb.i64(0), npan, panel)


def _pack_a(fb, buf, a0, ic, mcur, pc, kcur, K, mr: int, elt, es: int) -> None:
    """buf[(i / mr) * kcur * mr + k * mr + i % mr] = A[ic + i, pc + k] (0 past M)."""
    zero = fb.const(0.0, elt)
    npan = fb.ibin("sdiv", fb.add(mcur, fb.i64(mr - 1)), fb.i64(mr))

    def panel(p):
        i0 = fb.mul(p, fb.i64(mr))
        dst0 = fb.mul(fb.mul(p, kcur), fb.i64(mr))

        def row(r):
            i = fb.add(i0, r)
            inside = fb.icmp("slt", i, mcur)
            src = fb.add(fb.mul(fb.add(ic, fb.select(inside, i, fb.i64(0))), K), pc)

            def kcol(k):
                v = fb.load(fb.gep(a0, fb.add(src, k), elt), elt, es)
                fb.store(fb.select(inside, v, zero),
                         fb.gep(buf, fb.add(dst0, fb.add(fb.mul(k, fb.i64(mr)), r)), elt), es)
                return ()
            fb.for_range(fb.i64(0), kcur, kcol)
            return ()
        fb.for_range(fb.i64(0), fb.i64(mr), row)
        return ()
    fb.for_range(fb.i64(0), npan, panel)
