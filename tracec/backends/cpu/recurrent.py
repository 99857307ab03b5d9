"""The cpu lowering of ``rnn_scan`` and ``rnn_scan_grad`` (``tracec.ops.recurrent``):
each is one kernel running a native loop over the T time steps (T and N
may be symbolic: read at run time), so one compiled function serves every
sequence length.

Forward, per step: the recurrent product ``h_{t-1} @ W`` ``[N, G]`` is one
short GEMM (``gemm_small``'s unpacked kernel, inlined, for a batch of at most
32 rows; else a call of the shared packed ``gemm_run``) from a contiguous
copy of ``h_{t-1}`` in a scratch buffer; the gate math (input projection plus
product, activations, the cell update) then runs fused over ``n, j`` and
writes the step's row of the packed result and the next ``h``.  Row 0 holds
``c0`` while the steps run, so step 0 reads its previous cell where every
other step does (the previous step's row); it gets the final state at the
end.

Backward: row 0 of the result carries ``dh`` (and ``dc``) from step to step;
per step the gate gradients are computed fused over ``n, j`` (into the
step's row and, as the GEMM's A, a contiguous scratch ``[N, G]``), then
``dh_{t-1} = dgates @ W^T`` is one GEMM call (on a copy of ``W^T`` made
once per call, not transposed by every step's packing).  Scratch buffers
come from ``aligned_alloc`` once per call.  The kernels run on one thread
(the steps are sequential; the GEMM of a step is short).

Invariant: the results equal the primitives' NumPy definitions up to float
rounding (and, for float32, the fast ``tanh``/``exp`` of ``mathfns``).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ir
from tracec.backends.cpu import gemm, gemm_lib, gemm_small, scalar
from tracec.backends.cpu.builder import F32, F64, I32, I64, PTR
from tracec.backends.cpu.scalar import LoweringError
from tracec.ops.recurrent import grad_width, out_width
from tracec.symbolic import Sym

__all__ = ["emit_rnn_scan", "emit_rnn_scan_grad"]


class _Math:
    """Scalar helpers over one kernel's builder for element type ``d``."""

    def __init__(self, fb, d):
        self.fb, self.d = fb, d
        self.one = scalar.constant(fb, 1.0, d)
        self.zero = scalar.constant(fb, 0.0, d)

    def ld(self, p, i):
        return scalar.load(self.fb, p, i, self.d)

    def st(self, v, p, i):
        scalar.store(self.fb, v, p, i, self.d)

    def add(self, a, b):
        return self.fb.fbin("fadd", a, b)

    def sub(self, a, b):
        return self.fb.fbin("fsub", a, b)

    def mul(self, a, b):
        return self.fb.fbin("fmul", a, b)

    def sig(self, x):
        return scalar._unary(self.fb, "logistic", x, self.d)

    def tanh(self, x):
        return scalar._unary(self.fb, "tanh", x, self.d)

    def dsig(self, s):       # s (1 - s)
        return self.mul(s, self.sub(self.one, s))

    def dtanh(self, y):      # 1 - y^2
        return self.sub(self.one, self.mul(y, y))


def _check(op, d):
    if d not in (dt.float32, dt.float64):
        raise LoweringError(f"{ir.primitive_name(op)}: the cpu backend runs float32 and "
                            f"float64, not {d.name}")


def _ix(fb, *terms):
    """Sum of i64 values / ints / sizes."""
    out = None
    for t in terms:
        v = fb.i64(t) if isinstance(t, (int, Sym)) else t
        out = v if out is None else fb.add(out, v)
    return out


