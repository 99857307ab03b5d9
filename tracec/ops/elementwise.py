"""Elementwise primitives: unary math, binary arithmetic, comparisons,
``where`` and ``cast``.

Invariant: binary primitives take operands of one dtype (the front end
promotes first); the result shape is the NumPy broadcast of the operands.
VJPs reduce their cotangents back to each operand's shape (``sum_to``).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from tracec import dtypes as dt
from tracec.ops.core import Aval, Primitive, ShapeError, broadcast_shapes
from tracec.ops.iter_layout import relayout
# The VJP rules of one layer call each other: modules, resolved at call time.
from tracec.ops import creation, movement, reduce  # noqa: E402



def _same_dtype(name):
    def rule(a, b, **_):
        if a is not b:
            raise ShapeError(f"{name}: operand dtypes differ ({a} vs {b})")
        return a
    return rule


def _float_only(name):
    def rule(d, **_):
        if not (d.is_floating_point or d.category == 3):
            raise ShapeError(f"{name}: expected a floating point operand, got {d}")
        return d
    return rule


def _unary_shape(s, **_):
    return s


try:  # np.errstate(all="ignore") without its per-call cost (~2 µs): the hot path
    from numpy._core.umath import _extobj_contextvar, _make_extobj
    _IGNORE_FP = _make_extobj(all="ignore")
    _set_fp, _reset_fp = _extobj_contextvar.set, _extobj_contextvar.reset
except (ImportError, AttributeError, TypeError):  # another NumPy: the public way
    _IGNORE_FP = None


class quiet_fp:
    """``with quiet_fp():`` is ``with np.errstate(all="ignore"):`` (NumPy's
    floating point warnings off: PyTorch computes inf / nan silently) at a
    third of its cost (errstate builds its setting anew on each entry);
    reentrant, and per thread and task as NumPy's own setting is."""

    __slots__ = ("_token",)

    if _IGNORE_FP is None:
        def __enter__(self):
            self._token = np.errstate(all="ignore")
            self._token.__enter__()

        def __exit__(self, *exc):
            self._token.__exit__(*exc)
    else:
        def __enter__(self):
            self._token = _set_fp(_IGNORE_FP)

        def __exit__(self, *exc):
            _reset_fp(self._token)


def _quiet_impl(f):
    """``f`` with NumPy's floating point warnings off (PyTorch gives inf/nan
    silently)."""
    if _IGNORE_FP is None:
        def impl(*a, **_):
            with np.errstate(all="ignore"):
                return f(*a)
    else:
        def impl(*a, **_):
            token = _set_fp(_IGNORE_FP)
            try:
                return f(*a)
            finally:
                _reset_fp(token)
    impl.__name__ = getattr(f, "__name__", "impl")
    return impl


def _quiet_binary_impl(f):
    """``_quiet_impl(f)`` for a binary ``f`` whose result is laid out as
    PyTorch's TensorIterator lays it out when the operands' layouts
    disagree (``iter_layout``); one frame, as binary ops are the hottest."""
    nd = np.ndarray
    if _IGNORE_FP is None:
        def impl(x, y, **_):
            with np.errstate(all="ignore"):
                out = f(x, y)
            if (type(x) is not nd or x.flags.c_contiguous) and \
                    (type(y) is not nd or y.flags.c_contiguous):
                return out
            return relayout(out, (x, y))
    else:
        def impl(x, y, **_):
            token = _set_fp(_IGNORE_FP)
            try:
                out = f(x, y)
            finally:
                _reset_fp(token)
            # (the common case: no operand in another layout than row-major)
            if (type(x) is not nd or x.flags.c_contiguous) and \
                    (type(y) is not nd or y.flags.c_contiguous):
                return out
            return relayout(out, (x, y))
    impl.__name__ = getattr(f, "__name__", "impl")
    return impl


# --- helpers used by the VJP rules (primitives only) -------------------------

def conj(v):
    """``v``'s complex conjugate for a complex value, else ``v`` itself.

    PyTorch's gradients of complex values are conjugate Wirtinger
    derivatives: a holomorphic op's VJP multiplies the cotangent by the
    *conjugate* of its derivative.  Complex values exist only eagerly (the IR
    has no complex type), so the conjugate is the eager value's own
    ``conj()``; on real values and on IR values this is the identity."""
    if isinstance(v, (complex, np.complexfloating)):   # a weak scalar operand
        return v.conjugate()
    d = getattr(v, "dtype", None)
    return v.conj() if getattr(d, "category", None) == 3 else v


def _abs_vjp(g, x, out):
    if x.dtype.category == 3:
        # d|z| = Re(conj(sgn z) dz): the cotangent is g * sgn(z) (0 at 0).
        return (mul(cast(g, x.dtype), sign(x)),)
    return (mul(g, sign(x)),)

