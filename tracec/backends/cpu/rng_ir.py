"""The LLVM IR of ``rng_kernels``: PyTorch's eager random transforms,
written as text (no library provides PyTorch's ``avx_mathfun`` bit-exactly,
and tracec's compiler would not keep this exact float32 operation order:
its ``log``/``sin`` are its own).  ``ir_text()`` is the whole module,
without a target (``rng_kernels`` compiles it for the host).

The kernels (C ABI; ``words`` are the generator's 32-bit words, uint32):

* ``tracec_rng_mt_words(state, words, n)``: ``n`` words of NumPy's
  ``MT19937`` bit generator, advancing it as ``random_raw(n)`` does:
  NumPy's ``mt19937_next32`` (and ``mt19937_gen``'s twist) on NumPy's own
  state struct (``{uint32_t key[624]; int pos;}`` at
  ``bits.ctypes.state_address``), 3-5x faster than ``random_raw`` (the
  twist and the tempering are loops LLVM vectorizes; no uint64 array).  The
  struct's layout is NumPy's, not its API: ``rng_kernels`` checks it once
  per process against ``random_raw`` (``_twister_ok``) and draws through
  ``random_raw`` where it differs.
* ``tracec_rng_normal_f32(words, out, nblocks, mean, std, affine)``: for
  each block ``b`` of 16, ``u = (w & 0xffffff) * 2**-24`` of
  ``words[16 b:16 b + 16]``, then ``normal_fill_16_AVX2`` (on
  ``<8 x float>`` vectors, as its AVX2 code):
  ``u1 = 1 - u[j]``, ``theta = 2 pi u[j + 8]``, ``r = sqrt(-2 log(u1))``,
  ``out[j] = r cos``, ``out[j + 8] = r sin``, and with ``affine`` one
  rounding of ``out * std + mean``; the uniforms' words in order, so the
  stream advances as ``uniform(n)`` advances it.  ``log`` / ``sincos`` are
  ``torch_rng._log_ps`` / ``_sincos_ps``, operation by operation with the
  same constants: an ``llvm.fma`` exactly where those call ``_fma``, every
  other operation a plain IEEE float32 one (no fast-math flags, so LLVM
  neither contracts nor reorders them).
* ``tracec_rng_normal_f64(words, out, nblocks, mean, std, affine)``: the
  same in double, ``u`` the low 53 bits of ``(w[2k] << 32) | w[2k + 1]``
  times 2**-53 (``random64()``), with the C library's ``log``, ``cos`` and
  ``sin`` (as PyTorch's ``normal_fill_16`` and NumPy's ``sin``/``cos``,
  which are the C library's, call them: separate calls, which LLVM
  leaves unmerged, no ``sincos``) and ``llvm.fma`` for the affine step.
* ``tracec_rng_words64(words, out, n)``: ``random64()``'s values, ``(w[2k]
  << 32) | w[2k + 1]``; ``tracec_rng_uniform_f64(words, out, n)``: float64
  uniforms, their low 53 bits times 2**-53 (as ``normal_f64``'s).
* ``tracec_rng_randperm(r, perm, n, wide)``: ``perm = arange(n)``, then
  for ``i`` in ``0 .. n - 2`` swap ``i`` and ``r[i] % (n - i) + i``; ``r``
  holds 32-bit words (a 32-bit division: 2-3x faster) unless ``wide``
  (``random64()`` values, ``n >= 2**32 / 20``: a 64-bit division).
"""
from __future__ import annotations

import struct

import numpy as np

from tracec import torch_rng as R

__all__ = ["NAMES", "ir_text"]

_PREFIX = "tracec_rng_"
#: The exported kernels.
NAMES = (f"{_PREFIX}normal_f32", f"{_PREFIX}normal_f64", f"{_PREFIX}randperm",
         f"{_PREFIX}mt_words", f"{_PREFIX}words64", f"{_PREFIX}uniform_f64")


