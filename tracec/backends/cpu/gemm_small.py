"""Unpacked register-tiled matmul for short products (few rows of C).

The packed GEMM (``gemm.py``) copies B into panels before its micro-kernel
runs; with few rows of A (an RNN step: ``[20, 800] @ [800, 200]``, once
per time step) each packed copy of B serves only those rows and the
packing costs about as much as the product.  Here B (stored ``[K, N]``,
rows contiguous) is read in place: each work unit is one NR-wide column
panel of one batch's C; a tile of its rows is held in registers over the
whole K loop (per k: vector loads of B's row segment, one broadcast of
A[i, k] per row, one FMA per accumulator) and stored once.  The last,
narrower panel uses power-of-two vector pieces (no masked loads: nothing
is read past a row of B).  N (and the batch) are compile-time constants
here; with a static M the row tiles are unrolled statically.  M and K may
be symbolic (a batch size, known at run time): K is a loop bound; a
symbolic M is covered by a loop of full-height row tiles and then, for
the rest, one tile of each power-of-two height that the rest's bits name
(``20 = 12 + 8`` with 12-row tiles): a few tile shapes serve every M.
"""
from __future__ import annotations

from xdsl.dialects import llvm

from tracec import dtypes as dt
from tracec.backends.cpu import codegen, gemm
from tracec.backends.cpu.builder import F32, F64, several, vec
from tracec.symbolic import known

__all__ = ["suitable", "conditions", "emit", "body_for"]

#: At most this many rows of C take this path (above it the packing is
#: shared by enough rows to pay for itself).
MAX_M = 32
#: Vector accumulators a row tile may hold (32 registers with AVX-512, a
#: few left for B's pieces and the broadcast).
ACC_BUDGET = 24


def _acc_budget() -> int:
    """ACC_BUDGET with AVX-512; 12 with 16 vector registers (AVX2)."""
    return ACC_BUDGET if codegen.vector_bits() >= 512 else 12


def suitable(d: dt.DType, M: int, N: int, K: int, tb: bool) -> bool:
    """Whether this kernel suits the product (static sizes)."""
    return conditions(d, M, N, K, tb) == []


def conditions(d: dt.DType, M, N, K, tb: bool) -> list | None:
    """When this kernel suits the product: None never (or it cannot: a
    symbolic N), else the ``(lhs, op, rhs)`` size conditions left to check
    at run time (``[]``: always), those the sizes decide already dropped."""
    if d not in (dt.float32, dt.float64) or tb or not isinstance(N, int) or \
            N < gemm.params_for(d)[2]:
        return None
    out = []
    for c in ((M, "<=", MAX_M), (K, ">=", 8), (M * N * K, ">=", 16 ** 3)):
        k = known(*c)
        if k is False:
            return None
        if k is not True:
            out.append(c)
    return out


def emit(low, slots, d: dt.DType, nb: int, M: int, N: int, K: int, bshape, sa, sb,
         ta: bool) -> None:
    body, npan = body_for(d, nb, M, N, K, bshape, sa, sb, ta)
    low.kernels.kernel("matmul_small", slots, nb * npan, body, work=nb * M * N * K,
                       key=("matmul_small", d.name, nb, M, N, K, tuple(bshape), tuple(sa),
                            tuple(sb), ta))