def sum_to(g, shape):
    """Sum ``g`` down to ``shape`` (the adjoint of broadcasting)."""
    gshape = tuple(g.shape)
    shape = tuple(shape)
    # Ranks first: tuples of different lengths still compare their items,
    # and a symbolic size compared with a number would become a size guard.
    if len(gshape) == len(shape) and gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1)
    if axes:
        g = reduce.reduce_sum(g, axes=axes)
    if tuple(g.shape) != shape:
        g = movement.reshape(g, shape)
    return g


def _half_in_float(f):
    """``f`` computing a float16 array in float32 and rounding once, as
    PyTorch's CPU kernels compute half (``1 / np.sqrt(x)`` in float16
    rounded twice: rsqrt and sigmoid were an ulp off)."""
    def g(x, **kw):
        if getattr(x, "dtype", None) == np.float16:
            return np.asarray(f(x.astype(np.float32), **kw)).astype(np.float16)
        return f(x, **kw)
    return g


def _unary(name, f, vjp, *, float_only=True, save=(0,), save_out=False):
    return Primitive(name, kind="elementwise", impl=_quiet_impl(_half_in_float(f)),
                     shape_rule=_unary_shape,
                     dtype_rule=_float_only(name) if float_only else (lambda d, **_: d),
                     vjp=vjp, save=save, save_out=save_out)


def _sigmoid(x):
    """``1 / (1 + exp(-x))`` for ``x >= 0``, ``exp(x) / (1 + exp(x))``
    below (no overflow either side).  float32 / float64 arrays take one
    ``exp(-|x|)`` (the same argument as either branch's exp, so the same
    bits) and a branch-free select of the numerator, where the two-branch
    form computed three exps and selected with a mispredicting ``np.where``
    (SiLU / sigmoid: 4x fewer ns an element); the values are the same but
    for the sign bit of a NaN."""
    x = np.asarray(x)
    if x.ndim == 0 or x.dtype not in (np.float32, np.float64):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)),
                        np.exp(x) / (1 + np.exp(x))).astype(x.dtype)
    one = x.dtype.type(1)
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)                        # exp(-x) where x >= 0, exp(x) below
    num = _where_impl(np.greater_equal(x, 0), np.asarray(one), e)
    if num is e or not num.flags.writeable:
        num = np.array(num)
    np.add(e, one, out=e)                   # 1 + exp(-|x|)
    return np.divide(num, e, out=num)


# erf in float64 NumPy: Cephes' rational approximations (ndtr.c: erf on
# |x| <= 1, erfc on 1 < |x| < 6; +-1 beyond), within 3 ulps of math.erf (the
# tests compare over a dense grid).  np.vectorize(math.erf) cost ~1 µs an
# element: GELU made a nanoGPT eager step half erf.
_ERF_T = (9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
          7.00332514112805075473E3, 5.55923013010394962768E4)
_ERF_U = (3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
          2.26290000613890934246E4, 4.92673942608635921086E4)
_ERFC_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
           4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
           9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_ERFC_Q = (1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
           9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
           1.65666309194161350182E3, 5.57535340817727675546E2)
def _polevl(x, coefs, leading_one=False):
    """Horner's rule in place (a fresh array per step cost a third more)."""
    y = x + coefs[0] if leading_one else np.full_like(x, coefs[0])
    for c in coefs[1:]:
        y *= x
        y += c
    return y


# float32: the cpu backend's float32 erf (backends/cpu/mathfns.py, least
# squares fits within 2.4 ulp): x P(x^2) on |x| < 1, 1 - exp(-x^2) Q(1/x)
# on 1 <= |x| (x clamped at 4, where erf is 1 in float32).  Both are
# computed for every element (masks on unpredictable data cost more).
ERF32_A = (7.898210124667817e-05, -0.0008024354100643322, 0.005190053574128705,
           -0.026854808534834983, 0.11283612428168437, -0.37612628843314244,
           1.1283791665100473)
ERF32_B = (-0.01207988461891482, 0.0414729336892149, -0.003256680623878436,
           -0.21059322767552455, 0.47496514543771395, -0.4620603850820075,
           0.03947317201853328, 0.5594154848029826, 0.0002469873514900127)


_ERF32_A = tuple(np.float32(c) for c in ERF32_A)
_ERF32_B = tuple(np.float32(c) for c in ERF32_B)


def _polevl32(x, coefs):
    """Horner's rule in place, from ``x * c0`` (the bits of a start at c0)."""
    y = x * coefs[0]
    for c in coefs[1:-1]:
        y += c
        y *= x
    y += coefs[-1]
    return y


def _erf32(x):
    # In place where the value is a temporary (the same operations, so the
    # same bits, in fewer fresh arrays).
    if x.ndim == 0:     # NumPy gives scalars for 0-d operands: no out=
        return _erf32(x.reshape(1)).reshape(())
    f = np.float32
    ax = np.abs(x)
    small = _polevl32(x * x, _ERF32_A)
    small *= x
    t = np.clip(ax, f(1.0), f(4.0))
    e = np.negative(t)
    e *= t
    e = np.exp(e)     # not in place: NumPy's in-place exp can differ in a NaN's payload
    np.divide(f(1.0), t, out=t)
    e *= _polevl32(t, _ERF32_B)
    np.subtract(f(1.0), e, out=e)
    np.minimum(e, f(1.0), out=e)
    np.copysign(e, x, out=e)
    return _where_impl(ax < f(1.0), small, e)


