"""``tracec.special``: PyTorch's ``torch.special`` namespace.

Invariant: composites of primitives like the rest of tracec's math (the
names PyTorch also has elsewhere are the same functions: ``special.erf is
tracec.erf``); the functions only here are built from them in float64 and
cast back: ``entr erfcx expit ndtr ndtri log_ndtr i0e i1 i1e xlog1py zeta``
(``erfcx`` and ``log_ndtr`` keep their precision far in the tails, where
``exp(x^2) * erfc(x)`` would overflow or underflow).  The Bessel functions
(``tracec.special_bessel``) and orthogonal polynomials
(``tracec.special_polynomials``) follow PyTorch's element rules in the
input's dtype and, as PyTorch's, have no gradient.
"""
from __future__ import annotations

import math

from tracec import functions as F
from tracec import ops
from tracec.functions import _float_unary, _named, logsumexp, log_softmax, softmax  # noqa: F401
from tracec.math_extra import (_binary_float, _nan_of, _with_singular_grads, _xlog_grads,  # noqa: F401
                               _const, _log1p, _polyval, _safe,
                               exp2, expm1, log1p, logit, round, xlogy)
from tracec.math_igamma import igamma as gammainc, igammac as gammaincc
from tracec.math_special import (_cf_erfc_tail, _in_f64, digamma, erfc, erfinv, i0,  # noqa: F401
                                 lgamma, mvlgamma, polygamma)
from tracec.math_trig import sinc  # noqa: F401
from tracec.special_bessel import (airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1,  # noqa: F401
                                   modified_bessel_i0, modified_bessel_i1, modified_bessel_k0,
                                   modified_bessel_k1, scaled_modified_bessel_k0,
                                   scaled_modified_bessel_k1, spherical_bessel_j0)
from tracec.special_polynomials import (chebyshev_polynomial_t, chebyshev_polynomial_u,  # noqa: F401
                                        chebyshev_polynomial_v, chebyshev_polynomial_w,
                                        hermite_polynomial_h, hermite_polynomial_he,
                                        laguerre_polynomial_l, legendre_polynomial_p,
                                        shifted_chebyshev_polynomial_t,
                                        shifted_chebyshev_polynomial_u,
                                        shifted_chebyshev_polynomial_v,
                                        shifted_chebyshev_polynomial_w)
from tracec.out_arg import with_out

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "gammainc",
           "gammaincc",
           "expm1", "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax",
           "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
           "sinc", "softmax", "xlog1py", "xlogy", "zeta",
           # Cephes' Bessel functions and the orthogonal polynomials (no gradient, as PyTorch)
           "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p"]

erf = F.erf
expit = F.sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma
_INF = float("inf")
_SQRT2 = math.sqrt(2.0)


def _entr(x):
    pos = ops.gt(x, 0.0)
    r = ops.neg(ops.mul(x, ops.log(_safe(pos, x, 1.0))))
    r = ops.where(pos, r, ops.where(ops.eq(x, 0.0), 0.0, _const(x, -_INF)))
    r = ops.where(ops.ne(x, x), x, r)
    # grad * -(1 + log(x)): inf at 0, NaN below
    return _with_singular_grads(r, (ops.eq(x, 0.0), x, "inf"), (ops.lt(x, 0.0), x, "nan"))


entr = _float_unary("entr", lambda x: _named(_entr(x), "SpecialEntrBackward0"))


def _erfcx(x):
    """exp(x^2) erfc(x): the continued fraction's value without its exp(-x^2)
    for x >= 2 (no overflow), the product below (erfc(x) > 4e-3 there)."""
    big = ops.ge(x, 2.0)
    xs = _safe(big, 2.0, x)
    small = ops.mul(ops.exp(ops.mul(xs, xs)), erfc(xs))
    xb = _safe(big, x, 2.0)
    inf = ops.eq(xb, _INF)
    tail = _cf_erfc_tail(_safe(inf, 2.0, xb))
    return ops.where(big, ops.where(inf, 0.0, tail), small)