class _Gemm:
    """Per-step products ``C [M, Nc] = A [M, K] @ B [K, Nc]`` (all contiguous)
    on one thread: the unpacked small-product kernel (``gemm_small``: B read
    in place, no packing per step) where it suits the sizes (a symbolic batch
    M: checked at run time), else the shared packed GEMM (``gemm_run``)."""

    def __init__(self, low, d, M, Nc, K):
        elt = F32 if d is dt.float32 else F64
        vl, mr, nr = gemm.params_for(d)
        self.fn = gemm_lib.declare(low.mb, "run", d, False, False) if low.mb.use_libraries \
            else gemm._run_fn(low.mb, elt, vl, mr, nr, False, False)
        self.mt = gemm._cdiv(M, gemm.MC_PANELS * mr)
        self.ncb = min(gemm.NC, gemm._cdiv(Nc, nr) * nr)
        self.nt = gemm._cdiv(Nc, self.ncb)
        self.sizes = (M, Nc, K)
        self.conds = gemm_small.conditions(d, M, Nc, K, False)
        if self.conds is not None:
            self.small, self.npan = gemm_small.body_for(d, 1, M, Nc, K, (), [], [], False)

    def __call__(self, fb, c, a, b, fail):
        def packed():
            mt, nt = fb.i64(self.mt), fb.i64(self.nt)
            rc = fb.call(self.fn, [c, a, b, fb.i64(0), fb.mul(mt, nt)] +
                         [fb.i64(v) for v in self.sizes] + [mt, nt, fb.i64(self.ncb)], I32)
            fb.if_then(fb.icmp("ne", rc, fb.i32(0)), fail)

        def small():
            self.small(fb, [c, a, b], None, fb.i64(0), fb.i64(self.npan), None)
        if self.conds is None:
            packed()
        elif not self.conds:
            small()
        else:
            ok = None
            for lhs, op, rhs in self.conds:
                v = fb.icmp({"<=": "sle", ">=": "sge"}[op], fb.i64(lhs), fb.i64(rhs))
                ok = v if ok is None else fb.ibin("and", ok, v)
            fb.if_else(ok, small, packed)


def _scratch(fb, d, sizes, oom, status, run):
    """``run(*buffers)`` with heap buffers of ``sizes`` elements (64-byte
    aligned, freed after); error ``oom`` if one cannot be had."""
    fb.mb.declare("aligned_alloc", [I64, I64], PTR)
    fb.mb.declare("free", [PTR], None)
    bufs = []
    for n in sizes:
        nbytes = fb.mul(fb.i64(n), fb.i64(scalar.itemsize(d)))
        nbytes = fb.mul(fb.ibin("sdiv", fb.add(nbytes, fb.i64(64)), fb.i64(64)), fb.i64(64))
        bufs.append(fb.call("aligned_alloc", [fb.i64(64), nbytes], PTR))
    bad = None
    for b in bufs:
        isnull = gemm._is_null(fb, b)
        bad = isnull if bad is None else fb.ibin("or", bad, isnull)
    fb.if_else(bad, lambda: fb.store(fb.i32(oom), status(), 4), lambda: run(*bufs))
    for b in bufs:
        fb.call("free", [b], None)


def _oom(low, name):
    key = ("rnn_scan_oom",)
    code = low.mb.shared.get(key)
    if code is None:
        code = low.mb.shared[key] = low.kernels.error(f"{name}: out of memory for its buffers")
    return code


