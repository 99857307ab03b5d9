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

from xdsl.dialects import llvm

from tracec import dtypes as dt
from tracec import ir
from tracec.symbolic import hint_of, known
from tracec.backends.cpu import codegen, gemm, gemm_small, scalar
from tracec.backends.cpu.builder import F32, F64, FuncBuilder, several, vec

__all__ = ["emit_matmul", "batch_strides", "swaps_last_two",
           "small_a_transposed_takes_gemm"]


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
    if known(nb * M * N, "==", 0):
        return
    if nb > 1 and not any(sb) and not ta and math.prod(ashape[:-2]) == nb:
        # One B for every batch, A stored whole ([nb, M, K], rows contiguous)
        # and C likewise: one [nb * M, K] @ [K, N] product (a Linear on a
        # [T, B, F] input), which packs B once instead of once per batch.
        M, nb, bshape, sa, sb = nb * M, 1, (), [], []
    # Symbolic sizes (known at run time): the narrow kernel needs a static
    # N (and K with B transposed), the small one a static N and batch; the
    # GEMM and the row kernel take any.  Between the small kernel and the
    # others the sizes of each call choose (``gemm_small.conditions``, no
    # size guard); between the GEMM and the row kernel the sizes being
    # compiled for do (hints: a choice of speed, not of result).
    if d in (dt.float32, dt.float64) and isinstance(N, int) and N < gemm.params_for(d)[2] and (
            not tb or (isinstance(K, int) and K * N * d.itemsize <= NARROW_STACK_BYTES
                       and not any(sb))):
        # Narrower than the GEMM's register tile (NR): it would pad.
        _emit_narrow(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb)
        return
    conds = gemm_small.conditions(d, M, N, K, tb) if isinstance(nb, int) else None
    if conds is not None and small_a_transposed_takes_gemm(d, M, N, K, ta):
        conds = None
    if conds is not None:
        # The small kernel where ``conds`` hold; the others where the first
        # that fails is the i-th (disjoint cases, one of which runs).
        with low.kernels.only_where(*conds):
            gemm_small.emit(low, slots, d, nb, M, N, K, bshape, sa, sb, ta)
        for i, (lhs, op, rhs) in enumerate(conds):
            with low.kernels.only_where(*conds[:i], (lhs, _NOT[op], rhs)):
                big_m = lhs is M and op == "<="      # (this case: M > MAX_M)
                _emit_large(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb,
                            max(hint_of(M), gemm_small.MAX_M + 1) if big_m else hint_of(M))
        return
    _emit_large(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb, hint_of(M))


_NOT = {"<=": ">", ">=": "<", "<": ">=", ">": "<="}


def small_a_transposed_takes_gemm(d: dt.DType, M, N, K, ta: bool) -> bool:
    """Whether a short product with A read transposed (``[K, M]^T @ [K,
    N]``: a weight gradient ``g.T @ x`` over a small batch K) takes the
    packed GEMM (``gemm_run_tn``, shared with the step's other weight
    gradients in the per-machine GEMM library) instead of the unpacked
    small kernel: wherever the GEMM suits its sizes, M and N static (a
    symbolic K, a dynamic batch, by its hint: a choice of speed, not of
    result, as in ``_emit_large``; a symbolic M may be 1).  A cold compile then
    builds one library routine fewer (``gemm_small_tn``, ~250 ms of CPU
    on the first compile on a machine); at steady state the GEMM costs a
    few microseconds more per product (it packs both operands; figures in
    docs/latency.md).  Below ``gemm.suitable`` (fewer rows than the
    micro-kernel's MR, or a tiny product) the small kernel stays."""
    return ta and isinstance(M, int) and isinstance(N, int) and \
        gemm.suitable(d, M, N, hint_of(K))


def _emit_large(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb, m_hint) -> None:
    """The GEMM, or the row kernel for products too small for it (``m_hint``:
    M, or the value of a symbolic M to choose for)."""
    if gemm.suitable(d, m_hint, hint_of(N), hint_of(K)):
        gemm.emit_gemm(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb)
        return
    # Element strides of A[m, k] and B[k, n] within one matrix.
    sam, sak = (1, M) if ta else (K, 1)
    sbk, sbn = (1, K) if tb else (N, 1)
    ct = scalar.compute_type(d)
    # B read transposed with K contiguous: dot products along K (vectorized
    # with a reassociated sum) instead of rows of C along a strided N.
    dot = tb and not ta and d in (dt.float32, dt.float64)
    # float16/bfloat16: each element a float32 dot product rounded once, as
    # eager (and PyTorch's CPU kernels) compute them; C rows accumulated in
    # storage would round at every k (float16) or never (bfloat16).
    half = d in (dt.float16, dt.bfloat16)
    dot = dot or half

    def idx(fb, base, i, si, j, sj):
        t = base
        for v, s in ((i, si), (j, sj)):
            t = fb.add(t, v if s == 1 else fb.mul(v, fb.i64(s)))
        return t

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs

        def row(r):
            bi = fb.ibin("sdiv", r, fb.i64(M)) if several(nb) else fb.i64(0)
            m = fb.ibin("srem", r, fb.i64(M)) if several(nb) else r
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
                    if half:
                        acc = scalar.round_to(fb, acc, d)
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
    low.kernels.kernel("matmul", slots, nb * M, body, work=nb * M * N * K,
                       key=("matmul", d.name, M, N, K, tuple(bshape), tuple(sa), tuple(sb),
                            ta, tb))