erfcx = _in_f64("erfcx", _erfcx, "SpecialErfcxBackward0")


def _ndtr(x):
    return ops.mul(erfc(ops.mul(x, -1 / _SQRT2)), 0.5)


ndtr = _in_f64("ndtr", _ndtr, "SpecialNdtrBackward0")


def _log_ndtr(x):
    # Far below 0: log(erfcx(-x/sqrt2) / 2) - x^2 / 2 (erfc itself underflows).
    low = ops.lt(x, -1.0)
    xl = _safe(low, x, -1.0)
    tail = ops.sub(ops.log(ops.mul(_erfcx(ops.mul(xl, -1 / _SQRT2)), 0.5)),
                   ops.mul(ops.mul(xl, xl), 0.5))
    xh = _safe(low, -1.0, x)
    return ops.where(low, tail, _log1p(ops.neg(_ndtr(ops.neg(xh)))))


log_ndtr = _in_f64("log_ndtr", _log_ndtr, "SpecialLogNdtrBackward0")


def _ndtri(p):
    # sqrt(2) erfinv(2p - 1), then a Newton step on ndtr itself; in the far
    # lower tail (2p - 1 == -1) Newton on log_ndtr(x) = log(p) instead, from
    # x = -sqrt(-2 log p), where Phi / phi = sqrt(2 pi) erfcx(-x / sqrt2) / 2.
    # The upper half by symmetry: 1 - p is exact there (Sterbenz).
    inside = ops.logical_and(ops.gt(p, 0.0), ops.lt(p, 1.0))
    upper = ops.gt(p, 0.5)
    q = ops.where(upper, ops.sub(1.0, p), p)
    tail = ops.logical_and(inside, ops.lt(q, 1e-10))
    body = ops.logical_and(inside, ops.logical_not(tail))
    ps = _safe(body, q, 0.25)
    x = ops.mul(erfinv(ops.sub(ops.mul(ps, 2.0), 1.0)), _SQRT2)
    dens = ops.mul(ops.exp(ops.mul(ops.mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
    x = ops.sub(x, ops.div(ops.sub(_ndtr(x), ps), dens))
    logp = ops.log(_safe(tail, q, 1e-20))
    xt = ops.neg(ops.sqrt(ops.mul(logp, -2.0)))
    for _ in range(6):
        ratio = ops.mul(_erfcx(ops.mul(xt, -1 / _SQRT2)), math.sqrt(2 * math.pi) / 2)
        xt = ops.sub(xt, ops.mul(ops.sub(_log_ndtr(xt), logp), ratio))
    x = ops.where(tail, xt, x)
    x = ops.where(upper, ops.neg(x), x)
    edge = ops.where(ops.eq(p, 0.0), -_INF, ops.where(ops.eq(p, 1.0), _INF,
                                                       _const(p, float("nan"))))
    return _with_singular_grads(ops.where(inside, x, edge),      # exp(ndtri(p)^2 / 2)
                                (ops.logical_or(ops.eq(p, 0.0), ops.eq(p, 1.0)), p, "inf"))


ndtri = _in_f64("ndtri", _ndtri, "SpecialNdtriBackward0")


def _bessel_i(nu: int, x, scaled: bool):
    """I_nu(x) (nu 0 or 1), times exp(-|x|) if ``scaled``: the power series
    up to |x| = 30, the asymptotic series above."""
    ax = ops.abs_(x)
    small = ops.le(ax, 30.0)
    xs = _safe(small, ax, 0.0)
    y = ops.mul(ops.mul(xs, xs), 0.25)
    coef = [1 / (math.factorial(k) * math.factorial(k + nu)) for k in range(50, -1, -1)]
    series = _polyval(y, coef)
    if nu:   # x / 2 itself, not |x| / 2: odd, with I1'(0) = 1/2 (|x| has no slope at 0)
        series = ops.mul(series, ops.mul(_safe(small, x, 0.0), 0.5))
    if scaled:
        series = ops.mul(series, ops.exp(ops.neg(xs)))
    xb = _safe(small, 31.0, ax)
    inf = ops.eq(xb, _INF)
    xb = _safe(inf, 31.0, xb)
    s, term = 1.0, 1.0
    for k in range(1, 16):
        term = ops.mul(ops.div(term, xb), -(4 * nu * nu - (2 * k - 1) ** 2) / (k * 8))
        s = ops.add(s, term)
    asym = ops.div(s, ops.sqrt(ops.mul(xb, 2 * math.pi)))
    if not scaled:
        asym = ops.mul(asym, ops.exp(xb))
    # PyTorch: i0(+-inf) and i1(+-inf) are nan, their scaled forms 0.
    r = ops.where(small, series, ops.where(inf, 0.0 if scaled else _const(x, float("nan")),
                                           asym))
    if nu:  # odd function (the series already is)
        r = ops.where(ops.logical_and(ops.lt(x, 0.0), ops.logical_not(small)), ops.neg(r), r)
    return r


i0e = _in_f64("i0e", lambda x: _bessel_i(0, x, True), "SpecialI0EBackward0")
i1 = _in_f64("i1", lambda x: _bessel_i(1, x, False), "SpecialI1Backward0")
i1e = _in_f64("i1e", lambda x: _bessel_i(1, x, True), "SpecialI1EBackward0")


def xlog1py(input, other):  # noqa: A002
    x, y = _binary_float("xlog1py", input, other)
    zero = ops.eq(x, 0.0)
    r = ops.mul(x, _log1p(ops.where(zero, 0.0, y)))      # 0 where x == 0 (y not NaN)
    r = ops.add(r, _xlog_grads(x, y, -1.0, ops.log1p))
    return _named(ops.where(ops.ne(y, y), _nan_of(x, y), r), "SpecialXlog1PyBackward0")


_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def zeta(input, other):  # noqa: A002
    """Hurwitz zeta(s, q) = sum_k (q + k)^-s for s > 1, q > 0: ten terms, then
    Euler-Maclaurin; NaN for s < 1, inf at s == 1 (as PyTorch)."""
    s, q = _binary_float("zeta", input, other)
    n = 10
    ok = ops.logical_and(ops.gt(s, 1.0), ops.gt(q, 0.0))
    ss, qs = _safe(ok, s, 2.0), _safe(ok, q, 1.0)
    acc = None
    for k in range(n):
        t = ops.pow_(ops.add(qs, float(k)), ops.neg(ss))
        acc = t if acc is None else ops.add(acc, t)
    a = ops.add(qs, float(n))
    acc = ops.add(acc, ops.div(ops.pow_(a, ops.sub(1.0, ss)), ops.sub(ss, 1.0)))
    acc = ops.add(acc, ops.mul(ops.pow_(a, ops.neg(ss)), 0.5))
    rising = ss                                     # s (s+1) ... (s + 2j - 2)
    for j, b in enumerate(_B2K, 1):
        if j > 1:
            rising = ops.mul(rising, ops.mul(ops.add(ss, 2.0 * j - 3), ops.add(ss, 2.0 * j - 2)))
        term = ops.mul(ops.pow_(a, ops.sub(float(1 - 2 * j), ss)),
                       ops.mul(rising, b / math.factorial(2 * j)))
        acc = ops.add(acc, term)
    bad = ops.where(ops.eq(s, 1.0), _INF, _const(s, float("nan")))
    return _named(ops.where(ok, acc, bad), "SpecialZetaBackward0")



def _add_out_keyword():
    # torch.special's functions take out= (tracec/out_arg.py), softmax's excepted.
    g = globals()
    for name in __all__:
        if name not in ("softmax", "log_softmax") and \
                not hasattr(g[name], "__wrapped_without_out__"):
            g[name] = with_out(g[name])


_add_out_keyword()
