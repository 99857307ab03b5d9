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
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, i1
from xdsl.ir import SSAValue

from tracec import dtypes as dt
from tracec.backends.cpu import codegen, gemm, gemm_lib
from tracec.backends.cpu.builder import _ICMP, F32, F64, I64, PTR, several, vec
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
    """The product as a kernel of ``nb * npan`` work units (batch, column
    panel), each a call of the shape-generic routine ``_small_fn`` (from the
    per-machine GEMM library where the module uses it, ``gemm_lib``): the
    module holds no GEMM code of its own, so LLVM does not compile it again
    for every module (a third of the MLP step's cold compile, measured)."""
    from tracec.backends.cpu.matmul import batch_offset
    elt = F32 if d is dt.float32 else F64
    nr = gemm.params_for(d)[2]
    npan = -(-N // nr)
    fn = gemm_lib.declare(low.mb, "small", d, ta, False) if low.mb.use_libraries else \
        _small_fn(low.mb, d, ta)

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs
        dims = [fb.i64(v) for v in (M, N, K)]
        if not several(nb):
            fb.call(fn, [cp, ap, bp, *dims, lo, hi], None)
            return

        def unit(u):
            b = fb.ibin("sdiv", u, fb.i64(npan))
            p = fb.ibin("srem", u, fb.i64(npan))
            a0 = fb.gep(ap, batch_offset(fb, b, bshape, sa), elt)
            b0 = fb.gep(bp, batch_offset(fb, b, bshape, sb), elt)
            c0 = fb.gep(cp, fb.mul(b, fb.i64(M * N)), elt)
            fb.call(fn, [c0, a0, b0, *dims, p, fb.add(p, fb.i64(1))], None)
            return ()
        fb.for_range(lo, hi, unit)
    low.kernels.kernel("matmul_small", slots, nb * npan, body, work=nb * M * N * K,
                       key=("matmul_small", d.name, nb, M, N, K, tuple(bshape), tuple(sa),
                            tuple(sb), ta))


def _ix(fb, v):
    """An i64 value for ``v``: an SSA value as it is, a number or symbolic
    size as its constant (or run-time size)."""
    return v if isinstance(v, SSAValue) else fb.i64(v)


def _imul(fb, a, b):
    """``a * b`` for index-like operands, folded when both are numbers."""
    if not isinstance(a, SSAValue) and not isinstance(b, SSAValue):
        return fb.i64(a * b)
    return fb.mul(_ix(fb, a), _ix(fb, b))


def _tile(fb, elt, a0, b0, c0, i0, rows: int, j0, pieces, N, K, sam, sak,
          masks=None) -> None:
    """Rows ``i0 .. i0 + rows`` (``i0``: an int or a run-time i64) of the
    panel of C at column ``j0``: per k, the pieces of B's row segment
    loaded once, A[i, k] broadcast per row, one FMA per accumulator; C
    stored once.  ``N``, ``K``, ``sam``, ``sak`` (A's element strides along
    M and K): numbers, symbolic sizes or run-time i64 values.  ``masks``:
    per piece None or an ``<n x i1>`` of the lanes that are inside the row
    (the piece is then loaded and stored masked: nothing past it is touched)."""
    es = 4 if elt == F32 else 8
    masks = masks or [None] * len(pieces)
    vts = [vec(elt, w) for _, w in pieces]
    a0 = fb.gep(a0, i0 if sam == 1 and not isinstance(i0, int) else _imul(fb, i0, sam), elt)
    c0 = fb.gep(c0, _imul(fb, i0, N), elt)
    a_rows = [fb.gep(a0, _imul(fb, r, sam), elt) if r else a0 for r in range(rows)]
    b_col = fb.gep(b0, j0, elt)
    n = _ix(fb, N)

    def kstep(k, *accs):
        brow = fb.gep(b_col, fb.mul(k, n), elt)
        bvs = [_load(fb, fb.gep(brow, fb.i64(off), elt), vt, es, m)
               for (off, _), vt, m in zip(pieces, vts, masks)]
        ka = k if sak == 1 else fb.mul(k, _ix(fb, sak))
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
    accs = fb.for_range(fb.i64(0), _ix(fb, K), kstep, carried=zeros * rows)
    for r in range(rows):
        crow = fb.gep(c0, fb.add(_imul(fb, r, N), j0), elt)
        for j, (off, _) in enumerate(pieces):
            _store(fb, accs[r * len(vts) + j], fb.gep(crow, fb.i64(off), elt), es, masks[j])


def _load(fb, ptr, vt, es: int, mask):
    if mask is None:
        return fb.load(ptr, vt, es)
    zero = gemm.splat_zero(fb, vt, vt.element_type)
    return fb.intr("llvm.masked.load", [ptr, fb.i32(es), mask, zero], vt, overload=[vt, PTR])


def _store(fb, v, ptr, es: int, mask) -> None:
    if mask is None:
        fb.store(v, ptr, es)
    else:
        fb.intr("llvm.masked.store", [v, ptr, fb.i32(es), mask], None, overload=[v.type, PTR])


def _lanes_below(fb, n: int, count):
    """``<n x i1>``: lane i set where i < ``count`` (a run-time i64)."""
    lanes = llvm.ConstantOp.create(result_types=[vec(I64, n)], properties={
        "value": DenseIntOrFPElementsAttr(vec(I64, n), BytesAttr(
            b"".join(i.to_bytes(8, "little") for i in range(n))))})
    fb.emit(lanes)
    splat = gemm.broadcast(fb, count, vec(I64, n))
    return fb.emit(llvm.ICmpOp.create(operands=[lanes.results[0], splat],
                                      result_types=[vec(i1, n)],
                                      properties={"predicate": _ICMP["slt"]}))


def _panel(fb, elt, a0, b0, c0, j0, pieces, M, N, K, sam, sak, masks=None,
           pieces_budget: int = 0, pow2: bool = False) -> None:
    """All M rows of the panel at column ``j0``: as few row tiles as the
    accumulator budget allows (each tile reads the panel of B again), their
    heights balanced for a static M (M = 20 with 2 vectors per row is
    10 + 10, not 8 + 8 + 4); for a run-time M, full tiles and then the rest
    as tiles of its set bits, highest first (see the module docstring).
    ``pow2``: full tiles of a run-time M as high as a power of two (8 rows
    of two vectors with AVX-512, not 12), so the rest needs one tile height
    fewer: 8 + 4 + 2 + 1 rows of code instead of 12 + 8 + 4 + 2 + 1."""
    most = max(1, _acc_budget() // max(len(pieces), pieces_budget))
    if pow2 and not isinstance(M, int):
        most = 1 << (most.bit_length() - 1)
    args = (j0, pieces, N, K, sam, sak, masks)
    if isinstance(M, int):
        tiles = -(-M // most)
        group = -(-M // tiles)
        for i0 in range(0, M, group):
            _tile(fb, elt, a0, b0, c0, i0, min(group, M - i0), *args)
        return
    m = _ix(fb, M)
    full = fb.mul(fb.ibin("sdiv", m, fb.i64(most)), fb.i64(most))
    fb.for_range(fb.i64(0), full,
                 lambda i0: _tile(fb, elt, a0, b0, c0, i0, most, *args) or (), step=most)
    rest = fb.sub(m, full)
    h = 1 << (most - 1).bit_length()
    while h > 1:
        h //= 2
        i0 = fb.add(full, fb.ibin("and", rest, fb.i64(-2 * h)))
        fb.if_then(fb.icmp("ne", fb.ibin("and", rest, fb.i64(h)), fb.i64(0)),
                   lambda i0=i0, h=h: _tile(fb, elt, a0, b0, c0, i0, h, *args))


def _small_fn(mb, d: dt.DType, ta: bool) -> str:
    """``void @gemm_small(ptr c, ptr a, ptr b, i64 M, i64 N, i64 K, i64 lo,
    i64 hi)``: column panels ``[lo, hi)`` (NR columns each, the last the
    rest) of one product ``C[M, N] = A @ B``, B stored ``[K, N]``, A
    ``[M, K]`` (``[K, M]`` with ``ta``), every size a run-time argument.
    The last panel's columns (fewer than NR) are loaded and stored masked
    (``llvm.masked.load``/``store``: no access past the row): two panel
    shapes serve every N, which keeps the library's compile short (one
    piece per set bit of the rest, as ``body_for`` does for a static N,
    made it four times longer); the row tiles' heights are powers of two
    (``_panel``'s ``pow2``).  Its LLVM time on one core: 180 ms with 12-row
    tiles and three panel shapes, 86 with 8-row tiles, 60 with two panel
    shapes (the products as fast, measured for M = 8..32, K = 10..800).
    Shared by every small
    product of a module (or library) with this element type and layout."""
    key = ("gemm_small", d.name, ta)
    if key in mb.shared:
        return mb.shared[key]
    elt = F32 if d is dt.float32 else F64
    vl, _, nr = gemm.params_for(d)
    name = mb.unique(f"gemm_small_{'t' if ta else 'n'}n_{elt}")
    fb = mb.function(name, [PTR] * 3 + [I64] * 5, None, noalias=[True] * 3)
    cp, ap, bp, M, N, K, lo, hi = fb.args
    sam, sak = (1, M) if ta else (K, 1)
    nfull = fb.ibin("sdiv", N, fb.i64(nr))
    dims = (M, N, K, sam, sak)

    def unit(p):
        j0 = fb.mul(p, fb.i64(nr))

        def edge():
            # The rest (1 .. NR-1 columns): the full panel's two pieces,
            # both masked (the second's mask empty when the rest fits one
            # vector: its FMAs wasted on the last panel only, where a
            # third shape of panel would add a fifth of this routine's
            # compile).
            rem = fb.sub(N, j0)
            _panel(fb, elt, ap, bp, cp, j0, [(0, vl), (vl, vl)], *dims,
                   masks=[_lanes_below(fb, vl, rem), _lanes_below(fb, vl, fb.sub(rem, fb.i64(vl)))],
                   pow2=True)
        fb.if_else(fb.icmp("slt", p, nfull),
                   lambda: _panel(fb, elt, ap, bp, cp, j0, [(0, vl), (vl, vl)], *dims, pow2=True),
                   edge)
        return ()
    fb.for_range(lo, hi, unit)
    fb.ret_()
    fb.finish()
    mb.shared[key] = name
    return name


def body_for(d: dt.DType, nb: int, M: int, N: int, K: int, bshape, sa, sb, ta: bool):
    """``(body, npan)``: the kernel body ``body(fb, [c, a, b], err, lo, hi,
    status)`` computing work units (batch, column panel) ``[lo, hi)`` of
    ``nb * npan`` with N (and the batch) static, inlined where it is used
    (``rnn_scan``'s steps call it inside their own loop)."""
    from tracec.backends.cpu.matmul import _chunks, batch_offset
    elt = F32 if d is dt.float32 else F64
    vl, mr, nr = gemm.params_for(d)
    nfull, rem = divmod(N, nr)
    npan = nfull + (rem > 0)
    sam, sak = (1, M) if ta else (K, 1)
    full_pieces = [(j * vl, vl) for j in range(nr // vl)]
    edge_pieces = _chunks(rem, vl) if rem else []

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs

        def unit(u):
            b = fb.ibin("sdiv", u, fb.i64(npan)) if several(nb) else fb.i64(0)
            p = fb.ibin("srem", u, fb.i64(npan)) if several(nb) else u
            a0 = fb.gep(ap, batch_offset(fb, b, bshape, sa), elt)
            b0 = fb.gep(bp, batch_offset(fb, b, bshape, sb), elt)
            c0 = fb.gep(cp, fb.mul(b, fb.i64(M * N)), elt)
            j0 = fb.mul(p, fb.i64(nr))
            dims = (M, N, K, sam, sak)
            if edge_pieces:
                fb.if_else(fb.icmp("slt", p, fb.i64(nfull)),
                           lambda: _panel(fb, elt, a0, b0, c0, j0, full_pieces, *dims),
                           lambda: _panel(fb, elt, a0, b0, c0, j0, edge_pieces, *dims))
            else:
                _panel(fb, elt, a0, b0, c0, j0, full_pieces, *dims)
            return ()
        fb.for_range(lo, hi, unit)
    return body, npan