def _chunks(n: int, vl: int) -> list[tuple[int, int]]:
    """``(offset, width)`` pieces of a row of ``n`` elements, widths powers
    of two of at most ``vl``: LLVM scalarizes arithmetic on odd-sized
    vectors such as ``<24 x float>`` (spilling it), never on these."""
    out, off = [], 0
    w = vl
    while off < n:
        while w > n - off:
            w //= 2
        out.append((off, w))
        off += w
    return out


#: The largest B stored ``[N, K]`` the narrow kernel copies to ``[K, N]``
#: on its stack (each thread, once per call).
NARROW_STACK_BYTES = 64 * 1024


def _emit_narrow(low, slots, d, nb, M, N, K, bshape, sa, sb, ta, tb) -> None:
    """C = A @ B for a float B stored ``[K, N]`` with N narrower than the
    GEMM's register tile (a classifier's last layer, its weight gradient):
    each row of C is held in registers (a few power-of-two vector pieces)
    over the K loop (``acc += splat(A[m, k]) * B[k, :]``), several rows at
    a time so each loaded row of B feeds several FMAs.  The row kernel's
    loop over so short an N hardly vectorizes (measured 2 GFLOP/s for
    ``[256, 512] @ [512, 10]``; this kernel: 28-40, like OpenBLAS).  A B
    stored ``[N, K]`` (``x @ w.T``, an ``nn.Linear``) is first copied,
    transposed, to the stack (it is small: ``NARROW_STACK_BYTES``)."""
    elt = F32 if d is dt.float32 else F64
    es = d.itemsize
    vl = gemm.params_for(d)[0]
    pieces = _chunks(N, vl)
    vts = [vec(elt, w) for _, w in pieces]
    sam, sak = (1, M) if ta else (K, 1)
    # Accumulators must stay in registers (32 vector registers with
    # AVX-512, 16 with AVX2; some are needed for B and the broadcasts).
    # With a batch, rows of one group may belong to different matrices:
    # then one row at a time, each with its own offsets.
    budget = 24 if codegen.vector_bits() >= 512 else 10
    group = max(1, min(4, budget // len(pieces))) if nb == 1 else 1

    def body(fb, ptrs, err, lo, hi, status):
        cp, ap, bp = ptrs
        zeros = [gemm.splat_zero(fb, vt, elt) for vt in vts]
        if tb:
            src, bp = bp, fb.alloca(elt, K * N, 64)

            def tcol(n):
                def tk(k):
                    v = fb.load(fb.gep(src, fb.add(fb.mul(n, fb.i64(K)), k), elt), elt, es)
                    fb.store(v, fb.gep(bp, fb.add(fb.mul(k, fb.i64(N)), n), elt), es)
                    return ()
                fb.for_range(fb.i64(0), fb.i64(K), tk)
                return ()
            fb.for_range(fb.i64(0), fb.i64(N), tcol)

        def rows(r0, n):
            a_base, b_base = [], None
            for i in range(n):
                r = fb.add(r0, fb.i64(i)) if i else r0
                if several(nb):
                    bi = fb.ibin("sdiv", r, fb.i64(M))
                    m = fb.ibin("srem", r, fb.i64(M))
                    b_base = batch_offset(fb, bi, bshape, sb)
                    aoff = batch_offset(fb, bi, bshape, sa)
                else:
                    m, aoff = r, fb.i64(0)
                a_base.append(fb.add(aoff, fb.mul(m, fb.i64(sam))))
            b_base = b_base if b_base is not None else fb.i64(0)

            def kstep(k, *accs):
                brow = fb.add(b_base, fb.mul(k, fb.i64(N)))
                bvs = [fb.load(fb.gep(bp, fb.add(brow, fb.i64(off)), elt), vt, es)
                       for (off, _), vt in zip(pieces, vts)]
                ka = fb.mul(k, fb.i64(sak))
                out = list(accs)
                for i in range(n):
                    a = fb.load(fb.gep(ap, fb.add(a_base[i], ka), elt), elt, es)
                    for j, vt in enumerate(vts):
                        q = i * len(vts) + j
                        out[q] = fb.emit(llvm.FMAOp(gemm.broadcast(fb, a, vt), bvs[j], accs[q]))
                return out
            accs = fb.for_range(fb.i64(0), fb.i64(K), kstep, carried=zeros * n)
            for i in range(n):
                crow = fb.mul(fb.add(r0, fb.i64(i)) if i else r0, fb.i64(N))
                for j, (off, _) in enumerate(pieces):
                    fb.store(accs[i * len(vts) + j],
                             fb.gep(cp, fb.add(crow, fb.i64(off)), elt), es)

        # Whole groups, then the remaining rows one at a time.
        split = fb.add(lo, fb.mul(fb.ibin("sdiv", fb.sub(hi, lo), fb.i64(group)),
                                  fb.i64(group)))
        fb.for_range(lo, split, lambda r: rows(r, group) or (), step=group)
        if group > 1:
            fb.for_range(split, hi, lambda r: rows(r, 1) or ())
    low.kernels.kernel("matmul_narrow", slots, nb * M, body, work=nb * M * N * K,
                       key=("matmul_narrow", d.name, M, N, K, tuple(bshape), tuple(sa),
                            tuple(sb), ta, tb))
