"""``matmul``: ``[..., M, K] @ [..., K, N]`` with broadcast batch dims.

Small products use a row kernel (for each row of C: ``C[m, :] += A[m, k] *
B[k, :]``, whose inner loop over contiguous ``N`` vectorizes); large float
products use the packed, register-tiled kernel of ``gemm.py``.  Both split
the rows of all batches (``batch * M``) across threads.
"""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec import ir
from tracec.backends.cpu import gemm, scalar
from tracec.backends.cpu.builder import FuncBuilder

__all__ = ["emit_matmul", "batch_strides"]


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


def emit_matmul(low, op) -> None:
    a, b = op.operands
    res = op.results[0]
    ashape, bshape_, cshape = ir.shape_of(a.type), ir.shape_of(b.type), ir.shape_of(res.type)
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
        gemm.emit_gemm(low, slots, d, nb, M, N, K, bshape, sa, sb)
        return
    ct = scalar.compute_type(d)

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs

        def row(r):
            bi = fb.ibin("sdiv", r, fb.i64(M)) if nb > 1 else fb.i64(0)
            m = fb.ibin("srem", r, fb.i64(M)) if nb > 1 else r
            aoff = fb.add(batch_offset(fb, bi, bshape, sa), fb.mul(m, fb.i64(K)))
            boff = batch_offset(fb, bi, bshape, sb)
            crow = fb.mul(r, fb.i64(N))
            zero = scalar.constant(fb, 0, d)

            def init(n):
                scalar.store(fb, zero, cp, fb.add(crow, n), d)
                return ()
            fb.for_range(fb.i64(0), fb.i64(N), init)

            def kstep(k):
                av = scalar.load(fb, ap, fb.add(aoff, k), d)
                brow = fb.add(boff, fb.mul(k, fb.i64(N)))

                def nstep(n):
                    ci = fb.add(crow, n)
                    bv = scalar.load(fb, bp, fb.add(brow, n), d)
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
