"""PyTorch's trigonometric and hyperbolic functions beyond ``sin cos
tanh``: ``tan atan asin acos atan2 sinh cosh asinh acosh atanh`` (and their
``arc*`` names), ``hypot sinc deg2rad rad2deg``.

Invariant: composites of primitives, accurate to a few ulps over the whole
range: ``atan`` is Cephes' (range reduction to |x| <= 0.66, then a rational
approximation), ``asin``/``acos`` go through ``atan2`` of sqrt((1-x)(1+x)),
small arguments of ``sinh asinh acosh atanh`` use forms without
cancellation, large ones forms without overflow; the branches of every
``where`` see safe operands on the side not taken (finite gradients).
"""
from __future__ import annotations

import functools
import math

from tracec import ops
from tracec.functions import _float_unary, _named, promote
from tracec.math_extra import (_LN2, _binary_float, _const, _float, _log1p, _polyval,
                               _with_singular_grads,
                               _safe, _signbit, half_in_float32)
from tracec.tensor import Tensor

__all__ = ["acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2",
           "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "cosh", "sinh", "tan", "hypot",
           "sinc", "deg2rad", "rad2deg"]

_TORCH_INT = {"int64": "Long", "int32": "Int", "bool": "Bool"}


# --- trigonometry ------------------------------------------------------------------

# Cephes atan: range reduction to |x| <= 0.66, then x + x^3 P(x^2) / Q(x^2).
_ATAN_P = [-8.750608600031904122785e-1, -1.615753718733365076637e1,
           -7.500855792314704667340e1, -1.228866684490136173410e2, -6.485021904942025371773e1]
_ATAN_Q = [1.0, 2.485846490142306297962e1, 1.650270098316988542046e2,
           4.328810604912902668951e2, 4.853903996359136964868e2, 1.945506571482613964425e2]
_T3P8 = 2.41421356237309504880   # tan(3 pi / 8)
_MOREBITS = 6.123233995736765886130e-17


def _atan(x):
    ax = ops.abs_(x)
    big = ops.gt(ax, _T3P8)
    mid = ops.logical_and(ops.gt(ax, 0.66), ops.logical_not(big))
    r_big = ops.neg(ops.div(1.0, _safe(big, ax, 1.0)))
    r_mid = ops.div(ops.sub(ax, 1.0), ops.add(_safe(mid, ax, 0.0), 1.0))
    r = ops.where(big, r_big, ops.where(mid, r_mid, ax))
    base = ops.where(big, math.pi / 2 + _MOREBITS,
                     ops.where(mid, math.pi / 4 + 0.5 * _MOREBITS, _const(x, 0.0)))
    z = ops.mul(r, r)
    p = ops.div(ops.mul(z, _polyval(z, _ATAN_P)), _polyval(z, _ATAN_Q))
    y = ops.add(base, ops.add(ops.mul(r, p), r))
    # sign(x) * y, keeping atan(-0.0) == -0.0 and atan(nan) == nan.
    return ops.where(ops.lt(x, 0.0), ops.neg(y), ops.where(ops.eq(x, 0.0), x, y))


def _atan2(y, x):
    """atan2 with PyTorch's gradient: ``x * recip`` to ``y`` and ``-y *
    recip`` to ``x``, recip = 1 / (x*x + y*y) with an infinite recip (the
    origin, or an underflowed sum) taken as 0, as PyTorch masks it (the
    composite's own ``abs`` would give 0 on the axes)."""
    raw = ops.div(1.0, ops.add(ops.mul(y, y), ops.mul(x, x)))
    at_origin = ops.eq(raw, float("inf"))
    recip = ops.where(at_origin, 0.0, raw)
    cy = ops.mul(x, recip)
    cx = ops.mul(ops.neg(y), recip)
    # The same coefficients with their own gradients (the first derivative
    # differentiated: second derivatives), from finite inputs away from the
    # origin so that those gradients are finite; where recip was infinite
    # or an input is, the values above and no gradient.  (Those paths add
    # zeros to the first derivative: a zero gradient on an axis is +0.0
    # where PyTorch's is -0.0.)
    bad = ops.logical_or(at_origin, ops.logical_or(ops.logical_not(_finite_or_nan(x)),
                                                   ops.logical_not(_finite_or_nan(y))))
    xs, ys = _safe(bad, 1.0, x), _safe(bad, 0.0, y)
    recip = ops.div(1.0, ops.add(ops.mul(ys, ys), ops.mul(xs, xs)))
    gy = ops.where(bad, ops.stop_gradient(cy), ops.mul(xs, recip))
    gx = ops.where(bad, ops.stop_gradient(cx), ops.mul(ops.neg(ys), recip))
    return _with_grad(_atan2_value(y, x), (cy, y, gy), (cx, x, gx))


