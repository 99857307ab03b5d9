"""``matmul``: ``[..., M, K] @ [..., K, N]`` with broadcast batch dims.

Either operand may be read *transposed*: when it is a ``transpose`` of the
last two axes, the lowering passes the transpose's source instead
(``[..., K, M]`` / ``[..., N, K]``) and the transpose is never
materialized for the matmul.  Large float products use the packed,
register-tiled kernel of ``gemm.py``, whose packing reads either layout
(and splits short, wide products across threads by columns).  Small
products use a row kernel (for each row of C: ``C[m, :] += A[m, k] *
B[k, :]``, whose inner loop over contiguous ``N`` vectorizes), or, for a
float B read transposed (K contiguous in both operands), dot products
along K with a reassociated sum; both split the rows of all batches
(``batch * M``) across threads.
"""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec import ir
from tracec.backends.cpu import gemm, scalar
from tracec.backends.cpu.builder import FuncBuilder

__all__ = ["emit_matmul", "batch_strides", "swaps_last_two"]


def batch_strides(bshape, xshape, mat: int) -> list[int]:
    """Element strides of operand ``x``'s batch dims along the broadcast
    batch shape ``bshape`` (0 where ``x`` is broadcast); ``mat`` is the size
    of one of its matrices."""
    xb = list(xshape[:-2])
    lead = len(bshape) - len(xb)
    out, s = [], mat
    strides = []
    for n in reversed(xb):
        strides.append(s if n != 1 else 0)
        s *= n
    strides = strides[::-1]
    for k in range(len(bshape)):
        out.append(0 if k < lead else strides[k - lead])
    return out


def batch_offset(fb: FuncBuilder, b, bshape, strides):
    """The element offset of batch ``b`` (flat index over ``bshape``)."""
    off = None
    inner = 1
    for k in range(len(bshape) - 1, -1, -1):
        n = bshape[k]
        if strides[k] and n != 1:
            q = fb.ibin("sdiv", b, fb.i64(inner)) if inner != 1 else b
            q = fb.ibin("srem", q, fb.i64(n)) if k else q
            t = fb.mul(q, fb.i64(strides[k]))
            off = t if off is None else fb.add(off, t)
        inner *= n
    return off if off is not None else fb.i64(0)


def swaps_last_two(perm) -> bool:
    """Whether a transpose ``perm`` only swaps the last two axes (a batch of
    matrix transposes, which a matmul reads for free)."""
    n = len(perm)
    return n >= 2 and tuple(perm) == tuple(range(n - 2)) + (n - 1, n - 2)


def emit_matmul(low, op, operands=None) -> None:
    """``operands``: ``[(a, ta), (b, tb)]``, the values read for the two
    operands and whether each is read transposed (the source of a folded
    ``transpose``); default: the op's own operands, untransposed."""
    res = op.results[0]
    (a, ta), (b, tb) = operands or [(v, False) for v in op.operands]
    ashape, bshape_, cshape = (ir.shape_of(op.operands[0].type), ir.shape_of(op.operands[1].type),
                               ir.shape_of(res.type))
    d = ir.dtype_of(res.type)
    M, K, N = ashape[-2], ashape[-1], bshape_[-1]
    bshape = cshape[:-2]
    nb = math.prod(bshape)
    sa = batch_strides(bshape, ashape, M * K)
    sb = batch_strides(bshape, bshape_, K * N)
    slots = [low.slot_value(res), low.slot_value(a), low.slot_value(b)]
    if nb * M * N == 0:
        return
    if gemm.suitable(d, M, N, K):
        gemm.emit_gemm(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb)
        return
    # Element strides of A[m, k] and B[k, n] within one matrix.
    sam, sak = (1, M) if ta else (K, 1)
    sbk, sbn = (1, K) if tb else (N, 1)
    ct = scalar.compute_type(d)
    # B read transposed with K contiguous: dot products along K (vectorized
    # with a reassociated sum) instead of rows of C along a strided N.
    dot = tb and not ta and d in (dt.float32, dt.float64)

    def idx(fb, base, i, si, j, sj):
        t = base
        for v, s in ((i, si), (j, sj)):
            t = fb.add(t, v if s == 1 else fb.mul(v, fb.i64(s)))
        return t

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs

        def row(r):
            bi = fb.ibin("sdiv", r, fb.i64(M)) if nb > 1 else fb.i64(0)
            m = fb.ibin("srem", r, fb.i64(M)) if nb > 1 else r
            aoff = batch_offset(fb, bi, bshape, sa)
            boff = batch_offset(fb, bi, bshape, sb)
            crow = fb.mul(r, fb.i64(N))
            zero = scalar.constant(fb, 0, d)

            if dot:
                def col(n):
                    def kstep(k, acc):
                        av = scalar.load(fb, ap, idx(fb, aoff, m, sam, k, sak), d)
                        bv = scalar.load(fb, bp, idx(fb, boff, k, sbk, n, sbn), d)
                        return [fb.fbin("fadd", acc, fb.fbin("fmul", av, bv), reassoc=True)]
                    (acc,) = fb.for_range(fb.i64(0), fb.i64(K), kstep, carried=[zero])
                    scalar.store(fb, acc, cp, fb.add(crow, n), d)
                    return ()
                fb.for_range(fb.i64(0), fb.i64(N), col)
                return ()

            def init(n):
                scalar.store(fb, zero, cp, fb.add(crow, n), d)
                return ()
            fb.for_range(fb.i64(0), fb.i64(N), init)

            def kstep(k):
                av = scalar.load(fb, ap, idx(fb, aoff, m, sam, k, sak), d)

                def nstep(n):
                    ci = fb.add(crow, n)
                    bv = scalar.load(fb, bp, idx(fb, boff, k, sbk, n, sbn), d)
                    old = scalar.load(fb, cp, ci, d)
                    if d.is_floating_point:
                        new = fb.intr("llvm.fma", [av, bv, old], ct, overload=[ct])
                    elif d is dt.bool_:
                        new = fb.ibin("or", old, fb.ibin("and", av, bv))
                    else:
                        new = fb.ibin("add", old, fb.ibin("mul", av, bv))
                    scalar.store(fb, new, cp, ci, d)
                    return ()
                fb.for_range(fb.i64(0), fb.i64(N), nstep)
                return ()
            fb.for_range(fb.i64(0), fb.i64(K), kstep)
            return ()
        fb.for_range(lo, hi, row)
    low.kernels.kernel("matmul", slots, nb * M, body, work=nb * M * N * K)