def emit_rnn_scan(low, op) -> None:
    p = ir.op_params(op)
    mode, rev = p["mode"], bool(p["reverse"])
    res = op.results[0]
    xs = list(op.operands)
    T, N, G = ir.shape_of(xs[0].type)
    H = ir.shape_of(xs[2].type)[1]
    W = out_width(mode, H)
    d = ir.dtype_of(res.type)
    _check(op, d)
    lstm, gru = mode == "LSTM", mode == "GRU"
    has_b = gru and len(xs) == 4
    slots = [low.slot_value(res)] + [low.slot_value(v) for v in xs]
    product = _Gemm(low, d, N, G, H)
    oom = _oom(low, "rnn_scan")

    def body(fb, ptrs, err, lo, hi, status):
        m = _Math(fb, d)
        outp, gip, wp, h0p = ptrs[:4]
        xp = ptrs[4] if len(ptrs) > 4 else None     # c0 (LSTM) or b (GRU)
        i64 = fb.i64
        Tv, Nv = i64(T), i64(N)
        rowsz = fb.mul(Nv, i64(W))

        def run(hs, gs):
            # hs [N, H]: h_{t-1}, contiguous (the GEMM's A); gs [N, G]: h_{t-1} @ W
            def init(n):
                base, hb = fb.mul(n, i64(W)), fb.mul(n, i64(H))

                def col(j):
                    h = m.ld(h0p, fb.add(hb, j))
                    m.st(h, outp, fb.add(base, j))
                    m.st(h, hs, fb.add(hb, j))
                    if lstm:
                        m.st(m.ld(xp, fb.add(hb, j)), outp, _ix(fb, base, H, j))
                fb.for_range(i64(0), i64(H), col)
                fb.for_range(i64(2 * H if lstm else H), i64(W),
                             lambda j: m.st(m.zero, outp, fb.add(base, j)))
            fb.for_range(i64(0), Nv, init)

            def step(s):
                t = fb.sub(fb.sub(Tv, i64(1)), s) if rev else s
                if rev:
                    prow = fb.select(fb.icmp("eq", s, i64(0)), i64(0), fb.add(t, i64(2)))
                else:
                    prow = t
                orow0 = fb.mul(fb.add(t, i64(1)), rowsz)
                prow0 = fb.mul(prow, rowsz)
                gi0 = fb.mul(fb.mul(t, Nv), i64(G))
                product(fb, gs, hs, wp, lambda: fb.store(fb.i32(oom), status(), 4))

                def row(n):
                    orow = fb.add(orow0, fb.mul(n, i64(W)))
                    prev = fb.add(prow0, fb.mul(n, i64(W)))
                    girow = fb.add(gi0, fb.mul(n, i64(G)))
                    grow = fb.mul(n, i64(G))
                    hrow = fb.mul(n, i64(H))

                    def gate(j):
                        def o(k):   # column k*H + j of this step's row
                            return _ix(fb, orow, k * H, j)

                        def pre(k):     # gi + h @ W of gate k
                            return m.add(m.ld(gip, _ix(fb, girow, k * H, j)),
                                         m.ld(gs, _ix(fb, grow, k * H, j)))
                        if lstm:
                            i_, f_, g_, o_ = m.sig(pre(0)), m.sig(pre(1)), m.tanh(pre(2)), \
                                m.sig(pre(3))
                            cp = m.ld(outp, _ix(fb, prev, H, j))
                            c = m.add(m.mul(f_, cp), m.mul(i_, g_))
                            h = m.mul(o_, m.tanh(c))
                            for k, v in ((2, i_), (3, f_), (4, g_), (5, o_), (1, c)):
                                m.st(v, outp, o(k))
                        elif gru:
                            def gh(k):
                                v = m.ld(gs, _ix(fb, grow, k * H, j))
                                return m.add(v, m.ld(xp, _ix(fb, k * H, j))) if has_b else v
                            ghn = gh(2)
                            r = m.sig(m.add(m.ld(gip, fb.add(girow, j)), gh(0)))
                            z = m.sig(m.add(m.ld(gip, _ix(fb, girow, H, j)), gh(1)))
                            n_ = m.tanh(m.add(m.ld(gip, _ix(fb, girow, 2 * H, j)),
                                              m.mul(r, ghn)))
                            hp = m.ld(hs, fb.add(hrow, j))
                            h = m.add(n_, m.mul(z, m.sub(hp, n_)))
                            for k, v in ((1, r), (2, z), (3, n_), (4, ghn)):
                                m.st(v, outp, o(k))
                        else:
                            v = pre(0)
                            if mode == "RNN_TANH":
                                h = m.tanh(v)
                            else:   # NaN stays NaN, as np.maximum
                                h = fb.select(fb.fcmp("olt", v, m.zero), m.zero, v)
                        m.st(h, outp, o(0))
                        m.st(h, hs, fb.add(hrow, j))
                    fb.for_range(i64(0), i64(H), gate)
                fb.for_range(i64(0), Nv, row)
            fb.for_range(i64(0), Tv, step)

            def final():
                last = fb.mul(i64(1) if rev else Tv, rowsz)

                def frow(n):
                    src = fb.add(last, fb.mul(n, i64(W)))
                    dst = fb.mul(n, i64(W))
                    fb.for_range(i64(0), i64(2 * H if lstm else H), lambda j: m.st(
                        m.ld(outp, fb.add(src, j)), outp, fb.add(dst, j)))
                fb.for_range(i64(0), Nv, frow)
            if isinstance(T, int):
                if T:
                    final()
            else:
                fb.if_then(fb.icmp("sgt", Tv, i64(0)), final)
        _scratch(fb, d, [N * H, N * G], oom, status, run)

    low.kernels.kernel("rnn_scan", slots, 1, body, work=T * N * H * G, parallel_ok=False)