def _f32(v) -> str:
    """A float32 constant as LLVM writes it (the double of the same value)."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(np.float32(v))))[0]


def _f64(v) -> str:
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]


def _splat(ty: str, v: str, lanes: int = 8) -> str:
    return "<" + ", ".join([f"{ty} {v}"] * lanes) + ">"


class _Body:
    """Straight-line SSA over ``<8 x float>`` / ``<8 x i32>`` values."""

    def __init__(self):
        self.lines: list[str] = []
        self.n = 0

    def __call__(self, rhs: str) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"  {name} = {rhs}")
        return name


V, I = "<8 x float>", "<8 x i32>"


def _fc(v) -> str:
    return _splat("float", _f32(v))


def _ic(v: int) -> str:
    return _splat("i32", str(v))


def _fma(b: _Body, x, y, z) -> str:
    """One rounding of ``x * y + z`` (``torch_rng._fma``)."""
    return b(f"call {V} @llvm.fma.v8f32({V} {x}, {V} {y}, {V} {z})")


def _log_ps(b: _Body, x0: str) -> str:
    """``torch_rng._log_ps``, line by line."""
    invalid = b(f"fcmp ole {V} {x0}, zeroinitializer")
    keep = b(f"fcmp uge {V} {x0}, {_fc(R._MIN_NORM)}")          # np.maximum (NaN kept)
    x = b(f"select <8 x i1> {keep}, {V} {x0}, {V} {_fc(R._MIN_NORM)}")
    bits = b(f"bitcast {V} {x} to {I}")
    e = b(f"lshr {I} {bits}, {_ic(23)}")
    e = b(f"sub {I} {e}, {_ic(0x7F)}")
    e = b(f"sitofp {I} {e} to {V}")
    e = b(f"fadd {V} {e}, {_fc(1)}")
    m = b(f"and {I} {bits}, {_ic(0x807FFFFF)}")
    m = b(f"or {I} {m}, {_ic(0x3F000000)}")
    x = b(f"bitcast {I} {m} to {V}")
    small = b(f"fcmp olt {V} {x}, {_fc(R._SQRTHF)}")
    tmp = b(f"select <8 x i1> {small}, {V} {x}, {V} zeroinitializer")
    x = b(f"fsub {V} {x}, {_fc(1)}")
    one = b(f"select <8 x i1> {small}, {V} {_fc(1)}, {V} zeroinitializer")
    e = b(f"fsub {V} {e}, {one}")
    x = b(f"fadd {V} {x}, {tmp}")
    z = b(f"fmul {V} {x}, {x}")
    y = _fc(R._LOG_P[0])
    for p in R._LOG_P[1:]:
        y = _fma(b, y, x, _fc(p))
    y = b(f"fmul {V} {y}, {x}")
    eq1 = b(f"fmul {V} {e}, {_fc(R._LOG_Q1)}")
    y = _fma(b, y, z, eq1)
    hz = b(f"fmul {V} {z}, {_fc(0.5)}")
    y = b(f"fsub {V} {y}, {hz}")
    x = b(f"fadd {V} {x}, {y}")
    x = _fma(b, e, _fc(R._LOG_Q2), x)
    return b(f"select <8 x i1> {invalid}, {V} {_fc(np.nan)}, {V} {x}")


def _sincos_ps(b: _Body, x0: str) -> tuple[str, str]:
    """``torch_rng._sincos_ps``, line by line: (sin, cos)."""
    xb = b(f"bitcast {V} {x0} to {I}")
    sign = b(f"and {I} {xb}, {_ic(-0x80000000)}")
    ab = b(f"and {I} {xb}, {_ic(0x7FFFFFFF)}")                  # np.abs
    x = b(f"bitcast {I} {ab} to {V}")
    q = b(f"fmul {V} {x}, {_fc(R._FOPI)}")
    j = b(f"fptosi {V} {q} to {I}")
    j = b(f"add {I} {j}, {_ic(1)}")
    j = b(f"and {I} {j}, {_ic(-2)}")
    y = b(f"sitofp {I} {j} to {V}")
    j4 = b(f"and {I} {j}, {_ic(4)}")
    swap = b(f"shl {I} {j4}, {_ic(29)}")
    j2 = b(f"and {I} {j}, {_ic(2)}")
    first = b(f"icmp eq {I} {j2}, zeroinitializer")
    for dp in R._DP:
        x = _fma(b, y, _fc(dp), x)
    jm2 = b(f"sub {I} {j}, {_ic(2)}")
    njm2 = b(f"xor {I} {jm2}, {_ic(-1)}")
    sc = b(f"and {I} {njm2}, {_ic(4)}")
    sign_cos = b(f"shl {I} {sc}, {_ic(29)}")
    z = b(f"fmul {V} {x}, {x}")
    yc = _fma(b, _fc(R._COSCOF[0]), z, _fc(R._COSCOF[1]))
    yc = _fma(b, yc, z, _fc(R._COSCOF[2]))
    yc = b(f"fmul {V} {yc}, {z}")
    hz = b(f"fmul {V} {z}, {_fc(0.5)}")
    nhz = b(f"fneg {V} {hz}")
    yc = _fma(b, yc, z, nhz)
    yc = b(f"fadd {V} {yc}, {_fc(1)}")
    ys = _fma(b, _fc(R._SINCOF[0]), z, _fc(R._SINCOF[1]))
    ys = _fma(b, ys, z, _fc(R._SINCOF[2]))
    ys = b(f"fmul {V} {ys}, {z}")
    ys = _fma(b, ys, x, x)
    s = b(f"select <8 x i1> {first}, {V} {ys}, {V} {yc}")
    c = b(f"select <8 x i1> {first}, {V} {yc}, {V} {ys}")
    sb = b(f"bitcast {V} {s} to {I}")
    ss = b(f"xor {I} {sign}, {swap}")
    sb = b(f"xor {I} {sb}, {ss}")
    cb = b(f"bitcast {V} {c} to {I}")
    cb = b(f"xor {I} {cb}, {sign_cos}")
    return b(f"bitcast {I} {sb} to {V}"), b(f"bitcast {I} {cb} to {V}")


def _uniform8(b: _Body, ptr: str) -> str:
    """Eight float32 uniforms from eight words: ``(w & 0xffffff) * 2**-24``."""
    w = b(f"load {I}, ptr {ptr}, align 4")
    t = b(f"and {I} {w}, {_ic(0xFFFFFF)}")
    f = b(f"sitofp {I} {t} to {V}")                   # (< 2**24: exact)
    return b(f"fmul {V} {f}, {_fc(2.0 ** -24)}")


def _normal_f32() -> str:
    b = _Body()
    base = b("shl i64 %blk, 4")
    pa = b(f"getelementptr i32, ptr %words, i64 {base}")
    base8 = b(f"or i64 {base}, 8")
    pb = b(f"getelementptr i32, ptr %words, i64 {base8}")
    ua = _uniform8(b, pa)
    ub = _uniform8(b, pb)
    u1 = b(f"fsub {V} {_fc(1)}, {ua}")
    theta = b(f"fmul {V} {_fc(2.0 * np.pi)}, {ub}")
    radius = _log_ps(b, u1)
    sin, cos = _sincos_ps(b, theta)
    radius = b(f"fmul {V} {radius}, {_fc(-2)}")
    radius = b(f"call {V} @llvm.sqrt.v8f32({V} {radius})")
    p0 = b(f"fmul {V} {radius}, {cos}")
    p1 = b(f"fmul {V} {radius}, {sin}")
    sv = b(f"insertelement {V} poison, float %std, i64 0")
    sv = b(f"shufflevector {V} {sv}, {V} poison, <8 x i32> zeroinitializer")
    mv = b(f"insertelement {V} poison, float %mean, i64 0")
    mv = b(f"shufflevector {V} {mv}, {V} poison, <8 x i32> zeroinitializer")
    q0 = _fma(b, p0, sv, mv)
    q1 = _fma(b, p1, sv, mv)
    p0 = b(f"select i1 %aff, {V} {q0}, {V} {p0}")
    p1 = b(f"select i1 %aff, {V} {q1}, {V} {p1}")
    oa = b(f"getelementptr float, ptr %out, i64 {base}")
    ob = b(f"getelementptr float, ptr %out, i64 {base8}")
    body = "\n".join(b.lines)
    return f"""