def _atan2_value(y, x):
    ax, ay = ops.abs_(x), ops.abs_(y)
    swap = ops.gt(ay, ax)
    num = ops.where(swap, ax, ay)
    den = ops.where(swap, ay, ax)
    both0 = ops.eq(den, 0.0)
    both_inf = ops.logical_and(ops.eq(num, float("inf")), ops.eq(den, float("inf")))
    q = ops.div(ops.where(both0, 0.0, num), ops.where(both0, 1.0, den))
    q = ops.where(both_inf, 1.0, q)
    a = _atan(q)                                   # in [0, pi/4]
    a = ops.where(swap, ops.sub(math.pi / 2, a), a)
    neg_x = ops.logical_or(ops.lt(x, 0.0), ops.logical_and(ops.eq(x, 0.0),
                                                           _signbit(x)))
    a = ops.where(neg_x, ops.sub(math.pi, a), a)
    a = ops.where(ops.logical_or(ops.lt(y, 0.0), _signbit(y)), ops.neg(a), a)
    nan = ops.logical_or(ops.ne(x, x), ops.ne(y, y))
    return ops.where(nan, ops.add(x, y), a)


def _sqrt_1m_x2(x):
    return ops.sqrt(ops.mul(ops.sub(1.0, x), ops.add(1.0, x)))


def _finite_or_nan(v):
    return ops.ne(ops.abs_(v), float("inf"))


def _with_grad(value, *terms):
    """``value``'s numbers with the derivative of ``sum(c * (u - u))`` over
    ``terms`` of ``(c, u)``: each ``c`` a coefficient (its gradient stopped)
    and ``u - stop_gradient(u)`` exactly 0 where ``u`` is finite.  For
    composites whose own chain of primitives differentiates badly at a
    point (``abs`` at 0 inside ``atan2``, inf * 0 at |x| = 1 in asin /
    acos): the terms carry PyTorch's derivative formula instead.
    A term ``(c, u, c_grad)`` also carries the coefficient's own gradient:
    ``c_grad`` has ``c``'s values and finite gradients (they are multiplied
    by an exact 0), so a ``create_graph`` backward gives the second
    derivatives (asin / acos need not: their terms give the right second
    derivative with the coefficients stopped)."""
    out = ops.stop_gradient(value)
    # where the value is a number, a non-finite coefficient or operand (an
    # infinite input: inf - inf, inf * 0) counts as 0 so the value stays;
    # where it is nan, nan gradients go through as PyTorch's
    num = ops.eq(out, out)
    for c, u, *c_grad in terms:
        c_grad = ops.neg(c_grad[0]) if c_grad else None
        c, su = ops.stop_gradient(ops.neg(c)), ops.stop_gradient(u)
        c = ops.where(ops.logical_and(num, ops.logical_not(_finite(c))), 0.0, c)
        d = ops.where(ops.logical_and(num, ops.logical_not(_finite(su))), 0.0, ops.sub(u, su))
        # out - (-c * 0 + 0.0): the + 0.0 makes the zero +0.0 whatever c's
        # sign, and x - (+0.0) is x for every x, -0.0 included
        if c_grad is not None:
            # (c + c) / 2 is c bit for bit (its signed zeros too), with half
            # of c's own gradient: d(c d)/du = c' d + c, so c's whole
            # gradient would give twice the second derivative
            c_grad = ops.where(ops.logical_and(num, ops.logical_not(_finite(c_grad))), 0.0,
                               c_grad)
            c = ops.mul(ops.add(c, c_grad), 0.5)
        out = ops.sub(out, ops.add(ops.mul(c, d), 0.0))
    return out


def _finite(v):
    return ops.lt(ops.abs_(v), float("inf"))