_ERF32_BLOCK = 32768   # elements: 128 KiB a temporary


def _erf_impl(x):
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        with np.errstate(all="ignore"):
            if x.size <= 2 * _ERF32_BLOCK:
                return _erf32(x)
            # In blocks that stay in cache across the ~30 passes (1.5x
            # faster on GELU's activations); elementwise, so the same bits.
            flat = x.reshape(-1)
            out = np.empty(flat.shape, np.float32)
            for i in range(0, flat.size, _ERF32_BLOCK):
                out[i:i + _ERF32_BLOCK] = _erf32(flat[i:i + _ERF32_BLOCK])
            return out.reshape(x.shape)
    a = np.asarray(x, np.float64)
    out = np.empty_like(a)
    ax = np.abs(a)
    inner = ax <= 1.0
    with np.errstate(all="ignore"):
        # each range computed on its own elements only
        v = a[inner]
        z = v * v
        out[inner] = v * _polevl(z, _ERF_T) / _polevl(z, _ERF_U, True)
        mid = ~inner & (ax < 6.0)           # beyond 6, erf is +-1 in float64
        t = ax[mid]
        p, q = _polevl(t, _ERFC_P), _polevl(t, _ERFC_Q, True)
        out[mid] = np.copysign(1.0 - np.exp(-t * t) * p / q, a[mid])
        rest = ~inner & ~mid
        out[rest] = np.where(np.isnan(a[rest]), a[rest], np.copysign(1.0, a[rest]))
    return out.astype(x.dtype) if isinstance(x, np.ndarray) else out[()]


neg_p = _unary("neg", np.negative, lambda g, x, out: (neg(g),), float_only=False, save=())
# ``detach()`` inside a trace: the value itself, through which autodiff does
# not differentiate (no VJP); canonicalization removes it once autodiff ran.
stop_gradient_p = _unary("stop_gradient", np.copy, None, float_only=False, save=())
def _f32_through_f64(f):
    """``f`` of a float32 NumPy array computed in float64 and rounded once:
    NumPy's float32 expm1 / log1p (its own SIMD polynomials) are an ulp off
    PyTorch's (SLEEF's u10 kernels, nearly always correctly rounded) for
    12% / 8% of the values; rounded from float64 they differ for about
    0.1% / 0.4%.  Not ``exp`` (40% there): rounded from float64 it was 3x
    slower and an ulp away from the compiled kernels' exp, which Adam turns
    into parameter differences (MLP-Mixer's and PointNet's compiled-against-
    eager checks failed).  Other arrays (float64, half types, complex,
    CuPy) take ``f`` itself."""
    def impl(x):
        if x.dtype == np.float32 and isinstance(x, (np.ndarray, np.generic)):
            # (the float64 loop through NumPy's buffered casts: no float64 copy)
            return f(x, out=np.empty(np.shape(x), np.float32), dtype=np.float64,
                     casting="same_kind")
        return f(x)
    impl.__name__ = f.__name__
    return impl


exp_p = _unary("exp", np.exp, lambda g, x, out: (mul(g, conj(out)),), save=(),
               save_out=True)
log_p = _unary("log", np.log, lambda g, x, out: (div(g, conj(x)),))
# exp(x) - 1 and log(1 + x) without the cancellation near 0 (elu's, selu's
# and softplus' -0.0 and small values as PyTorch's).  expm1's gradient is
# exp(x), as PyTorch's elu_backward computes it (PyTorch's expm1 uses
# result + 1, which rounds to 0 below x = -17 in float32).
expm1_p = _unary("expm1", _f32_through_f64(np.expm1), lambda g, x, out: (mul(g, conj(exp(x))),))
log1p_p = _unary("log1p", _f32_through_f64(np.log1p),
                 lambda g, x, out: (div(g, conj(add(x, 1.0))),))
sqrt_p = _unary("sqrt", np.sqrt, lambda g, x, out: (div(g, conj(mul(out, 2.0))),), save=(),
                 save_out=True)
def _rsqrt_vjp(g, x, out):
    """``g * (y**3 * -0.5)``; a bfloat16 ``y**3`` is PyTorch's bfloat16 pow
    by 3, ``y * (y * y)`` with each product rounded."""
    y3 = mul(out, mul(out, out)) if out.dtype is dt.bfloat16 else pow_(out, 3.0)
    return (mul(g, conj(mul(y3, -0.5))),)