define void @{_PREFIX}normal_f32(ptr noalias nocapture readonly %words, ptr noalias nocapture %out,
                                 i64 %nblocks, float %mean, float %std, i32 %affine) nounwind {{
entry:
  %aff = icmp ne i32 %affine, 0
  %any = icmp sgt i64 %nblocks, 0
  br i1 %any, label %loop, label %done
loop:
  %blk = phi i64 [ 0, %entry ], [ %next, %loop ]
{body}
  store {V} {p0}, ptr {oa}, align 4
  store {V} {p1}, ptr {ob}, align 4
  %next = add nuw nsw i64 %blk, 1
  %more = icmp slt i64 %next, %nblocks
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _normal_f64() -> str:
    two_pi, mask = _f64(2.0 * np.pi), (1 << 53) - 1
    return f"""
define void @{_PREFIX}normal_f64(ptr noalias nocapture readonly %words, ptr noalias nocapture %out,
                                 i64 %nblocks, double %mean, double %std, i32 %affine) nounwind {{
entry:
  %aff = icmp ne i32 %affine, 0
  %n = shl i64 %nblocks, 3
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %done
loop:
  %k = phi i64 [ 0, %entry ], [ %next, %loop ]
  %blk = lshr i64 %k, 3
  %j = and i64 %k, 7
  %b16 = shl i64 %blk, 4
  %e1 = or i64 %b16, %j
  %e2 = or i64 %e1, 8
  %u1 = call double @{_PREFIX}u53(ptr %words, i64 %e1)
  %u2 = call double @{_PREFIX}u53(ptr %words, i64 %e2)
  %x = fsub double 1.0, %u1
  %theta = fmul double {two_pi}, %u2
  %lg = call double @log(double %x)
  %r2 = fmul double %lg, -2.0
  %r = call double @llvm.sqrt.f64(double %r2)
  %c = call double @cos(double %theta)
  %s = call double @sin(double %theta)
  %p0 = fmul double %r, %c
  %p1 = fmul double %r, %s
  %q0 = call double @llvm.fma.f64(double %p0, double %std, double %mean)
  %q1 = call double @llvm.fma.f64(double %p1, double %std, double %mean)
  %o0 = select i1 %aff, double %q0, double %p0
  %o1 = select i1 %aff, double %q1, double %p1
  %d0 = getelementptr double, ptr %out, i64 %e1
  %d1 = getelementptr double, ptr %out, i64 %e2
  store double %o0, ptr %d0, align 8
  store double %o1, ptr %d1, align 8
  %next = add nuw nsw i64 %k, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}

define internal i64 @{_PREFIX}w64(ptr %words, i64 %e) alwaysinline nounwind {{
  %i = shl i64 %e, 1
  %ph = getelementptr i32, ptr %words, i64 %i
  %hi32 = load i32, ptr %ph, align 4
  %i2 = or i64 %i, 1
  %pl = getelementptr i32, ptr %words, i64 %i2
  %lo32 = load i32, ptr %pl, align 4
  %hi = zext i32 %hi32 to i64
  %lo = zext i32 %lo32 to i64
  %h = shl i64 %hi, 32
  %w = or i64 %h, %lo
  ret i64 %w
}}

define internal double @{_PREFIX}u53(ptr %words, i64 %e) alwaysinline nounwind {{
  %w = call i64 @{_PREFIX}w64(ptr %words, i64 %e)
  %m = and i64 %w, {mask}
  %f = uitofp i64 %m to double
  %u = fmul double %f, {_f64(2.0 ** -53)}
  ret double %u
}}
"""


def _map64(name: str, elt: str, fn: str) -> str:
    """``out[e] = fn(words, e)`` for ``e`` in ``0 .. n - 1``."""
    return f"""
define void @{_PREFIX}{name}(ptr noalias nocapture readonly %words, ptr noalias nocapture %out,
                             i64 %n) nounwind {{
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %done
loop:
  %e = phi i64 [ 0, %entry ], [ %next, %loop ]
  %v = call {elt} @{_PREFIX}{fn}(ptr %words, i64 %e)
  %p = getelementptr {elt}, ptr %out, i64 %e
  store {elt} %v, ptr %p, align 8
  %next = add nuw nsw i64 %e, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _swaps(bits: int) -> str:
    """The Fisher-Yates loop, dividing in ``bits``-bit integers."""
    rem = (f"  %s{bits} = trunc i64 %span{bits} to i32\n"
           f"  %q{bits} = urem i32 %rw{bits}, %s{bits}\n"
           f"  %z{bits} = zext i32 %q{bits} to i64\n") if bits == 32 else \
        f"  %z{bits} = urem i64 %rw{bits}, %span{bits}\n"
    return f"""loop{bits}:
  %i{bits} = phi i64 [ 0, %pick ], [ %inext{bits}, %loop{bits} ]
  %pr{bits} = getelementptr i{bits}, ptr %r, i64 %i{bits}
  %rw{bits} = load i{bits}, ptr %pr{bits}, align {bits // 8}
  %span{bits} = sub i64 %n, %i{bits}
{rem}  %t{bits} = add i64 %z{bits}, %i{bits}
  %pi{bits} = getelementptr i64, ptr %perm, i64 %i{bits}
  %pt{bits} = getelementptr i64, ptr %perm, i64 %t{bits}
  %a{bits} = load i64, ptr %pi{bits}, align 8
  %b{bits} = load i64, ptr %pt{bits}, align 8
  store i64 %b{bits}, ptr %pi{bits}, align 8
  store i64 %a{bits}, ptr %pt{bits}, align 8
  %inext{bits} = add nuw nsw i64 %i{bits}, 1
  %more{bits} = icmp slt i64 %inext{bits}, %last
  br i1 %more{bits}, label %loop{bits}, label %done
"""


def _randperm() -> str:
    return f"""
define void @{_PREFIX}randperm(ptr noalias nocapture readonly %r, ptr noalias nocapture %perm,
                               i64 %n, i32 %wide) nounwind {{
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %fill, label %done
fill:
  %f = phi i64 [ 0, %entry ], [ %fnext, %fill ]
  %pf = getelementptr i64, ptr %perm, i64 %f
  store i64 %f, ptr %pf, align 8
  %fnext = add nuw nsw i64 %f, 1
  %fmore = icmp slt i64 %fnext, %n
  br i1 %fmore, label %fill, label %start
start:
  %last = sub i64 %n, 1
  %swaps = icmp sgt i64 %last, 0
  br i1 %swaps, label %pick, label %done
pick:
  %w = icmp ne i32 %wide, 0
  br i1 %w, label %loop64, label %loop32
{_swaps(32)}{_swaps(64)}done:
  ret void
}}
"""


def _mt() -> str:
    """NumPy's ``mt19937_next32`` over ``n`` words, on NumPy's own state
    (``{uint32_t key[624]; int pos;}``, ``mt19937.h``), in runs of the
    words left before the next twist (``mt19937_gen``)."""
    n, m = R._N, 397
    twist = []
    for lo, hi, off, name in ((0, n - m, m, "a"), (n - m, n - 1, m - n, "b")):
        twist.append(f"""
twist_{name}:
  %i{name} = phi i64 [ {lo}, %twist_{name}_pre ], [ %i{name}n, %twist_{name} ]
  %i{name}n = add nuw nsw i64 %i{name}, 1
  %y{name} = call i32 @{_PREFIX}mt_y(ptr %st, i64 %i{name}, i64 %i{name}n)
  %j{name} = add i64 %i{name}, {off}
  call void @{_PREFIX}mt_set(ptr %st, i64 %i{name}, i64 %j{name}, i32 %y{name})
  %more{name} = icmp slt i64 %i{name}n, {hi}
  br i1 %more{name}, label %twist_{name}, label %twist_{name}_end
twist_{name}_end:""")
    return f"""
define internal i32 @{_PREFIX}mt_y(ptr %st, i64 %i, i64 %i1) alwaysinline nounwind {{
  %pa = getelementptr i32, ptr %st, i64 %i
  %a = load i32, ptr %pa, align 4
  %pb = getelementptr i32, ptr %st, i64 %i1
  %b = load i32, ptr %pb, align 4
  %ua = and i32 %a, -2147483648
  %lb = and i32 %b, 2147483647
  %y = or i32 %ua, %lb
  ret i32 %y
}}

define internal void @{_PREFIX}mt_set(ptr %st, i64 %i, i64 %j, i32 %y) alwaysinline nounwind {{
  %pj = getelementptr i32, ptr %st, i64 %j
  %kj = load i32, ptr %pj, align 4
  %h = lshr i32 %y, 1
  %bit = and i32 %y, 1
  %neg = sub i32 0, %bit
  %mag = and i32 %neg, -1727483681
  %x = xor i32 %kj, %h
  %v = xor i32 %x, %mag
  %pi = getelementptr i32, ptr %st, i64 %i
  store i32 %v, ptr %pi, align 4
  ret void
}}

define internal void @{_PREFIX}mt_twist(ptr noalias nocapture %st) noinline nounwind {{
twist_a_pre:
  br label %twist_a{twist[0]}
  br label %twist_b_pre
twist_b_pre:
  br label %twist_b{twist[1]}
  %yl = call i32 @{_PREFIX}mt_y(ptr %st, i64 {n - 1}, i64 0)
  call void @{_PREFIX}mt_set(ptr %st, i64 {n - 1}, i64 {m - 1}, i32 %yl)
  ret void
}}

define void @{_PREFIX}mt_words(ptr noalias nocapture %st, ptr noalias nocapture %out,
                               i64 %n) nounwind {{
entry:
  %pp = getelementptr i8, ptr %st, i64 {4 * n}
  %pos0 = load i32, ptr %pp, align 4
  br label %head
head:
  %k = phi i64 [ 0, %entry ], [ %k2, %chunk_end ]
  %pos = phi i32 [ %pos0, %entry ], [ %pos2, %chunk_end ]
  %done = icmp sge i64 %k, %n
  br i1 %done, label %exit, label %check
check:
  %full = icmp uge i32 %pos, {n}
  br i1 %full, label %twist, label %chunk
twist:
  call void @{_PREFIX}mt_twist(ptr %st)
  br label %chunk
chunk:
  %p = phi i32 [ %pos, %check ], [ 0, %twist ]
  %p64 = zext i32 %p to i64
  %avail = sub i64 {n}, %p64
  %left = sub i64 %n, %k
  %short = icmp ult i64 %avail, %left
  %take = select i1 %short, i64 %avail, i64 %left
  br label %inner
inner:
  %j = phi i64 [ 0, %chunk ], [ %j2, %inner ]
  %src = add i64 %p64, %j
  %ps = getelementptr i32, ptr %st, i64 %src
  %y0 = load i32, ptr %ps, align 4
  %t1 = lshr i32 %y0, 11
  %y1 = xor i32 %y0, %t1
  %t2 = shl i32 %y1, 7
  %t2m = and i32 %t2, -1658038656
  %y2 = xor i32 %y1, %t2m
  %t3 = shl i32 %y2, 15
  %t3m = and i32 %t3, -272236544
  %y3 = xor i32 %y2, %t3m
  %t4 = lshr i32 %y3, 18
  %y4 = xor i32 %y3, %t4
  %dst = add i64 %k, %j
  %pd = getelementptr i32, ptr %out, i64 %dst
  store i32 %y4, ptr %pd, align 4
  %j2 = add nuw nsw i64 %j, 1
  %more = icmp ult i64 %j2, %take
  br i1 %more, label %inner, label %chunk_end
chunk_end:
  %k2 = add i64 %k, %take
  %pend = add i64 %p64, %take
  %pos2 = trunc i64 %pend to i32
  br label %head
exit:
  store i32 %pos, ptr %pp, align 4
  ret void
}}
"""


def ir_text() -> str:
    """The kernels' LLVM IR (without a target: ``_compile`` adds it)."""
    return "".join([
        "declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)\n",
        "declare <8 x float> @llvm.sqrt.v8f32(<8 x float>)\n",
        "declare double @llvm.fma.f64(double, double, double)\n",
        "declare double @llvm.sqrt.f64(double)\n",
        "declare double @log(double)\ndeclare double @sin(double)\ndeclare double @cos(double)\n",
        _normal_f32(), _normal_f64(), _randperm(), _mt(),
        _map64("words64", "i64", "w64"), _map64("uniform_f64", "double", "u53")])