def _asin(x):
    s = _sqrt_1m_x2(x)
    inside = ops.le(ops.abs_(x), 1.0)
    v = ops.where(inside, _atan2_value(x, _safe(inside, s, 1.0)), ops.add(s, x))
    # d/dx = 1 / t with t = sqrt(1 - x*x) (PyTorch's rsqrt(-x*x + 1)),
    # written x^2/t + t = x * (x / t) + t: t's own gradient -x / t gives
    # the infinities at |x| = 1, the coefficients stay finite
    t = ops.sqrt(ops.sub(1.0, ops.mul(x, x)))
    return _with_grad(v, (ops.neg(x), t), (t, x))


def _acos(x):
    s = _sqrt_1m_x2(x)
    inside = ops.le(ops.abs_(x), 1.0)
    v = ops.where(inside, _atan2_value(_safe(inside, s, 1.0), x), ops.add(s, x))
    t = ops.sqrt(ops.sub(1.0, ops.mul(x, x)))          # d/dx = -1 / t
    return _with_grad(v, (x, t), (ops.neg(t), x))


atan = arctan = _float_unary("atan", lambda x: _named(_atan(x), "AtanBackward0"))
asin = arcsin = _float_unary("asin", lambda x: _named(_asin(x), "AsinBackward0"))
acos = arccos = _float_unary("acos", lambda x: _named(_acos(x), "AcosBackward0"))
tan = _float_unary("tan", lambda x: _named(ops.div(ops.sin(x), ops.cos(x)), "TanBackward0"))


def atan2(input, other):  # noqa: A002
    y, x = _binary_float("atan2", input, other)
    return _named(_atan2(y, x), "Atan2Backward0")


arctan2 = atan2

def _sinh(x):
    # Small |x|: 2t / (1 - t^2) with t = tanh(x/2) keeps full relative
    # precision; large: the exponentials, halved before they can overflow.
    ax = ops.abs_(x)
    small = ops.lt(ax, 1.0)
    t = ops.tanh(ops.mul(_safe(small, x, 0.0), 0.5))
    s_small = ops.div(ops.mul(t, 2.0), ops.sub(1.0, ops.mul(t, t)))
    big = _safe(small, 1.0, ax)
    s_big = ops.sub(ops.exp(ops.sub(big, _LN2)), ops.exp(ops.sub(ops.neg(big), _LN2)))
    return ops.where(small, s_small, ops.where(ops.lt(x, 0.0), ops.neg(s_big), s_big))


def _cosh(x):
    ax = ops.abs_(x)
    return ops.add(ops.exp(ops.sub(ax, _LN2)), ops.exp(ops.sub(ops.neg(ax), _LN2)))


sinh = _float_unary("sinh", lambda x: _named(_sinh(x), "SinhBackward0"))
cosh = _float_unary("cosh", lambda x: _named(_cosh(x), "CoshBackward0"))


def _asinh(x):
    ax = ops.abs_(x)
    big = ops.gt(ax, 2.0 ** 28)
    a = _safe(big, 1.0, ax)
    # log1p(a + a^2 / (1 + sqrt(1 + a^2))): exact for small a.
    r = _log1p(ops.add(a, ops.div(ops.mul(a, a), ops.add(ops.sqrt(ops.add(ops.mul(a, a), 1.0)),
                                                          1.0))))
    r = ops.where(big, ops.add(ops.log(_safe(big, ax, 1.0)), _LN2), r)
    return ops.where(ops.lt(x, 0.0), ops.neg(r), ops.where(ops.eq(x, 0.0), x, r))


def _acosh(x):
    big = ops.gt(x, 2.0 ** 28)
    one = ops.eq(x, 1.0)
    ok = ops.logical_and(ops.gt(x, 1.0), ops.logical_not(big))
    a = ops.sub(_safe(ok, x, 2.0), 1.0)
    r = _log1p(ops.add(a, ops.sqrt(ops.mul(a, ops.add(a, 2.0)))))
    r = ops.where(big, ops.add(ops.log(_safe(big, x, 1.0)), _LN2), r)
    r = ops.where(ops.logical_or(ok, big), r, _const(x, float("nan")))  # nan below 1
    return _with_singular_grads(ops.where(one, 0.0, r), (one, x, "inf"))  # grad / sqrt(x^2 - 1)