rsqrt_p = _unary("rsqrt", lambda x: 1 / np.sqrt(x), _rsqrt_vjp, save=(), save_out=True)
sin_p = _unary("sin", np.sin, lambda g, x, out: (mul(g, conj(cos(x))),))
cos_p = _unary("cos", np.cos, lambda g, x, out: (neg(mul(g, conj(sin(x)))),))
def _tanh_vjp(g, x, out):
    """``g * (1 - y * y)`` as PyTorch's tanh_backward makes it: its CPU
    kernels are built with FMA contraction, so ``1 - y * y`` is rounded
    once (float32 through float64, where ``y * y`` is exact), and a half
    type's product is computed in float32 and rounded once.  (float64 keeps
    two roundings: without a wider type the fused value is not at hand.)"""
    d = out.dtype
    if d not in (dt.float32, dt.bfloat16, dt.float16):
        return (mul(g, conj(sub(1.0, mul(out, out)))),)
    y = cast(out, dt.float64)
    t = cast(sub(1.0, mul(y, y)), dt.float32)
    return (mul(g, t),) if d is dt.float32 else (cast(mul(cast(g, dt.float32), t), d),)


def _tanh_impl(x):
    # NumPy's float32 tanh (its own SIMD polynomial) is an ulp off PyTorch's
    # (SLEEF's tanhf_u10, correctly rounded but rarely) for about a third of
    # the values; float64's, rounded, agrees with PyTorch's but in a few in
    # ten thousand.
    if x.dtype == np.float32:
        # (the float64 loop through NumPy's buffered casts: no float64 copy)
        return np.tanh(x, out=np.empty_like(x, np.float32), dtype=np.float64,
                       casting="same_kind")
    return np.tanh(x)


tanh_p = _unary("tanh", _tanh_impl, _tanh_vjp, save=(), save_out=True)
def _logistic_vjp(g, x, out):
    """``(g * (1 - y)) * y`` in PyTorch's sigmoid_backward order; float16
    as half ops (each product rounded: its generic kernel), bfloat16 in
    float32 rounded once (its vectorized one)."""
    if out.dtype is dt.bfloat16:
        y = cast(out, dt.float32)
        return (cast(mul(mul(cast(g, dt.float32), sub(1.0, y)), y), dt.bfloat16),)
    return (mul(mul(g, conj(sub(1.0, out))), conj(out)),)


logistic_p = _unary("logistic", _sigmoid, _logistic_vjp, save=(), save_out=True)
abs_p = Primitive("abs", kind="elementwise", impl=_quiet_impl(np.abs), shape_rule=_unary_shape,
                  dtype_rule=lambda d, **_: dt.real_of(d), vjp=_abs_vjp, save=(0,))
def _sign_impl(x):
    # PyTorch's sign: 0 at NaN (NumPy's is NaN) and +0.0 at -0.0.
    s = np.sign(x)
    if s.dtype.kind == "f":
        s = np.where(np.isnan(s), 0, s + 0).astype(s.dtype)
    return s


sign_p = _unary("sign", _sign_impl, lambda g, x, out: (mul(g, 0.0),), float_only=False, save=())
erf_p = _unary("erf", _erf_impl,
               lambda g, x, out: (mul(g, mul(exp(neg(mul(x, x))), 2.0 / math.sqrt(math.pi))),))
logical_not_p = Primitive("logical_not", kind="elementwise", impl=np.logical_not,
                          shape_rule=_unary_shape, dtype_rule=lambda d, **_: dt.bool_, vjp=None)


def neg(x): return neg_p.bind(x)
def stop_gradient(x): return stop_gradient_p.bind(x)
def exp(x): return exp_p.bind(x)
def log(x): return log_p.bind(x)
def expm1(x): return expm1_p.bind(x)
def log1p(x): return log1p_p.bind(x)
def sqrt(x): return sqrt_p.bind(x)
def rsqrt(x): return rsqrt_p.bind(x)
def sin(x): return sin_p.bind(x)
def cos(x): return cos_p.bind(x)
def tanh(x): return tanh_p.bind(x)
def logistic(x): return logistic_p.bind(x)
def abs_(x): return abs_p.bind(x)
def sign(x): return sign_p.bind(x)
def erf(x): return erf_p.bind(x)
def logical_not(x): return logical_not_p.bind(x)


# --- binary ------------------------------------------------------------------

def _binary_shape(a, b, **_):
    return broadcast_shapes(a, b)


def _laid_out(f):
    """A binary ``f`` (no floating point state to quiet: comparisons,
    logical / bitwise ops) whose result is laid out as
    ``_quiet_binary_impl``'s."""
    nd = np.ndarray

    def impl(x, y, **_):
        out = f(x, y)
        if (type(x) is not nd or x.flags.c_contiguous) and \
                (type(y) is not nd or y.flags.c_contiguous):
            return out
        return relayout(out, (x, y))
    impl.__name__ = getattr(f, "__name__", "impl")
    return impl


def _binary(name, f, vjp, *, save=(0, 1), save_out=False, dtype_rule=None):
    return Primitive(name, kind="elementwise", impl=_quiet_binary_impl(f), shape_rule=_binary_shape,
                     dtype_rule=dtype_rule or _same_dtype(name), vjp=vjp,
                     save=save, save_out=save_out)


