"""float64 exp, log, sin, cos, pow and erf from arithmetic alone, for targets
with no libm (the cuda backend: LLVM's NVPTX target has no instruction for
``llvm.exp.f64`` and friends and aborts on them).

Written by hand because nothing provides them for LLVM IR built in xDSL:
the sources are Cephes' double-precision routines (Moshier; range
reduction and coefficients as published in ``exp.c``, ``log.c``,
``sin.c`` and ``ndtr.c``).  Accuracy (tests/backends/test_cuda_math.py
checks it against NumPy and ``math.erf`` on the emulated launch, which runs
this very code; measured on 40,000 samples): exp, log, sin and cos within
1 ulp, erf 2, tanh 4 (``scalar.py`` makes it from expm1); ``pow`` as
``exp(y log|x|)``, so its relative error grows with ``|y log|x||``
(about 1e-14 at 0.9 ** 1000), with
C99's special cases (signed zeros, infinities, negative bases with
integer exponents, NaN).  ``sin``/``cos`` reduce by pi/4 in three parts,
exact for ``|x|`` up to about 1e9; beyond, the reduction loses digits.
"""
from __future__ import annotations

from tracec.backends.cpu.builder import F64, I1, I64, FuncBuilder
from tracec.backends.cpu.mathfns import fma as _fma, poly as _poly

__all__ = ["exp64", "log64", "sin64", "cos64", "pow64", "erf64"]

_LOG2E = 1.4426950408889634074
_MAGIC = 6755399441055744.0      # 1.5 * 2**52: adding it rounds to an integer
_EXP_C1 = 6.93145751953125e-1
_EXP_C2 = 1.42860682030941723212e-6
_EXP_P = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
_EXP_Q = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1,
          2.00000000000000000009e0)
_LOG_P = (1.01875663804580931796e-4, 4.97494994976747001425e-1, 4.70579119878881725854e0,
          1.44989225341610930846e1, 1.79368678507819816313e1, 7.70838733755885391666e0)
_LOG_Q = (1.0, 1.12873587189167450590e1, 4.52279145837532221105e1, 8.29875266912776603211e1,
          7.11544750618563894466e1, 2.31251620126765340583e1)
_SIN = (1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
        -1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1)
_COS = (-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
        2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2)
_DP = (7.85398125648498535156e-1, 3.77489470793079817668e-8, 2.69515142907905952645e-15)
_FOUR_OVER_PI = 1.27323954473516268615
# ndtr.c: erfc on 1 <= x < 8 (P/Q) and x >= 8 (R/S); erf on |x| < 1 (T/U)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)
_ERFC_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0,
           6.16021097993053585195e0, 7.40974269950448939160e0, 2.97886665372100240670e0)
_ERFC_S = (1.0, 2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1,
           1.70814450747565897222e1, 9.60896809063285878198e0, 3.36907645100081516050e0)
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
          7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
          2.26290000613890934246e4, 4.92673942608635921086e4)


def _c(fb: FuncBuilder, v: float):
    return fb.const(float(v), F64)


def _pow2i(fb, n):
    """2**n for an i64 ``n`` in [-1022, 1023]."""
    return fb.cast("bitcast", fb.ibin("shl", fb.ibin("add", n, fb.const(1023, I64)),
                                      fb.const(52, I64)), F64)


def _isnan(fb, x):
    return fb.fcmp("uno", x, x)


def exp64(fb: FuncBuilder, x):
    xc = fb.intr("llvm.minnum", [fb.intr("llvm.maxnum", [x, _c(fb, -746.0)], F64,
                                         overload=[F64]), _c(fb, 710.0)], F64, overload=[F64])
    t = fb.fbin("fadd", fb.fbin("fmul", xc, _c(fb, _LOG2E)), _c(fb, _MAGIC))
    n_f = fb.fbin("fsub", t, _c(fb, _MAGIC))
    n_i = fb.ibin("sub", fb.cast("bitcast", t, I64), fb.cast("bitcast", _c(fb, _MAGIC), I64))
    r = _fma(fb, n_f, _c(fb, -_EXP_C1), xc)
    r = _fma(fb, n_f, _c(fb, -_EXP_C2), r)
    rr = fb.fbin("fmul", r, r)
    px = fb.fbin("fmul", r, _poly(fb, rr, _EXP_P))
    y = fb.fbin("fdiv", px, fb.fbin("fsub", _poly(fb, rr, _EXP_Q), px))
    y = _fma(fb, y, _c(fb, 2.0), _c(fb, 1.0))
    # two factors keep each power of two normal over n in [-1077, 1025]
    n1 = fb.ibin("ashr", n_i, fb.const(1, I64))
    y = fb.fbin("fmul", fb.fbin("fmul", y, _pow2i(fb, n1)), _pow2i(fb, fb.ibin("sub", n_i, n1)))
    return fb.select(_isnan(fb, x), x, y)


