"""Special functions: ``lgamma digamma polygamma mvlgamma erfc erfinv i0``.

Invariant: each is a composite of primitives (so it differentiates, to
every order, and compiles), evaluated in float64 and cast back to the input's
float dtype (integer inputs give the default float dtype), with the series
and their ranges chosen for float64 accuracy (checked against PyTorch in
tests/test_ops_math_special.py):

* ``lgamma``: Lanczos (g = 7, 9 terms) for x >= 1/2, reflection below;
* ``digamma`` / ``polygamma``: the recurrence up to x >= 10 (+2n), then the
  asymptotic (Bernoulli) series; ``digamma`` reflects below 1/2;
* ``erfc``: ``1 - erf`` below 2, the continued fraction (40 terms) above;
* ``erfinv``: Giles' approximation refined by two Newton steps on ``erf``;
* ``i0``: the power series (50 terms) up to 30, the asymptotic series above.

Branches are ``where``s whose untaken side sees a safe operand, so no
NaN reaches a gradient from it.
"""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import _float_unary, _named
from tracec.math_extra import _const, _polyval, _rint, _safe, _signbit, _with_singular_grads
from tracec.tensor import RECORDERS, Tensor

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "erfc", "erfinv", "i0"]

_INF = float("inf")
_LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7]


def _in_f64(name, body, grad_name):
    def fn(x):
        d = x.dtype
        w = ops.cast(x, dt.float64) if d is not dt.float64 else x
        y = body(w)
        return _named(ops.cast(y, d) if d is not dt.float64 else y, grad_name)
    return _float_unary(name, fn)


def _sinpi_abs(x):
    """|sin(pi x)|, exact at the integers (0): reduced to [0, 1/2] first."""
    r = ops.sub(x, _rint(x))                  # exact, in [-1/2, 1/2]
    return ops.abs_(ops.sin(ops.mul(r, math.pi)))


def _lanczos(z):
    """lgamma(z) for z >= 1/2."""
    z1 = ops.sub(z, 1.0)
    a = _LANCZOS[0]
    for i, c in enumerate(_LANCZOS[1:], 1):
        a = ops.add(a, ops.div(c, ops.add(z1, float(i))))
    t = ops.add(z1, 7.5)
    return ops.add(ops.add(0.5 * math.log(2 * math.pi),
                           ops.sub(ops.mul(ops.add(z1, 0.5), ops.log(t)), t)), ops.log(a))


def _lgamma(x):
    refl = ops.lt(x, 0.5)
    xs = ops.where(refl, ops.sub(1.0, x), x)
    inf = ops.eq(xs, _INF)
    lg = _lanczos(_safe(inf, 1.0, xs))
    s = _sinpi_abs(_safe(refl, x, 0.5))
    pole = ops.eq(s, 0.0)
    r = ops.sub(ops.sub(math.log(math.pi), ops.log(ops.where(pole, 1.0, s))), lg)
    out = ops.where(refl, ops.where(pole, _INF, r), lg)
    # Exact zeros at 1 and 2, keeping the gradient (digamma there): subtract
    # the value's own constant rounding error instead of replacing it.
    ones = ops.logical_or(ops.eq(x, 1.0), ops.eq(x, 2.0))
    out = ops.sub(out, ops.where(ones, ops.stop_gradient(out), 0.0))
    out = ops.where(inf, _INF, out)
    # the gradient digamma(x) at the poles: -inf at +0, inf at -0, NaN below
    zero = ops.eq(x, 0.0)
    neg_int = ops.logical_and(ops.lt(x, 0.0), ops.eq(_rint(x), x))
    neg = _signbit(x)
    return _with_singular_grads(out, (ops.logical_and(zero, ops.logical_not(neg)), x, "-inf"),
                                (ops.logical_and(zero, neg), x, "inf"), (neg_int, x, "nan"))


_PSI_COEF = [1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12]


def _psi_asym(z):
    w = ops.div(1.0, ops.mul(z, z))
    series = ops.mul(w, _polyval(w, _PSI_COEF[::-1]))
    return ops.sub(ops.sub(ops.log(z), ops.div(0.5, z)), series)


def _psi_pos(x):
    """digamma(x) for x >= 1/2."""
    small = ops.lt(x, 10.0)
    xs = _safe(small, x, 10.0)
    acc = ops.div(1.0, xs)
    for k in range(1, 10):
        acc = ops.add(acc, ops.div(1.0, ops.add(xs, float(k))))
    shifted = ops.sub(_psi_asym(ops.add(xs, 10.0)), acc)
    return ops.where(small, shifted, _psi_asym(_safe(small, 10.0, x)))


def _digamma(x):
    refl = ops.lt(x, 0.5)
    xs = ops.where(refl, ops.sub(1.0, x), x)
    inf = ops.eq(xs, _INF)
    p = _psi_pos(_safe(inf, 1.0, xs))
    xr = _safe(refl, x, 0.5)
    r = ops.sub(xr, _rint(xr))                # cot has period 1
    pole = ops.eq(r, 0.0)
    pr = ops.mul(ops.where(pole, 0.5, r), math.pi)
    cot = ops.div(ops.cos(pr), ops.sin(pr))
    reflected = ops.sub(p, ops.mul(cot, math.pi))
    # PyTorch: digamma(+-0) = -+inf, nan at the negative integers.
    at0 = ops.where(_signbit(x), _INF, _const(x, -_INF))
    reflected = ops.where(pole, ops.where(ops.eq(x, 0.0), at0, _const(x, float("nan"))),
                          reflected)
    out = ops.where(refl, reflected, p)
    out = ops.where(inf, ops.where(ops.gt(x, 0.0), _INF, _const(x, float("nan"))), out)
    return _with_singular_grads(out, (ops.eq(x, 0.0), x, "inf"))    # trigamma(+-0)