def _shape(v):
    return tuple(v.shape) if hasattr(v, "shape") else ()


def _is_value(v):
    """False for a Python scalar operand (VJPs receive those as themselves);
    True for values and for the avals of unsaved value operands."""
    return not isinstance(v, (numbers.Number, np.number, np.bool_))


def _readable(v):
    """False for the aval of an operand the tape did not save: a cotangent
    reading it was not wanted (see ``core``)."""
    return not isinstance(v, Aval)


def _red(g, v):
    """``g`` summed to the shape of operand ``v``; None for a Python scalar
    operand (it has no gradient, and reducing for it would be wasted work)."""
    return sum_to(g, _shape(v)) if _is_value(v) else None


def _add_vjp(g, x, y, out):
    return _red(g, x), _red(g, y)


def _sub_vjp(g, x, y, out):
    return _red(g, x), (_red(neg(g), y) if _is_value(y) else None)


def _mul_vjp(g, x, y, out):
    return (_red(mul(g, conj(y)), x) if _is_value(x) and _readable(y) else None,
            _red(mul(g, conj(x)), y) if _is_value(y) and _readable(x) else None)


def _div_vjp(g, x, y, out):
    # (the divisor's as PyTorch's div_tensor_other_backward: -g * ((x / y) / y))
    return (_red(div(g, conj(y)), x) if _is_value(x) else None,
            _red(mul(neg(g), conj(div(div(x, y), y))), y) if _is_value(y) and _readable(x)
            else None)


def _pow_vjp(g, x, y, out, exact=False):
    gx = gy = None
    if _is_value(x):
        # PyTorch's pow_backward: 0 where the exponent is 0 (0 * 0**-1 is NaN)
        if _is_value(y):
            d = where(eq(y, 0.0), 0.0, mul(y, pow_(x, sub(y, 1.0))))
        elif y == 0:     # (zeros, whatever the cotangent: an infinite one too)
            return creation.zeros(_shape(x), x.dtype, like=g), None
        else:            # grad * (e * x ** (e - 1)), x ** (e - 1) as pow computes it
            d = mul(y, pow_(x, y - 1.0, exact=exact))
        gx = sum_to(mul(g, conj(d)), _shape(x))
    if _is_value(y):
        # d/dy x**y = x**y log x; PyTorch defines it as 0 where x == 0 and y >= 0.
        if _is_value(x):
            gy = mul(g, conj(where(eq(x, 0.0), 0.0, mul(out, log(x)))))
        else:
            logx = math.log(x) if x > 0 else (0.0 if x == 0 else math.nan)
            gy = mul(g, mul(out, logx))
        gy = sum_to(gy, _shape(y))
    return gx, gy


def _fmod_vjp(g, x, y, out):
    # PyTorch's: 1 for the dividend; -trunc(x / y) for the divisor (C's
    # trunc of the rounded quotient: fmod(q, 1) is q's exact fraction; an
    # infinite q stays itself)
    gx = _red(g, x) if _is_value(x) else None
    gy = None
    if _is_value(y) and _readable(x):
        q = div(x, y)
        t = where(eq(abs_(q), math.inf), q, sub(q, fmod(q, 1.0)))
        gy = _red(neg(mul(g, t)), y)
    return gx, gy


def _max_vjp(g, x, y, out):
    # Ties split the gradient evenly, as PyTorch's maximum does.
    half = mul(g, 0.5)
    gx = _red(where(gt(x, y), g, where(eq(x, y), half, 0.0)), x) if _is_value(x) else None
    gy = _red(where(lt(x, y), g, where(eq(x, y), half, 0.0)), y) if _is_value(y) else None
    return gx, gy


def _min_vjp(g, x, y, out):
    half = mul(g, 0.5)
    gx = _red(where(lt(x, y), g, where(eq(x, y), half, 0.0)), x) if _is_value(x) else None
    gy = _red(where(gt(x, y), g, where(eq(x, y), half, 0.0)), y) if _is_value(y) else None
    return gx, gy


#: pow_tensor_scalar's CPU specializations of a float32 / float64 tensor to
#: a Python-scalar exponent where ``np.power`` rounds differently (by an
#: ulp: enough to move a ``floor``): PyTorch's ``x * x * x`` and
#: ``1 / sqrt(x)``; ``np.power`` already computes 2, 0.5, 1, -1 as PyTorch
#: does.  The compiled code computes them alike (``pow_by_constant``).
_EXACT_POW = {3: lambda x: x * x * x, -0.5: lambda x: 1 / np.sqrt(x),
              2: lambda x: x * x, 0.5: np.sqrt}    # (the same as np.power, faster)
_FLOAT32_64 = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def _pow_saves_out(a) -> bool:
    """``pow`` keeps its result only for a tensor exponent: PyTorch's
    PowBackward1 / PowBackward2 save it, PowBackward0 (a Python-scalar
    exponent) saves ``self`` alone."""
    return _is_value(a[1])