def log64(fb: FuncBuilder, x):
    tiny = fb.fcmp("olt", x, _c(fb, 2.2250738585072014e-308))
    xs = fb.select(tiny, fb.fbin("fmul", x, _c(fb, 18014398509481984.0)), x)   # 2**54
    bits = fb.cast("bitcast", xs, I64)
    e = fb.ibin("sub", fb.ibin("and", fb.ibin("lshr", bits, fb.const(52, I64)),
                               fb.const(0x7FF, I64)), fb.const(1022, I64))
    e = fb.select(tiny, fb.ibin("sub", e, fb.const(54, I64)), e)
    m = fb.cast("bitcast", fb.ibin("or", fb.ibin("and", bits, fb.const(0x800FFFFFFFFFFFFF - (1 << 64), I64)),
                                   fb.const(0x3FE0000000000000, I64)), F64)
    small = fb.fcmp("olt", m, _c(fb, 0.70710678118654752440))
    e = fb.select(small, fb.ibin("sub", e, fb.const(1, I64)), e)
    xm = fb.fbin("fsub", fb.select(small, fb.fbin("fadd", m, m), m), _c(fb, 1.0))
    z = fb.fbin("fmul", xm, xm)
    y = fb.fbin("fmul", xm, fb.fbin("fdiv", fb.fbin("fmul", z, _poly(fb, xm, _LOG_P)),
                                     _poly(fb, xm, _LOG_Q)))
    fe = fb.cast("sitofp", e, F64)
    y = _fma(fb, fe, _c(fb, -2.121944400546905827679e-4), y)
    y = _fma(fb, z, _c(fb, -0.5), y)
    r = fb.fbin("fadd", xm, y)
    r = _fma(fb, fe, _c(fb, 0.693359375), r)
    inf = _c(fb, float("inf"))
    r = fb.select(fb.fcmp("oeq", x, inf), inf, r)
    r = fb.select(fb.fcmp("oeq", x, _c(fb, 0.0)), _c(fb, float("-inf")), r)
    r = fb.select(fb.fcmp("olt", x, _c(fb, 0.0)), _c(fb, float("nan")), r)
    return fb.select(_isnan(fb, x), x, r)


def _sincos(fb, x, cos: bool):
    ax = fb.intr("llvm.fabs", [x], F64, overload=[F64])
    big = _c(fb, 4503599627370496.0)          # 2**52: no UB converting the octant
    axc = fb.intr("llvm.minnum", [ax, big], F64, overload=[F64])
    j = fb.intr("llvm.fptosi.sat", [fb.fbin("fmul", axc, _c(fb, _FOUR_OVER_PI))], I64,
                overload=[I64, F64])
    odd = fb.ibin("and", j, fb.const(1, I64))
    j = fb.ibin("add", j, odd)
    y = fb.cast("sitofp", j, F64)
    j = fb.ibin("and", j, fb.const(7, I64))
    flip = fb.icmp("sgt", j, fb.const(3, I64))
    j = fb.select(flip, fb.ibin("sub", j, fb.const(4, I64)), j)
    z = _fma(fb, y, _c(fb, -_DP[0]), axc)
    z = _fma(fb, y, _c(fb, -_DP[1]), z)
    z = _fma(fb, y, _c(fb, -_DP[2]), z)
    zz = fb.fbin("fmul", z, z)
    s = _fma(fb, fb.fbin("fmul", z, zz), _poly(fb, zz, _SIN), z)
    c = _fma(fb, fb.fbin("fmul", zz, zz), _poly(fb, zz, _COS), _fma(fb, zz, _c(fb, -0.5),
                                                                    _c(fb, 1.0)))
    one_two = fb.ibin("or", fb.icmp("eq", j, fb.const(1, I64)), fb.icmp("eq", j, fb.const(2, I64)))
    if cos:
        r = fb.select(one_two, s, c)
        neg = fb.ibin("xor", flip, fb.icmp("sgt", j, fb.const(1, I64)))
    else:
        r = fb.select(one_two, c, s)
        neg = fb.ibin("xor", flip, fb.fcmp("olt", x, _c(fb, 0.0)))
    r = fb.select(neg, fb.fneg(r), r)
    bad = fb.fcmp("uge", ax, _c(fb, float("inf")))      # inf or NaN
    return fb.select(bad, _c(fb, float("nan")), r)