lgamma = _in_f64("lgamma", _lgamma, "LgammaBackward0")
digamma = _in_f64("digamma", _digamma, "DigammaBackward0")

# Bernoulli numbers B_2k, k = 1..8.
_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def _polygamma_n(n: int, x):
    """polygamma(n, x) for n >= 1: shift by N, then the asymptotic series."""
    N = 10 + 2 * n
    sign = 1.0 if n % 2 else -1.0            # (-1)^(n+1)
    fact = float(math.factorial(n))
    acc = None
    for k in range(N):
        term = ops.pow_(ops.add(x, float(k)), float(-(n + 1)))
        acc = term if acc is None else ops.add(acc, term)
    z = ops.add(x, float(N))
    s = ops.add(ops.mul(ops.pow_(z, float(-n)), float(math.factorial(n - 1))),
                ops.mul(ops.pow_(z, float(-(n + 1))), fact / 2))
    for k, b in enumerate(_B2K, 1):
        c = b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
        s = ops.add(s, ops.mul(ops.pow_(z, float(-(2 * k + n))), c))
    return ops.mul(ops.add(ops.mul(acc, fact), s), sign)


def polygamma(n: int, input):  # noqa: A002
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return digamma(input)
    return _in_f64("polygamma", lambda x: _polygamma_n(n, x), "PolygammaBackward0")(input)


def mvlgamma(input, p: int):  # noqa: A002
    x = input
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if isinstance(x, Tensor) and not x.dtype.is_floating_point:
        x = ops.cast(x, dt.get_default_dtype())      # x - i/2 in floats, as PyTorch
    if isinstance(x, Tensor) and RECORDERS:       # a compiled call checks its own x
        x = ops.check(x, ops.gt(x, (p - 1) / 2), "All elements must be greater than (p-1)/2")
    elif isinstance(x, Tensor) and x.numel() and not bool((x._data > (p - 1) / 2).all()):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    out = None
    for i in range(p):
        term = lgamma(ops.sub(x, i / 2) if i else x)
        out = term if out is None else ops.add(out, term)
    return _named(ops.add(out, p * (p - 1) / 4 * math.log(math.pi)), "MvlgammaBackward0")


def _erfc(x):
    small = ops.lt(x, 2.0)
    one_minus = ops.sub(1.0, ops.erf(_safe(small, x, 0.0)))
    xb = _safe(small, 2.0, x)
    inf = ops.eq(xb, _INF)
    xb = _safe(inf, 2.0, xb)
    cf = ops.mul(ops.exp(ops.neg(ops.mul(xb, xb))), _cf_erfc_tail(xb))
    return ops.where(small, one_minus, ops.where(inf, 0.0, cf))


def _cf_erfc_tail(x):
    """exp(x^2) erfc(x) for x >= 2: the continued fraction 1 / (sqrt(pi) (x +
    (1/2) / (x + 1 / (x + (3/2) / ...)))), 40 terms (float64-exact there)."""
    k = x
    for n in range(40, 0, -1):
        k = ops.add(x, ops.div(n / 2, k))
    return ops.div(1.0, ops.mul(k, math.sqrt(math.pi)))


_GILES_LO = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
             -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
_GILES_HI = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
             -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]


def _erfinv(x):
    inside = ops.lt(ops.abs_(x), 1.0)
    xs = _safe(inside, x, 0.0)
    w = ops.neg(ops.log(ops.mul(ops.sub(1.0, xs), ops.add(1.0, xs))))
    lo = ops.lt(w, 5.0)
    p_lo = _polyval(ops.sub(_safe(lo, w, 2.5), 2.5), _GILES_LO)
    p_hi = _polyval(ops.sub(ops.sqrt(_safe(lo, 9.0, w)), 3.0), _GILES_HI)
    y = ops.mul(ops.where(lo, p_lo, p_hi), xs)
    for _ in range(2):
        slope = ops.mul(ops.exp(ops.neg(ops.mul(y, y))), 2 / math.sqrt(math.pi))
        y = ops.sub(y, ops.div(ops.sub(ops.erf(y), xs), slope))
    edge = ops.where(ops.eq(x, 1.0), _INF, ops.where(ops.eq(x, -1.0), -_INF,
                                                 _const(x, float("nan"))))
    return _with_singular_grads(ops.where(inside, y, edge),
                                (ops.eq(ops.abs_(x), 1.0), x, "inf"))   # exp(erfinv(x)^2)


def _i0(x):
    ax = ops.abs_(x)
    small = ops.le(ax, 30.0)
    xs = _safe(small, ax, 0.0)
    y = ops.mul(ops.mul(xs, xs), 0.25)
    series = _polyval(y, [1 / math.factorial(k) ** 2 for k in range(50, -1, -1)])
    xb = _safe(small, 31.0, ax)
    inf = ops.eq(xb, _INF)
    xb = _safe(inf, 31.0, xb)
    s, term = 1.0, 1.0
    for k in range(1, 16):
        term = ops.mul(ops.div(term, xb), (2 * k - 1) ** 2 / (k * 8))
        s = ops.add(s, term)
    asym = ops.div(ops.mul(ops.exp(xb), s), ops.sqrt(ops.mul(xb, 2 * math.pi)))
    return ops.where(small, series, ops.where(inf, _const(x, float("nan")), asym))


erfc = _in_f64("erfc", lambda x: ops.where(
    ops.lt(x, 0.0), ops.sub(2.0, _erfc(ops.neg(x))), _erfc(x)), "ErfcBackward0")
erfinv = _in_f64("erfinv", _erfinv, "ErfinvBackward0")
i0 = _in_f64("i0", _i0, "I0Backward0")