def _int_pow(x, y):
    """``np.power``, with an integer power to a negative exponent as PyTorch
    computes it elementwise (1 for a base of 1, -1 or 1 for -1 by the
    exponent's parity, else 0, as 0 ** -1 is too) where numpy raises.  A
    negative Python-scalar exponent is refused before (``functions.pow``)."""
    x, y = np.asarray(x), np.asarray(y)
    if not np.issubdtype(np.result_type(x, y), np.integer) or not np.any(y < 0):
        return np.power(x, y)
    neg = y < 0
    out = np.power(x, np.where(neg, 0, y))
    odd = (y % 2) != 0
    trunc = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0))
    return np.where(neg, trunc, out).astype(out.dtype)


add_p = _binary("add", np.add, _add_vjp, save=())
sub_p = _binary("sub", np.subtract, _sub_vjp, save=())
def save_partners(a, needs=None):
    """``save`` of a binary primitive (mul, matmul) whose cotangent of each
    operand reads the other one: an operand is kept only if its partner's
    cotangent is wanted (not for a scalar partner, nor one not needing grad),
    so no more is kept, nor guarded by the version counter, than PyTorch
    keeps.  Without ``needs``, every value operand's cotangent is wanted."""
    if needs is None:
        needs = (_is_value(a[0]), _is_value(a[1]))
    return tuple(i for i in (0, 1) if needs[1 - i])


def _save_div(a, needs=None):
    # Both cotangents read the divisor; only the divisor's reads the dividend.
    divisor_wanted = _is_value(a[1]) if needs is None else needs[1]
    return (0, 1) if divisor_wanted else (1,)


def _div(x, y):
    """``np.true_divide``; for integers the quotient truncated toward zero
    in integer arithmetic (as the compiled ``sdiv``), exact beyond 2**53
    where a float64 quotient is not.  A zero divisor is refused before
    (``math_extra._check_int_zero``)."""
    x, y = np.asarray(x), np.asarray(y)
    if not (np.issubdtype(x.dtype, np.integer) and np.issubdtype(y.dtype, np.integer)):
        return np.true_divide(x, y)
    q = np.floor_divide(x, y)
    r = x - q * y
    return np.where((r != 0) & ((x < 0) != (y < 0)), q + 1, q).astype(q.dtype)


mul_p = _binary("mul", np.multiply, _mul_vjp, save=save_partners)
div_p = _binary("div", _div, _div_vjp, save=_save_div)
_quiet_pow = _quiet_binary_impl(_int_pow)


def _pow_impl(x, y, exact=False):
    if exact and x.dtype in _FLOAT32_64:
        special = _EXACT_POW.get(float(y))
        if special is not None:
            with np.errstate(all="ignore"):
                out = special(x)
            return out if x.flags.c_contiguous else relayout(out, (x, y))
    return _quiet_pow(x, y)


pow_p = Primitive("pow", kind="elementwise", impl=_pow_impl, shape_rule=_binary_shape,
                  dtype_rule=_same_dtype("pow"), vjp=_pow_vjp, save=(0, 1),
                  save_out=_pow_saves_out)
# (the IR's pow has no ``exact``: the lowering computes a float32 / float64
# pow by a constant exponent as ``_EXACT_POW`` does, ``pow_by_constant``)
pow_p.eager_params = frozenset({"exact"})
maximum_p = _binary("maximum", np.maximum, _max_vjp)
#: C's fmod for floats (exact: the remainder of the true quotient truncated,
#: as PyTorch's fmod, remainder and floor division compute it)
def _float_pair(name):
    same, real = _same_dtype(name), _float_only(name)

    def rule(a, b, **_):
        d = same(a, b)
        if d.category == 3:
            raise ShapeError(f"{name}: expected real floating point operands, got {d}")
        return real(d)
    return rule


fmod_p = _binary("fmod", np.fmod, _fmod_vjp, dtype_rule=_float_pair("fmod"))
minimum_p = _binary("minimum", np.minimum, _min_vjp)


def _cmp(name, f):
    same = _same_dtype(name)

    def rule(a, b, **_):
        same(a, b)
        return dt.bool_
    return Primitive(name, kind="elementwise", impl=_laid_out(f), shape_rule=_binary_shape,
                     dtype_rule=rule, vjp=None)


eq_p = _cmp("eq", np.equal)
ne_p = _cmp("ne", np.not_equal)
lt_p = _cmp("lt", np.less)
le_p = _cmp("le", np.less_equal)
gt_p = _cmp("gt", np.greater)
ge_p = _cmp("ge", np.greater_equal)
logical_and_p = _cmp("logical_and", np.logical_and)
logical_or_p = _cmp("logical_or", np.logical_or)