def sin64(fb: FuncBuilder, x):
    return _sincos(fb, x, cos=False)


def cos64(fb: FuncBuilder, x):
    return _sincos(fb, x, cos=True)


def pow64(fb: FuncBuilder, x, y):
    """C99's ``pow`` (NumPy's): ``exp(y log|x|)`` signed for a negative base
    and an odd integer exponent; NaN for a finite negative base and a finite
    non-integer exponent; 1 for ``y == 0`` or ``x == 1`` (even with NaN) and
    for ``|x| == 1``, ``y`` infinite."""
    one, zero = _c(fb, 1.0), _c(fb, 0.0)
    ax = fb.intr("llvm.fabs", [x], F64, overload=[F64])
    r = exp64(fb, fb.fbin("fmul", y, log64(fb, ax)))
    fy = fb.intr("llvm.floor", [y], F64, overload=[F64])
    yint = fb.fcmp("oeq", fy, y)
    half = fb.fbin("fmul", y, _c(fb, 0.5))
    yodd = fb.ibin("and", yint, fb.fcmp("one", fb.intr("llvm.floor", [half], F64,
                                                         overload=[F64]), half))
    xneg = fb.icmp("slt", fb.cast("bitcast", x, I64), fb.const(0, I64))    # sign bit
    r = fb.select(fb.ibin("and", xneg, yodd), fb.fneg(r), r)
    inf = _c(fb, float("inf"))
    finite_neg = fb.ibin("and", fb.fcmp("olt", x, zero), fb.fcmp("one", ax, inf))
    y_fin = fb.fcmp("one", fb.intr("llvm.fabs", [y], F64, overload=[F64]), inf)
    true = fb.const(True, I1)
    nan_case = fb.ibin("and", finite_neg, fb.ibin("and", y_fin, fb.ibin("xor", yint, true)))
    r = fb.select(nan_case, _c(fb, float("nan")), r)
    y_inf = fb.fcmp("oeq", fb.intr("llvm.fabs", [y], F64, overload=[F64]), inf)
    unit = fb.ibin("and", fb.fcmp("oeq", ax, one), y_inf)
    r = fb.select(unit, one, r)
    r = fb.select(fb.ibin("or", fb.fcmp("oeq", y, zero), fb.fcmp("oeq", x, one)), one, r)
    return r


def erf64(fb: FuncBuilder, x):
    one = _c(fb, 1.0)
    ax = fb.intr("llvm.fabs", [x], F64, overload=[F64])
    z = fb.fbin("fmul", x, x)
    small = fb.fbin("fdiv", fb.fbin("fmul", x, _poly(fb, z, _ERF_T)), _poly(fb, z, _ERF_U))
    # erfc(|x|) for |x| >= 1: exp(-x^2) P(|x|) / Q(|x|)
    axc = fb.intr("llvm.minnum", [ax, _c(fb, 30.0)], F64, overload=[F64])
    e = exp64(fb, fb.fneg(fb.fbin("fmul", axc, axc)))
    near = fb.fbin("fdiv", _poly(fb, axc, _ERFC_P), _poly(fb, axc, _ERFC_Q))
    far = fb.fbin("fdiv", _poly(fb, axc, _ERFC_R), _poly(fb, axc, _ERFC_S))
    erfc = fb.fbin("fmul", e, fb.select(fb.fcmp("olt", axc, _c(fb, 8.0)), near, far))
    big = fb.intr("llvm.copysign", [fb.fbin("fsub", one, erfc), x], F64, overload=[F64])
    r = fb.select(fb.fcmp("olt", ax, one), small, big)
    return fb.select(_isnan(fb, x), x, r)
