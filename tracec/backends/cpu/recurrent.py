"""The cpu lowering of ``rnn_scan`` and ``rnn_scan_grad`` (``tracec.ops.recurrent``):
each is one kernel running a native loop over the T time steps (T and N
may be symbolic: read at run time), so one compiled function serves every
sequence length.

Forward, per step and batch row ``n``: the recurrent product ``h_{t-1} @ W``
is accumulated row-wise into the step's gate columns of the packed result
(``acc[g] += h[k] * W[k, g]``, whose inner loop over contiguous ``g``
vectorizes), starting from the input projection (GRU: from ``b_hh``); the
gate math then runs in place over ``j < H``.  Row 0 holds ``h0`` (and
``c0``) while the steps run, so step 0 reads its previous state where every
other step does (the previous step's row); it gets the final state at the
end.

Backward: row 0 of the result carries ``dh`` (and ``dc``) from step to step;
per step and row ``n`` the gate gradients are computed over ``j < H``, then
``dh_{t-1}[k] = sum_g dgates[g] W[k, g]`` as dot products along contiguous
``g`` (a reassociated sum, so it vectorizes).

Invariant: the results equal the primitives' NumPy definitions up to float
rounding (and, for float32, the fast ``tanh``/``exp`` of ``mathfns``).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ir
from tracec.backends.cpu import scalar
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

    def body(fb, ptrs, err, lo, hi, status):
        m = _Math(fb, d)
        outp, gip, wp, h0p = ptrs[:4]
        xp = ptrs[4] if len(ptrs) > 4 else None     # c0 (LSTM) or b (GRU)
        Tv, Nv = fb.i64(T), fb.i64(N)
        rowsz = fb.mul(Nv, fb.i64(W))
        i64 = fb.i64

        def init(n):
            base = fb.mul(n, i64(W))
            hb = fb.mul(n, i64(H))

            def col(j):
                m.st(m.ld(h0p, fb.add(hb, j)), outp, fb.add(base, j))
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

            def row(n):
                orow = fb.add(orow0, fb.mul(n, i64(W)))
                prev = fb.add(prow0, fb.mul(n, i64(W)))
                girow = fb.add(gi0, fb.mul(n, i64(G)))
                acc = fb.add(orow, i64(2 * H if lstm or gru else 0))
                if gru:
                    fb.for_range(i64(0), i64(G), lambda g: m.st(
                        m.ld(xp, g) if has_b else m.zero, outp, fb.add(acc, g)))
                else:
                    fb.for_range(i64(0), i64(G), lambda g: m.st(
                        m.ld(gip, fb.add(girow, g)), outp, fb.add(acc, g)))

                def kloop(k):
                    a = m.ld(outp, fb.add(prev, k))
                    wrow = fb.mul(k, i64(G))

                    def gloop(g):
                        at = fb.add(acc, g)
                        m.st(m.add(m.ld(outp, at), m.mul(a, m.ld(wp, fb.add(wrow, g)))),
                             outp, at)
                    fb.for_range(i64(0), i64(G), gloop)
                fb.for_range(i64(0), i64(H), kloop)

                def gate(j):
                    def o(k):   # column k*H + j of this step's row
                        return _ix(fb, orow, k * H, j)
                    if lstm:
                        i_, f_ = m.sig(m.ld(outp, o(2))), m.sig(m.ld(outp, o(3)))
                        g_, o_ = m.tanh(m.ld(outp, o(4))), m.sig(m.ld(outp, o(5)))
                        cp = m.ld(outp, _ix(fb, prev, H, j))
                        c = m.add(m.mul(f_, cp), m.mul(i_, g_))
                        for k, v in ((2, i_), (3, f_), (4, g_), (5, o_), (1, c)):
                            m.st(v, outp, o(k))
                        m.st(m.mul(o_, m.tanh(c)), outp, o(0))
                    elif gru:
                        ghr, ghz, ghn = (m.ld(outp, o(k)) for k in (2, 3, 4))
                        r = m.sig(m.add(m.ld(gip, fb.add(girow, j)), ghr))
                        z = m.sig(m.add(m.ld(gip, _ix(fb, girow, H, j)), ghz))
                        n_ = m.tanh(m.add(m.ld(gip, _ix(fb, girow, 2 * H, j)), m.mul(r, ghn)))
                        hp = m.ld(outp, fb.add(prev, j))
                        for k, v in ((1, r), (2, z), (3, n_)):
                            m.st(v, outp, o(k))
                        m.st(m.add(n_, m.mul(z, m.sub(hp, n_))), outp, o(0))
                    else:
                        v = m.ld(outp, o(0))
                        if mode == "RNN_TANH":
                            h = m.tanh(v)
                        else:   # NaN stays NaN, as np.maximum
                            h = fb.select(fb.fcmp("olt", v, m.zero), m.zero, v)
                        m.st(h, outp, o(0))
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

    work = T * N * H * G
    low.kernels.kernel("rnn_scan", slots, 1, body, work=work, parallel_ok=False)


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

    def body(fb, ptrs, err, lo, hi, status):
        m = _Math(fb, d)
        rp, gp, outp, wp, h0p = ptrs[:5]
        c0p = ptrs[5] if lstm else None
        i64 = fb.i64
        Nv = fb.i64(N)
        Tv = fb.sub(fb.i64(T1), i64(1))
        orowsz = fb.mul(Nv, i64(W))
        rrowsz = fb.mul(Nv, i64(K))

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
                prev = fb.add(prow0, fb.mul(n, i64(W)))
                hprev = fb.select(first, fb.gep(h0p, hb, scalar.storage_type(d)),
                                  fb.gep(outp, prev, scalar.storage_type(d)))

                def col(j):
                    def o(k):
                        return _ix(fb, orow, k * H, j)

                    def gg(k):
                        return m.ld(gp, o(k))

                    def r_(k):
                        return _ix(fb, rrow, k * H, j)
                    dh = m.add(m.ld(rp, fb.add(carry, j)), gg(0))
                    if lstm:
                        cprev = fb.select(first, fb.gep(c0p, hb, scalar.storage_type(d)),
                                          fb.gep(outp, _ix(fb, prev, H), scalar.storage_type(d)))
                        cp = m.ld(cprev, j)
                        c = m.ld(outp, o(1))
                        i_, f_, g_, o_ = (m.ld(outp, o(k)) for k in (2, 3, 4, 5))
                        tc = m.tanh(c)
                        dc = m.add(m.add(m.ld(rp, _ix(fb, carry, H, j)), gg(1)),
                                   m.mul(m.mul(dh, o_), m.dtanh(tc)))
                        m.st(m.mul(m.add(m.mul(dc, g_), gg(2)), m.dsig(i_)), rp, r_(0))
                        m.st(m.mul(m.add(m.mul(dc, cp), gg(3)), m.dsig(f_)), rp, r_(1))
                        m.st(m.mul(m.add(m.mul(dc, i_), gg(4)), m.dtanh(g_)), rp, r_(2))
                        m.st(m.mul(m.add(m.mul(dh, tc), gg(5)), m.dsig(o_)), rp, r_(3))
                        m.st(m.mul(dc, f_), rp, _ix(fb, carry, H, j))
                    elif gru:
                        r, z, n_, hn = (m.ld(outp, o(k)) for k in (1, 2, 3, 4))
                        hp = m.ld(hprev, j)
                        dn = m.mul(m.add(m.mul(dh, m.sub(m.one, z)), gg(3)), m.dtanh(n_))
                        m.st(m.mul(m.add(m.mul(dn, hn), gg(1)), m.dsig(r)), rp, r_(0))
                        m.st(m.mul(m.add(m.mul(dh, m.sub(hp, n_)), gg(2)), m.dsig(z)), rp, r_(1))
                        m.st(dn, rp, r_(2))
                        m.st(m.add(m.mul(dn, r), gg(4)), rp, r_(3))
                        m.st(m.mul(dh, z), rp, fb.add(carry, j))
                    else:
                        h = m.ld(outp, o(0))
                        if mode == "RNN_TANH":
                            da = m.mul(dh, m.dtanh(h))
                        else:
                            da = m.mul(dh, fb.select(fb.fcmp("ogt", h, m.zero), m.one, m.zero))
                        m.st(da, rp, r_(0))
                fb.for_range(i64(0), i64(H), col)

                def dot(k):
                    wrow = fb.mul(k, i64(G))

                    def seg(lo_, n_, woff, acc):
                        def term(g, a):
                            v = m.mul(m.ld(rp, _ix(fb, rrow, lo_, g)),
                                      m.ld(wp, _ix(fb, wrow, woff, g)))
                            return [fb.fbin("fadd", a, v, reassoc=True)]
                        return fb.for_range(i64(0), i64(n_), term, carried=[acc])[0]
                    if gru:
                        acc = seg(0, 2 * H, 0, m.ld(rp, fb.add(carry, k)))
                        acc = seg(3 * H, H, 2 * H, acc)
                    else:
                        acc = seg(0, G, 0, m.zero)
                    m.st(acc, rp, fb.add(carry, k))
                fb.for_range(i64(0), i64(H), dot)
            fb.for_range(i64(0), Nv, row)
        fb.for_range(i64(0), Tv, step)

        def zero_rest(n):
            cb = fb.mul(n, i64(K))
            fb.for_range(i64(2 * H if lstm else H), i64(K),
                         lambda j: m.st(m.zero, rp, fb.add(cb, j)))
        if K > (2 * H if lstm else H):
            fb.for_range(i64(0), Nv, zero_rest)

    work = (T1 - 1) * N * H * G
    low.kernels.kernel("rnn_scan_grad", slots, 1, body, work=work, parallel_ok=False)