def _bitwise(name, f):
    """``name`` of two integer arrays of one dtype (two's complement, as C's
    operators): no gradient; bool operands take the logical primitives
    (``math_int``), floats are refused there in PyTorch's words."""
    same = _same_dtype(name)

    def rule(a, b, **_):
        d = same(a, b)
        if d.category != 1:
            raise ShapeError(f"{name}: expected integer operands, got {d}")
        return d
    return Primitive(name, kind="elementwise", impl=_laid_out(f), shape_rule=_binary_shape,
                     dtype_rule=rule, vjp=None)


bitwise_and_p = _bitwise("bitwise_and", np.bitwise_and)
bitwise_or_p = _bitwise("bitwise_or", np.bitwise_or)
bitwise_xor_p = _bitwise("bitwise_xor", np.bitwise_xor)


def add(x, y): return add_p.bind(x, y)
def sub(x, y): return sub_p.bind(x, y)
def mul(x, y): return mul_p.bind(x, y)
def div(x, y): return div_p.bind(x, y)
def pow_(x, y, exact=False):
    """``x ** y``; ``exact`` (a Python-scalar ``y``): computed as PyTorch's
    pow_tensor_scalar computes a float32 / float64 tensor to that exponent
    (``_EXACT_POW``), which the compiled code does too (``pow_by_constant``)."""
    return pow_p.bind(x, y, exact=True) if exact else pow_p.bind(x, y)
def maximum(x, y): return maximum_p.bind(x, y)
def fmod(x, y): return fmod_p.bind(x, y)
def minimum(x, y): return minimum_p.bind(x, y)
def eq(x, y): return eq_p.bind(x, y)
def ne(x, y): return ne_p.bind(x, y)
def lt(x, y): return lt_p.bind(x, y)
def le(x, y): return le_p.bind(x, y)
def gt(x, y): return gt_p.bind(x, y)
def ge(x, y): return ge_p.bind(x, y)
def logical_and(x, y): return logical_and_p.bind(x, y)
def logical_or(x, y): return logical_or_p.bind(x, y)
def bitwise_and(x, y): return bitwise_and_p.bind(x, y)
def bitwise_or(x, y): return bitwise_or_p.bind(x, y)
def bitwise_xor(x, y): return bitwise_xor_p.bind(x, y)


# --- where, cast ---------------------------------------------------------------

_where_same = _same_dtype("where")


def _where_dtype(c, a, b, **_):
    if c is not dt.bool_:
        raise ShapeError(f"where: condition must be bool, got {c}")
    return _where_same(a, b)


def _where_vjp(g, c, x, y, out):
    return (None, _red(where(c, g, 0.0), x) if _is_value(x) else None,
            _red(where(c, 0.0, g), y) if _is_value(y) else None)


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
#: Elements from which ``where`` selects bits instead of calling np.where.
WHERE_BIT_SELECT_MIN = 32768


def _where_impl(c, a, b):
    """``np.where``, computed branch-free on large arrays: NumPy's loop
    branches per element, and on a mask without long runs (ReLU's and its
    gradient's, dropout's) mispredicts about half the time: 23 ms for 2.4M
    float32 against 2.7 ms for the bit select here (measured).  The result
    is bit for bit ``np.where``'s (each element's bits are ``a``'s or
    ``b``'s)."""
    a, b = np.asarray(a), np.asarray(b)
    if np.ndim(c) == 0 and a.dtype == b.dtype:
        # One branch taken everywhere (``filled``'s where(True, v, self),
        # which fill_ / copy_ on a tensor that requires grad record, and
        # its VJP's two wheres): a copy of it, one pass in place of the bit
        # select's five (when in-place ReLU6 went through copy_,
        # MobileNetV2's where: 21 -> 10 ms a step, measured).
        src = a if c else b
        shape = np.broadcast_shapes(np.shape(c), a.shape, b.shape)
        if (src.ndim == 0 and src.dtype.kind in "fiub" and src.itemsize in _BITS
                and not src.view(_BITS[src.itemsize])):
            # (+)0 everywhere (the VJP's other branch): calloc's pages
            return np.zeros(shape, src.dtype)
        return np.array(np.broadcast_to(src, shape), order="C")
    if (a.dtype != b.dtype or a.dtype.kind not in "fiub" or a.dtype.itemsize not in _BITS
            or max(np.size(c), a.size, b.size) < WHERE_BIT_SELECT_MIN):
        return np.where(c, a, b)
    shape = np.broadcast_shapes(np.shape(c), a.shape, b.shape)
    u = _BITS[a.dtype.itemsize]
    c = np.broadcast_to(c, shape)
    if a.ndim == 0 and not a.view(u):
        # A (+)0 taken where c: b's bits under the mask c - 1 (True - 1 =
        # no bits); two passes (ReLU's value and its gradient).
        m = np.subtract(c, 1, dtype=u)
        return np.bitwise_and(np.broadcast_to(b, shape).view(u), m, out=m).view(a.dtype)
    # 0 - True = all ones: the mask of the elements taken from a
    m = np.subtract(0, c, dtype=u)
    if b.ndim == 0 and not b.view(u):
        return np.bitwise_and(np.broadcast_to(a, shape).view(u), m, out=m).view(a.dtype)
    out = np.bitwise_and(np.broadcast_to(a, shape).view(u), m)
    out |= np.bitwise_and(np.broadcast_to(b, shape).view(u), np.invert(m, out=m), out=m)
    return out.view(a.dtype)