def emit_rnn_scan_grad(low, op) -> None:
    p = ir.op_params(op)
    mode, rev = p["mode"], bool(p["reverse"])
    res = op.results[0]
    xs = list(op.operands)       # g, out, w, h0[, c0]
    T1, N, W = ir.shape_of(xs[1].type)
    H, G = ir.shape_of(xs[2].type)
    K = grad_width(mode, H)
    d = ir.dtype_of(res.type)
    _check(op, d)
    lstm, gru = mode == "LSTM", mode == "GRU"
    slots = [low.slot_value(res)] + [low.slot_value(v) for v in xs]
    product = _Gemm(low, d, N, H, G)
    oom = _oom(low, "rnn_scan_grad")
    st_t = scalar.storage_type(d)

    def body(fb, ptrs, err, lo, hi, status):
        m = _Math(fb, d)
        rp, gp, outp, wp, h0p = ptrs[:5]
        c0p = ptrs[5] if lstm else None
        i64 = fb.i64
        Nv = fb.i64(N)
        Tv = fb.sub(fb.i64(T1), i64(1))
        orowsz = fb.mul(Nv, i64(W))
        rrowsz = fb.mul(Nv, i64(K))

        def run(dgs, dhs, wtp):
            # dgs [N, G]: the gradient of h_{t-1} @ W (the GEMM's A); dhs [N, H]: dgs @ W^T;
            # wtp [G, H]: W^T, transposed once here rather than by every step's packing
            fb.for_range(i64(0), i64(H), lambda k: fb.for_range(i64(0), i64(G), lambda g: m.st(
                m.ld(wp, _ix(fb, fb.mul(k, i64(G)), g)), wtp,
                _ix(fb, fb.mul(g, i64(H)), k))))
            def init(n):
                cb, ob = fb.mul(n, i64(K)), fb.mul(n, i64(W))
                fb.for_range(i64(0), i64(2 * H if lstm else H), lambda j: m.st(
                    m.ld(gp, fb.add(ob, j)), rp, fb.add(cb, j)))
            fb.for_range(i64(0), Nv, init)

            def step(s):
                t = s if rev else fb.sub(fb.sub(Tv, i64(1)), s)
                first = fb.icmp("eq", t, fb.sub(Tv, i64(1)) if rev else i64(0))
                prow = fb.add(t, i64(2)) if rev else t
                orow0 = fb.mul(fb.add(t, i64(1)), orowsz)
                rrow0 = fb.mul(fb.add(t, i64(1)), rrowsz)
                prow0 = fb.mul(prow, orowsz)

                def row(n):
                    orow = fb.add(orow0, fb.mul(n, i64(W)))
                    rrow = fb.add(rrow0, fb.mul(n, i64(K)))
                    carry = fb.mul(n, i64(K))
                    hb = fb.mul(n, i64(H))
                    grow = fb.mul(n, i64(G))
                    prev = fb.add(prow0, fb.mul(n, i64(W)))
                    hprev = fb.select(first, fb.gep(h0p, hb, st_t), fb.gep(outp, prev, st_t))
                    cprev = fb.select(first, fb.gep(c0p, hb, st_t),
                                      fb.gep(outp, _ix(fb, prev, H), st_t)) if lstm else None

                    def col(j):
                        def o(k):
                            return _ix(fb, orow, k * H, j)

                        def gg(k):
                            return m.ld(gp, o(k))

                        def put(v, k, dk=None):     # result column k; dgs column dk
                            m.st(v, rp, _ix(fb, rrow, k * H, j))
                            if dk is not None:
                                m.st(v, dgs, _ix(fb, grow, dk * H, j))
                        dh = m.add(m.ld(rp, fb.add(carry, j)), gg(0))
                        if lstm:
                            cp = m.ld(cprev, j)
                            c = m.ld(outp, o(1))
                            i_, f_, g_, o_ = (m.ld(outp, o(k)) for k in (2, 3, 4, 5))
                            tc = m.tanh(c)
                            dc = m.add(m.add(m.ld(rp, _ix(fb, carry, H, j)), gg(1)),
                                       m.mul(m.mul(dh, o_), m.dtanh(tc)))
                            put(m.mul(m.add(m.mul(dc, g_), gg(2)), m.dsig(i_)), 0, 0)
                            put(m.mul(m.add(m.mul(dc, cp), gg(3)), m.dsig(f_)), 1, 1)
                            put(m.mul(m.add(m.mul(dc, i_), gg(4)), m.dtanh(g_)), 2, 2)
                            put(m.mul(m.add(m.mul(dh, tc), gg(5)), m.dsig(o_)), 3, 3)
                            m.st(m.mul(dc, f_), rp, _ix(fb, carry, H, j))
                        elif gru:
                            r, z, n_, hn = (m.ld(outp, o(k)) for k in (1, 2, 3, 4))
                            hp = m.ld(hprev, j)
                            dn = m.mul(m.add(m.mul(dh, m.sub(m.one, z)), gg(3)), m.dtanh(n_))
                            put(m.mul(m.add(m.mul(dn, hn), gg(1)), m.dsig(r)), 0, 0)
                            put(m.mul(m.add(m.mul(dh, m.sub(hp, n_)), gg(2)), m.dsig(z)), 1, 1)
                            put(dn, 2)
                            put(m.add(m.mul(dn, r), gg(4)), 3, 2)
                            m.st(m.mul(dh, z), rp, fb.add(carry, j))
                        else:
                            h = m.ld(outp, o(0))
                            if mode == "RNN_TANH":
                                da = m.mul(dh, m.dtanh(h))
                            else:
                                da = m.mul(dh, fb.select(fb.fcmp("ogt", h, m.zero), m.one,
                                                         m.zero))
                            put(da, 0, 0)
                    fb.for_range(i64(0), i64(H), col)
                fb.for_range(i64(0), Nv, row)
                product(fb, dhs, dgs, wtp, lambda: fb.store(fb.i32(oom), status(), 4))

                def back(n):
                    carry, hb = fb.mul(n, i64(K)), fb.mul(n, i64(H))

                    def k_(k):
                        v = m.ld(dhs, fb.add(hb, k))
                        if gru:     # plus the direct term dh * z
                            v = m.add(m.ld(rp, fb.add(carry, k)), v)
                        m.st(v, rp, fb.add(carry, k))
                    fb.for_range(i64(0), i64(H), k_)
                fb.for_range(i64(0), Nv, back)
            fb.for_range(i64(0), Tv, step)

            def zero_rest(n):
                cb = fb.mul(n, i64(K))
                fb.for_range(i64(2 * H if lstm else H), i64(K),
                             lambda j: m.st(m.zero, rp, fb.add(cb, j)))
            if K > (2 * H if lstm else H):
                fb.for_range(i64(0), Nv, zero_rest)
        _scratch(fb, d, [N * G, N * H, H * G], oom, status, run)

    low.kernels.kernel("rnn_scan_grad", slots, 1, body, work=(T1 - 1) * N * H * G,
                       parallel_ok=False)