def _atanh(x):
    inside = ops.lt(ops.abs_(x), 1.0)
    a = _safe(inside, x, 0.0)
    r = ops.mul(_log1p(ops.div(ops.mul(a, 2.0), ops.sub(1.0, a))), 0.5)
    at1 = ops.eq(ops.abs_(x), 1.0)           # +-inf there (grad / (1 - x^2): inf), nan beyond
    edge = ops.where(at1, ops.where(ops.gt(x, 0.0), _const(x, math.inf), -math.inf),
                     _const(x, float("nan")))
    return _with_singular_grads(ops.where(inside, r, edge), (at1, x, "inf"))


asinh = arcsinh = _float_unary("asinh", lambda x: _named(_asinh(x), "AsinhBackward0"))
acosh = arccosh = _float_unary("acosh", lambda x: _named(_acosh(x), "AcoshBackward0"))
atanh = arctanh = _float_unary("atanh", lambda x: _named(_atanh(x), "AtanhBackward0"))


def hypot(input, other):  # noqa: A002
    # (refused only where the operands promote to an integer dtype, as
    # PyTorch's: an integer tensor with a float one, or a 0-d double, is fine)
    _, d = promote("hypot", input, other)
    if not d.is_floating_point:
        raise NotImplementedError(f"\"hypot_cpu\" not implemented for '{_TORCH_INT[d.name]}'")
    a, b = _binary_float("hypot", input, other)
    # Scaled by the larger magnitude: no overflow of the squares.
    aa, ab = ops.abs_(a), ops.abs_(b)
    m = ops.maximum(aa, ab)
    n = ops.minimum(aa, ab)
    zero = ops.eq(m, 0.0)
    inf = ops.eq(m, float("inf"))
    ok = ops.logical_not(ops.logical_or(zero, inf))
    r = ops.div(_safe(ok, n, 0.0), _safe(ok, m, 1.0))
    y = ops.mul(_safe(ok, m, 1.0), ops.sqrt(ops.add(ops.mul(r, r), 1.0)))
    y = ops.where(ok, y, ops.where(inf, float("inf"), ops.add(aa, ab)))
    y = ops.where(ops.logical_or(ops.eq(aa, float("inf")), ops.eq(ab, float("inf"))),
                  float("inf"), y)              # inf wins over nan, as C's hypot
    zero = ops.logical_and(ops.eq(a, 0.0), ops.eq(b, 0.0))     # grad * a / y: 0 / 0
    return _named(_with_singular_grads(y, (zero, a, "nan"), (zero, b, "nan")), "HypotBackward0")


def deg2rad(input):
    return _named(ops.mul(_float(input, "deg2rad"), math.pi / 180), "Deg2RadBackward0")


def rad2deg(input):
    return _named(ops.mul(_float(input, "rad2deg"), 180 / math.pi), "Rad2DegBackward0")


def sinc(input):
    input = _float(input, "sinc")
    zero = ops.eq(input, 0.0)
    px = ops.mul(ops.where(zero, 1.0, input), math.pi)
    return _named(ops.where(zero, 1.0, ops.div(ops.sin(px), px)), "SincBackward0")


# Half-precision inputs are computed in float32 (one rounding, as PyTorch).
for _name in __all__:
    globals()[_name] = half_in_float32(globals()[_name])

#: complex versions of the real composites above (name -> function of one
#: complex tensor), registered by ``tracec.complex_ops``, which sits above
#: this module: NumPy's complex functions with PyTorch's derivatives (the
#: real composites crashed on complex input, and cosh returned a real tensor)
COMPLEX: dict = {}


def _complex_dispatch(name, fn):
    @functools.wraps(fn)
    def wrapper(input, *args, **kwargs):  # noqa: A002
        if isinstance(input, Tensor) and input.dtype.is_complex and name in COMPLEX:
            return COMPLEX[name](input)
        return fn(input, *args, **kwargs)
    return wrapper


for _name, _base in (("sinh", "sinh"), ("cosh", "cosh"), ("asin", "asin"), ("arcsin", "asin"),
                     ("acos", "acos"), ("arccos", "acos"), ("asinh", "asinh"),
                     ("arcsinh", "asinh"), ("atan", "atan"), ("arctan", "atan")):
    globals()[_name] = _complex_dispatch(_base, globals()[_name])