def body_for(d: dt.DType, nb: int, M: int, N: int, K: int, bshape, sa, sb, ta: bool):
    """``(body, npan)``: the kernel body ``body(fb, [c, a, b], err, lo, hi,
    status)`` computing work units (batch, column panel) ``[lo, hi)`` of
    ``nb * npan``; a kernel's own loop may call it too (``rnn_scan``'s steps)."""
    from tracec.backends.cpu.matmul import _chunks, batch_offset
    elt = F32 if d is dt.float32 else F64
    es = d.itemsize
    vl, mr, nr = gemm.params_for(d)
    nfull, rem = divmod(N, nr)
    npan = nfull + (rem > 0)
    sam, sak = (1, M) if ta else (K, 1)
    full_pieces = [(j * vl, vl) for j in range(nr // vl)]
    edge_pieces = _chunks(rem, vl) if rem else []

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs

        def tile(a0, b0, c0, i0, rows: int, j0, pieces):
            """Rows ``i0 .. i0 + rows`` (``i0``: an int or a run-time i64)
            of the panel at column ``j0``."""
            vts = [vec(elt, w) for _, w in pieces]
            if isinstance(i0, int):
                a0, c0 = fb.gep(a0, fb.i64(i0 * sam), elt), fb.gep(c0, fb.i64(i0 * N), elt)
            else:
                a0 = fb.gep(a0, i0 if sam == 1 else fb.mul(i0, fb.i64(sam)), elt)
                c0 = fb.gep(c0, fb.mul(i0, fb.i64(N)), elt)
            a_rows = [fb.gep(a0, fb.i64(r * sam), elt) if r else a0 for r in range(rows)]
            b_col = fb.gep(b0, j0, elt)

            def kstep(k, *accs):
                brow = fb.gep(b_col, fb.mul(k, fb.i64(N)), elt)
                bvs = [fb.load(fb.gep(brow, fb.i64(off), elt), vt, es)
                       for (off, _), vt in zip(pieces, vts)]
                ka = k if sak == 1 else fb.mul(k, fb.i64(sak))
                out = list(accs)
                for r in range(rows):
                    a = fb.load(fb.gep(a_rows[r], ka, elt), elt, es)
                    bc = {}
                    for j, vt in enumerate(vts):
                        w = pieces[j][1]
                        if w not in bc:
                            bc[w] = gemm.broadcast(fb, a, vt)
                        q = r * len(vts) + j
                        out[q] = fb.emit(llvm.FMAOp(bc[w], bvs[j], accs[q]))
                return out
            zeros = [gemm.splat_zero(fb, vt, elt) for vt in vts]
            accs = fb.for_range(fb.i64(0), fb.i64(K), kstep, carried=zeros * rows)
            for r in range(rows):
                crow = fb.gep(c0, fb.add(fb.i64(r * N), j0), elt)
                for j, (off, _) in enumerate(pieces):
                    fb.store(accs[r * len(vts) + j], fb.gep(crow, fb.i64(off), elt), es)

        def panel(a0, b0, c0, j0, pieces):
            # As few row tiles as the accumulator budget allows (each tile
            # reads the panel of B again), their heights balanced: M = 20
            # with 2 vectors per row is 10 + 10, not 8 + 8 + 4.
            most = max(1, _acc_budget() // len(pieces))
            if not isinstance(M, int):
                run_time_rows(a0, b0, c0, j0, pieces, most)
                return
            tiles = -(-M // most)
            group = -(-M // tiles)
            for i0 in range(0, M, group):
                tile(a0, b0, c0, i0, min(group, M - i0), j0, pieces)

        def run_time_rows(a0, b0, c0, j0, pieces, most: int):
            # Full tiles of ``most`` rows, then the rest (< most) as tiles
            # of its set bits, highest first (see the module docstring).
            m = fb.i64(M)
            full = fb.mul(fb.ibin("sdiv", m, fb.i64(most)), fb.i64(most))
            fb.for_range(fb.i64(0), full,
                         lambda i0: tile(a0, b0, c0, i0, most, j0, pieces) or (), step=most)
            rest = fb.sub(m, full)
            h = 1 << (most - 1).bit_length()
            while h > 1:
                h //= 2
                i0 = fb.add(full, fb.ibin("and", rest, fb.i64(-2 * h)))
                fb.if_then(fb.icmp("ne", fb.ibin("and", rest, fb.i64(h)), fb.i64(0)),
                           lambda i0=i0, h=h: tile(a0, b0, c0, i0, h, j0, pieces))

        def unit(u):
            b = fb.ibin("sdiv", u, fb.i64(npan)) if several(nb) else fb.i64(0)
            p = fb.ibin("srem", u, fb.i64(npan)) if several(nb) else u
            a0 = fb.gep(ap, batch_offset(fb, b, bshape, sa), elt)
            b0 = fb.gep(bp, batch_offset(fb, b, bshape, sb), elt)
            c0 = fb.gep(cp, fb.mul(b, fb.i64(M * N)), elt)
            j0 = fb.mul(p, fb.i64(nr))
            if edge_pieces:
                fb.if_else(fb.icmp("slt", p, fb.i64(nfull)),
                           lambda: panel(a0, b0, c0, j0, full_pieces),
                           lambda: panel(a0, b0, c0, j0, edge_pieces))
            else:
                panel(a0, b0, c0, j0, full_pieces)
            return ()
        fb.for_range(lo, hi, unit)
    return body, npan