where_p = Primitive("where", kind="elementwise", impl=_where_impl,
                    shape_rule=lambda c, a, b, **_: broadcast_shapes(c, a, b),
                    dtype_rule=_where_dtype, vjp=_where_vjp, save=(0,),
                    nondiff_argnums=(0,))


def where(c, x, y): return where_p.bind(c, x, y)


# --- check: a value test that runs wherever the program runs ----------------------

def _check_dtype(x, c, **_):
    if c is not dt.bool_:
        raise ShapeError(f"check: condition must be bool, got {c}")
    return x


#: a check message starting with this fails with IndexError (the rest the
#: message), as PyTorch's index checks do; others with RuntimeError
INDEX_ERROR = "IndexError: "
#: ... with this, with ValueError, as PyTorch's value checks written in
#: Python do (gaussian_nll_loss's "var has negative entry/entries")
VALUE_ERROR = "ValueError: "

#: (message prefix, the compiled backends' error kind, the exception eager
#: raises) of each check that does not fail with RuntimeError (kind "value")
CHECK_KINDS = ((INDEX_ERROR, "index", IndexError), (VALUE_ERROR, "value_error", ValueError))


def check_kind(message: str) -> tuple[str, str, type, str]:
    """``(prefix, kind, exception class, text)`` of a check's message."""
    for prefix, kind, exc in CHECK_KINDS:
        if message.startswith(prefix):
            return prefix, kind, exc, message[len(prefix):]
    return "", "value", RuntimeError, message


#: In a check's message: replaced by the first failing element's value (an
#: index check's index: "index {index} is out of bounds ...", as eager's)
INDEX_VALUE = "{index}"


def _check_impl(x, cond, *, message):
    if not np.all(cond):
        if INDEX_VALUE in message:
            shape = np.broadcast_shapes(np.shape(x), np.shape(cond))
            bad = np.broadcast_to(x, shape)[~np.broadcast_to(cond, shape)].flat[0]
            message = message.replace(INDEX_VALUE, str(bad))
        _, _, exc, text = check_kind(message)
        raise exc(text)
    shape = np.broadcast_shapes(np.shape(x), np.shape(cond))
    # A copy (never the operand itself: eager results own their memory).
    return np.array(np.broadcast_to(x, shape)) if np.shape(x) != shape else x.copy()


# ``check(x, cond, message)`` is ``x`` (broadcast with ``cond``), and fails
# with ``RuntimeError(message)`` where any element of ``cond`` is false.  It
# has a result so that the value it guards depends on it: passes keep it
# exactly as long as that value is used, fusion treats it as any elementwise
# op, and its gradient is the identity for ``x``.  Front ends record it
# while tracing in place of the Python checks eager mode makes on values, so
# a compiled call checks the values of *its* arguments.
check_p = Primitive("check", kind="elementwise", impl=_check_impl,
                    shape_rule=lambda x, c, **_: broadcast_shapes(x, c),
                    dtype_rule=_check_dtype,
                    vjp=lambda g, x, c, out, *, message: (_red(g, x), None), save=(),
                    nondiff_argnums=(1,))


def check(x, cond, message: str):
    return check_p.bind(x, cond, message=message)


def _cast_impl(x, *, dtype):
    # Always a C-contiguous copy: clone() and contiguous() are casts to the same dtype.
    with np.errstate(over="ignore", invalid="ignore"):   # PyTorch casts silently
        if dtype.category == 1 and dtype.itemsize < 4 and x.dtype.kind == "f":
            # PyTorch converts a float to a narrow integer through int64 and
            # keeps the low bits (300.7 -> uint8 44, -1.5 -> 255).
            x = x.astype(np.int64)
        if x.dtype.kind == "c" and dtype.category != 3:
            x = x.real   # PyTorch discards the imaginary part (NumPy would warn)
        if dtype is dt.float16 and x.dtype != np.float16:
            x = dt.to_float16(x)     # (through float32, as PyTorch's Half)
        out = x.astype(dtype.np, order="C")
    if dtype is dt.bfloat16:
        out = dt.round_bfloat16(out)
    return out


def _cast_vjp(g, x, out, *, dtype):
    if not (x.dtype.is_floating_point or x.dtype.category == 3):
        return (None,)
    return (cast(g, dtype=x.dtype),)


cast_p = Primitive("cast", kind="elementwise", impl=_cast_impl,
                   shape_rule=lambda s, **_: s,
                   dtype_rule=lambda d, *, dtype: dtype, vjp=_cast_vjp, save=())


def cast(x, dtype): return cast_p.bind(x, dtype=dtype)
