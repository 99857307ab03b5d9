"""More of PyTorch's elementwise math: rounding, logs and exponentials,
``logaddexp fmod remainder floor_divide copysign xlogy lerp addcmul ...``,
signs, predicates and float representation (``isclose isin frexp ...``),
and the helpers the other math modules (``math_trig``, ``math_special``,
``math_int``) build on.

Invariant: every function is a composite of primitives (so autograd and
``tracec.compile`` need nothing new), except ``nextafter``, which reads its
operands' bits (``concrete``: eager only, a clear ``TraceError`` inside
``tracec.compile``).  Branches are ``where``s
whose unselected side is always fed a safe operand, so no NaN or inf leaks
into a gradient through the side not taken.  Results follow PyTorch's dtype
rules: integer inputs of float functions become the default float dtype.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from tracec import dtypes as dt
from tracec import functions as F
from tracec import graph, ops
from tracec.functions import _float_unary, _named, _operand, promote
from tracec.graph import keep_saved
from tracec.tensor import RECORDERS, Tensor, concrete
from tracec.return_types import structseq

__all__ = [
    "floor", "ceil", "round", "trunc", "fix", "frac", "log2", "log10", "exp2", "logaddexp",
    "logaddexp2", "fmax", "fmin", "fmod", "remainder", "floor_divide", "div", "copysign",
    "heaviside", "xlogy", "logit", "nan_to_num", "float_power", "lerp", "addcmul", "addcdiv",
    "signbit", "sgn", "positive", "isclose", "isin", "isreal", "ldexp", "frexp", "nextafter",
    "log1p", "expm1", "rsub", "angle", "conj", "conj_physical", "resolve_conj", "resolve_neg",
    "real", "imag", "is_conj", "is_neg",
]

# The float32/float64 ... value from which every float is an integer.
_INT_FROM = {"float32": 2.0 ** 23, "float64": 2.0 ** 52, "float16": 2.0 ** 10,
             "bfloat16": 2.0 ** 7}


def _t(x, name):
    x = _operand(x, name)
    return x if isinstance(x, Tensor) else Tensor._from_data(x)


def _float(x, name):
    return _float_unary(name, lambda t: t)(x)


def _safe(cond, x, fill):
    """``x`` where ``cond``, else the harmless ``fill`` (for a branch whose
    other side is taken there: keeps its gradient finite)."""
    return ops.where(cond, x, fill)


def _singular_grad(mask, x, kind: str = "nan"):
    """A zero whose gradient with respect to ``x`` is, where ``mask`` holds,
    what PyTorch's derivative formula gives at a singular point there: NaN
    (a ``0 / 0``; kind "nan"), or the incoming gradient times +inf / -inf
    (kind "inf" / "-inf"; NaN for a zero incoming gradient), and 0 elsewhere.
    Added to a composite whose own gradient is masked finite there.  Only
    where ``x`` is finite (``x - x`` would be NaN)."""
    mask = ops.logical_and(mask, ops.lt(ops.abs_(x), float("inf")))
    d = ops.where(mask, ops.sub(x, ops.stop_gradient(x)), 1.0)   # 0 under mask, with x's gradient
    if kind == "nan":
        r = ops.sqrt(ops.mul(d, d))              # d/dd = d / |d| = 0 / 0
    else:
        r = ops.sqrt(d)                          # d/dd = 1 / (2 * 0)
        r = ops.neg(r) if kind == "-inf" else r
    return ops.where(mask, r, 0.0)


def _no_grad_link(value, x):
    """``value`` (computed from ``x.detach()``) with a zero gradient to ``x``,
    as PyTorch's rounding functions have (the output requires grad)."""
    if not x.requires_grad:
        return value
    return ops.where(ops.full(tuple(x.shape), False, dt.bool_, like=x), x, value)


_HALF = (dt.float16, dt.bfloat16)


def half_in_float32(fn, numbers=(), opmath=()):
    """``fn`` computed in float32 when its result would be float16 or
    bfloat16 (cast back at the end), as PyTorch computes half-precision
    math: one rounding instead of one per step of a composite.  Its operands
    are first what PyTorch's TensorIterator makes of them: a 0-d tensor of
    another dtype is cast to the half dtype (rounded; not at the positions
    in ``opmath``, which the kernel reads in float32), as is a Python number
    at the positions in ``numbers`` (fmod's, remainder's)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not any(t.dtype in _HALF for t in tensors):
            return fn(*args, **kwargs)
        d = F.result_type(*[a for a in args if isinstance(a, (Tensor, int, float, bool))])
        if d not in _HALF:
            return fn(*args, **kwargs)
        args = [_half_operand(a, d, i in numbers) if i not in opmath else a
                for i, a in enumerate(args)]
        out = fn(*[ops.cast(a, dt.float32) if isinstance(a, Tensor) and a.dtype in _HALF
                   else a for a in args], **kwargs)
        if isinstance(out, Tensor) and out.dtype is dt.float32:
            # the composite's node name (LerpBackward0), not the cast's
            return _named(ops.cast(out, d), out._node.name()) if out._node is not None \
                else ops.cast(out, d)
        return out
    return wrapper


def _half_operand(a, d, number: bool):
    """``a`` as an operand beside a ``d`` (half) tensor: a 0-d tensor of a
    floating or integer dtype cast to ``d``; a Python number (``number``)
    rounded to ``d`` (through float32, as PyTorch's Half / BFloat16)."""
    if isinstance(a, Tensor):
        if a.ndim == 0 and a.dtype not in _HALF and a.dtype.category in (1, 2):
            return ops.cast(a, d)
        return a
    if number and type(a) in (int, float):
        return float(dt.to_float16(np.float32(a))) if d is dt.float16 else \
            float(dt.round_bfloat16(np.asarray(a, np.float32)))
    return a


def _const(like, value):
    """``value`` filled in ``like``'s shape and dtype (for a ``where`` between
    two constants)."""
    return ops.full(tuple(like.shape), value, like.dtype, like=like)


def _polyval(z, coeffs):
    acc = coeffs[0]
    for c in coeffs[1:]:
        acc = ops.add(ops.mul(acc, z), c)
    return acc


def _signbit(x):
    # -0.0 has its sign bit set: 1 / -0.0 == -inf.
    zero = ops.eq(x, 0.0)
    inv = ops.div(1.0, _safe(zero, x, 1.0))
    return ops.logical_or(ops.lt(x, 0.0), ops.logical_and(zero, ops.lt(inv, 0.0)))


def _binary_float(name, a, b):
    (a, b), d = promote(name, a, b, min_dtype=dt.get_default_dtype())
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{name}(): at least one operand must be a Tensor")
    if not isinstance(a, Tensor):
        a = ops.full(tuple(b.shape), a, d, like=b)
    if not isinstance(b, Tensor):
        b = ops.full(tuple(a.shape), b, d, like=a)
    return a, b


_LN2 = math.log(2.0)


# --- rounding --------------------------------------------------------------------

def _rounder(name, body):
    def fn(input):
        input = _t(input, name)
        if not input.dtype.is_floating_point:
            if input.dtype is dt.bool_:
                raise NotImplementedError(f'"{name}_vml_cpu" not implemented for \'Bool\'')
            return ops.cast(input, input.dtype)
        return _named(_no_grad_link(body(input.detach()), input), name.capitalize() + "Backward0")
    fn.__name__ = name
    return fn


def _trunc(x):
    small = ops.lt(ops.abs_(x), _INT_FROM[x.dtype.name])     # false for nan and inf
    r = ops.cast(ops.cast(_safe(small, x, 0.0), dt.int64), x.dtype)
    r = ops.where(ops.eq(r, 0.0), ops.mul(x, 0.0), r)        # -0.5 -> -0.0, as C's trunc
    return ops.where(small, r, x)


def _floor(x):
    t = _trunc(x)
    return ops.where(ops.gt(t, x), ops.sub(t, 1.0), t)


def _ceil(x):
    t = _trunc(x)
    return ops.where(ops.lt(t, x), ops.add(t, 1.0), t)


def _rint(x):
    # Half to even (C's nearbyint): compare the exact fractional part with 1/2.
    f = _floor(x)
    d = ops.sub(x, f)
    half_f = ops.mul(f, 0.5)
    odd = ops.ne(_floor(half_f), half_f)
    up = ops.logical_or(ops.gt(d, 0.5), ops.logical_and(ops.eq(d, 0.5), odd))
    r = ops.where(up, ops.add(f, 1.0), f)
    return ops.where(ops.eq(r, 0.0), ops.mul(x, 0.0), r)


trunc = _rounder("trunc", _trunc)
floor = _rounder("floor", _floor)
ceil = _rounder("ceil", _ceil)
fix = trunc
_round0 = _rounder("round", _rint)


def round(input, *, decimals: int = 0):  # noqa: A001 - PyTorch's name
    if decimals == 0:
        return _round0(input)
    input = _t(input, "round")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"round_cpu" not implemented for '
                                  f"'{dt.scalar_type_name(input.dtype)}'")
    xd = input.detach()
    half = input.dtype in _HALF
    if half:        # (PyTorch's kernel: in float32, rounded to the dtype once)
        xd = ops.cast(xd, dt.float32)
    if decimals > 0:
        p = 10.0 ** decimals
        y = ops.div(_rint(ops.mul(xd, p)), p)
    else:
        p = 10.0 ** -decimals
        y = ops.mul(_rint(ops.div(xd, p)), p)
    if half:
        y = ops.cast(y, input.dtype)
    return _named(_no_grad_link(y, input), "RoundBackward1")


def frac(input):
    input = _t(input, "frac")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"frac_cpu\" not implemented for "
                                  f"'{dt.scalar_type_name(input.dtype)}'")
    return _named(ops.sub(input, _trunc(input.detach())), "FracBackward0")


# --- logs, exps -------------------------------------------------------------------

def _log1p(x):
    """log(1 + x) exact near 0: the primitive for real ``x``; for complex
    ``x``, Kahan's ``log(u) * x / (u - 1)`` with ``u = 1 + x`` (the rounding
    of ``u`` cancels; ``u == 1`` means log1p(x) == x)."""
    if not x.dtype.is_complex:
        return ops.log1p(x)
    u = ops.add(x, 1.0)
    um1 = ops.sub(u, 1.0)
    one = ops.eq(um1, 0.0)
    finite = ops.lt(u, float("inf"))
    ok = ops.logical_and(ops.logical_not(one), finite)
    r = ops.div(ops.mul(ops.log(_safe(ok, u, 2.0)), _safe(ok, x, 1.0)), _safe(ok, um1, 1.0))
    return ops.where(one, x, ops.where(finite, r, ops.log(_safe(ok, 2.0, u))))


def _expm1(x):
    """exp(x) - 1 exact near 0: the primitive for real ``x``; for complex
    ``x``, Kahan's ``(u - 1) * x / log(u)`` with ``u = exp(x)``."""
    if not x.dtype.is_complex:
        return ops.expm1(x)
    u = ops.exp(x)
    um1 = ops.sub(u, 1.0)
    one = ops.eq(u, 1.0)
    ok = ops.logical_and(ops.logical_not(one),
                         ops.logical_and(ops.lt(u, float("inf")), ops.gt(um1, -1.0)))
    r = ops.div(ops.mul(_safe(ok, um1, 1.0), _safe(ok, x, 1.0)), ops.log(_safe(ok, u, 2.0)))
    return ops.where(one, x, ops.where(ok, r, um1))


log1p = _float_unary("log1p", lambda x: _named(_log1p(x), "Log1PBackward0"))
expm1 = _float_unary("expm1", lambda x: _named(_expm1(x), "Expm1Backward0"))
log2 = _float_unary("log2", lambda x: _named(ops.mul(ops.log(x), 1 / math.log(2)),
                                             "Log2Backward0"))
log10 = _float_unary("log10", lambda x: _named(ops.mul(ops.log(x), 1 / math.log(10)),
                                               "Log10Backward0"))
exp2 = _float_unary("exp2", lambda x: _named(ops.pow_(2.0, x), "Exp2Backward0"))


# --- binary float functions ---------------------------------------------------------

def _logaddexp(a, b, log_base):
    m = ops.maximum(a, b)
    inf_same = ops.logical_and(ops.eq(a, b), ops.eq(ops.abs_(a), float("inf")))
    d = ops.neg(ops.abs_(ops.sub(ops.where(inf_same, 0.0, a), ops.where(inf_same, 0.0, b))))
    if log_base == 2:
        r = ops.add(m, ops.mul(_log1p(ops.exp(ops.mul(d, _LN2))), 1 / _LN2))
    else:
        r = ops.add(m, _log1p(ops.exp(d)))
    return ops.where(inf_same, a, r)


def logaddexp(input, other):  # noqa: A002
    a, b = _binary_float("logaddexp", input, other)
    return _named(_logaddexp(a, b, math.e), "LogaddexpBackward0")


def logaddexp2(input, other):  # noqa: A002
    a, b = _binary_float("logaddexp2", input, other)
    return _named(_logaddexp(a, b, 2), "Logaddexp2Backward0")


def _fminmax(name, prim, keep_first):
    def fn(input, other):  # noqa: A002
        (a, b), d = promote(name, input, other)
        if not d.is_floating_point:
            return prim(a, b)
        # NaN loses: the other operand wins where one is NaN.  A tie goes to
        # ``input``, with all of the gradient (PyTorch's fmax/fmin backward;
        # maximum/minimum split it).
        return ops.where(ops.logical_or(keep_first(a, b), ops.ne(b, b)), a, b)
    fn.__name__ = name
    return fn


fmax = _fminmax("fmax", ops.maximum, ops.ge)
fmin = _fminmax("fmin", ops.minimum, ops.le)


def _check_int_zero(b):
    """The divisor ``b`` of an integer division, checked to hold no zero:
    at once in eager mode, by a recorded ``check`` while tracing (so every
    compiled call checks its own divisor)."""
    if isinstance(b, Tensor):
        if b.dtype.is_floating_point:
            return b
        if RECORDERS:
            return ops.check(b, ops.ne(b, 0), "ZeroDivisionError")
        if np.any(b._data == 0):
            raise RuntimeError("ZeroDivisionError")
    elif b == 0:
        raise RuntimeError("ZeroDivisionError")
    return b


def _fmod(a, b, d):
    if d.is_floating_point:
        return ops.fmod(a, b)       # C's fmod: exact, as PyTorch's

    b = _check_int_zero(b)
    return ops.sub(a, ops.mul(ops.div(a, b), b))   # int div truncates


def _tensors(name, input, other):
    """Both operands promoted, as tensors (scalars filled to the other's shape)."""
    (a, b), d = promote(name, input, other)
    if d.category == 1:     # a Python int wraps into the dtype (uint8 % -3 is % 253)
        a, b = (dt.wrap_int(int(v), d) if isinstance(v, (int, np.integer)) and
                not isinstance(v, bool) else v for v in (a, b))
    if not isinstance(a, Tensor):
        a = ops.full(tuple(b.shape), a, d, like=b)
    if not isinstance(b, Tensor):
        b = ops.full(tuple(a.shape), b, d, like=a)
    return a, b, d


def fmod(input, other):  # noqa: A002
    a, b, d = _tensors("fmod", input, other)
    if d is dt.bool_:
        raise NotImplementedError("\"fmod_cpu\" not implemented for 'Bool'")
    return _named(_keep_unless_divisor_grad(_fmod(a, b, d), input, other), "FmodBackward0")


def remainder(input, other):  # noqa: A002
    a, b, d = _tensors("remainder", input, other)
    m = _fmod(a, b, d)
    fix_ = ops.logical_and(ops.ne(m, 0), ops.ne(ops.lt(b, 0), ops.lt(m, 0)))
    out = ops.where(fix_, ops.add(m, b), m)
    return _named(_keep_unless_divisor_grad(out, input, other), "RemainderBackward0")


def _keep_unless_divisor_grad(out, input, other):
    """PyTorch's Fmod / RemainderBackward0 save ``self`` and ``other`` only
    for ``other``'s gradient: without it a second backward works (the
    divisor filled in here is kept past a backward)."""
    if not (isinstance(other, Tensor) and other.requires_grad):
        keep_saved(out, (input,))
    return out


def floor_divide(input, other):  # noqa: A002
    input = F._wrapped_number(input, other)
    a0, b0, d = _tensors("floor_divide", input, other)
    a, b = a0, b0
    if d is dt.bool_:
        raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'")
    if d.category == 3:
        raise NotImplementedError(f"\"div_floor_cpu\" not implemented for "
                                  f"'{dt.scalar_type_name(d)}'")
    if not d.is_floating_point:
        b = _check_int_zero(b)
        q = ops.div(a, b)
        r = ops.sub(a, ops.mul(q, b))
        return ops.where(ops.logical_and(ops.ne(r, 0), ops.ne(ops.lt(r, 0), ops.lt(b, 0))),
                         ops.sub(q, 1), q)
    # PyTorch's div_floor for floats: from fmod, so that (a - mod) / b is exact.
    a, b = a.detach(), b.detach()
    mod = _fmod(a, b, d)
    q = ops.div(ops.sub(a, mod), b)
    q = ops.where(ops.logical_and(ops.ne(mod, 0.0), ops.ne(ops.lt(b, 0.0), ops.lt(mod, 0.0))),
                  ops.sub(q, 1.0), q)
    fq = _floor(q)
    fq = ops.where(ops.gt(ops.sub(q, fq), 0.5), ops.add(fq, 1.0), fq)
    zero_b = ops.eq(b, 0.0)
    true_q = ops.div(a, b)
    # a zero quotient takes a / b's sign (C's copysign(0, a / b)): 1 / (a / b)
    # is negative exactly where a / b is negative or -0.0
    fq = ops.where(ops.eq(fq, 0.0), ops.where(ops.lt(ops.div(1.0, true_q), 0.0), -0.0,
                                              _const(fq, 0.0)), fq)
    return _no_grad_link(_no_grad_link(ops.where(zero_b, true_q, fq), a0), b0)


def div(input, other, *, rounding_mode=None):  # noqa: A002
    """``torch.div`` with ``rounding_mode`` None, ``"trunc"`` or ``"floor"``."""
    if rounding_mode is None:
        return F.div(input, other)
    input = F._wrapped_number(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode != "trunc":
        raise ValueError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{rounding_mode}'")
    (a, b), d = promote("div", input, other)
    if d.category == 3:
        raise NotImplementedError(f"\"div_trunc_cpu\" not implemented for "
                                  f"'{dt.scalar_type_name(d)}'")
    if not d.is_floating_point:
        b = _check_int_zero(b)
        return ops.div(a, b)
    return trunc(ops.div(a, b))


def copysign(input, other):  # noqa: A002
    a, b = _binary_float("copysign", input, other)
    neg = _signbit(b)
    aa = ops.abs_(a)
    y = ops.where(neg, ops.neg(aa), aa)
    if isinstance(b, Tensor) and b.requires_grad:     # (PyTorch's gradient for other: zeros)
        y = _no_grad_link(y, b)
    return _named(y, "CopysignBackward0")


def heaviside(input, values):  # noqa: A002
    (a, v), d = promote("heaviside", input, values)
    if isinstance(input, Tensor) and isinstance(values, Tensor) and input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return ops.where(ops.eq(a, 0), v, ops.cast(ops.gt(a, 0), d))


def _with_singular_grads(out, *masked):
    """``out`` whose gradient, where a ``(mask, x, kind)`` of ``masked``
    holds, is ``_singular_grad``'s instead of the composite's own (PyTorch's
    formula at a pole: ``hypot(0, 0)``, ``lgamma(0)``, ``erfinv(1)``).  The
    composite must keep its own gradient finite there (its operands made
    safe with ``_safe``), since it still receives a zero cotangent."""
    any_mask = masked[0][0]
    for m, _, _ in masked[1:]:
        any_mask = ops.logical_or(any_mask, m)
    held = ops.stop_gradient(out)
    for m, x, kind in masked:
        held = ops.add(held, _singular_grad(m, x, kind))
    return ops.where(any_mask, held, out)       # (a -0.0 elsewhere stays -0.0)


def _xlog_grads(x, y, lo, log_fn):
    """PyTorch's xlogy / xlog1py gradients where ``x == 0`` (``y`` not NaN),
    as zeros to add to ``x * log_fn(1 or 0)``: ``log_fn(y)`` to ``x`` (0
    where ``y <= lo``, infinite for an infinite ``y``), and ``x / (y - lo)``'s ``0 / 0`` (NaN)
    to ``y`` where ``y == lo``."""
    zero = ops.eq(x, 0.0)
    ok = ops.logical_and(zero, ops.logical_and(ops.gt(y, lo), ops.lt(y, float("inf"))))
    gx = ops.mul(_safe(ok, x, 0.0),
                 ops.stop_gradient(ops.where(ok, log_fn(_safe(ok, y, lo + 1.0)), 0.0)))
    gx = ops.add(gx, _singular_grad(ops.logical_and(zero, ops.eq(y, float("inf"))), x, "inf"))
    return ops.add(gx, _singular_grad(ops.logical_and(zero, ops.eq(y, lo)), y))


def _nan_of(x, y):
    """``y`` where it is NaN (0 elsewhere), with NaN gradients to both
    there (PyTorch's formulas): ``y * (x + y)`` on the NaN elements."""
    nan = ops.ne(y, y)
    ys = _safe(nan, y, 0.0)
    return ops.mul(ys, ops.add(_safe(nan, x, 0.0), ys))


def xlogy(input, other):  # noqa: A002
    x, y = _binary_float("xlogy", input, other)
    zero = ops.eq(x, 0.0)
    r = ops.mul(x, ops.log(ops.where(zero, 1.0, y)))      # 0 where x == 0 (y not NaN)
    r = ops.add(r, _xlog_grads(x, y, 0.0, ops.log))
    return _named(ops.where(ops.ne(y, y), _nan_of(x, y), r), "XlogyBackward0")


def logit(input, eps=None):  # noqa: A002
    x = _float(input, "logit")
    if eps is not None:
        x = ops.where(ops.lt(x, eps), eps, ops.where(ops.gt(x, 1.0 - eps), 1.0 - eps, x))
    if eps is not None and eps != 0:
        return _named(ops.log(ops.div(x, ops.sub(1.0, x))), "LogitBackward0")
    edge = ops.logical_or(ops.eq(x, 0.0), ops.eq(x, 1.0))   # grad / (x (1 - x)): infinite
    xs = _safe(ops.logical_not(edge), x, 0.5)
    y = ops.where(edge, ops.where(ops.eq(x, 0.0), _const(x, -math.inf), math.inf),
                  ops.log(ops.div(xs, ops.sub(1.0, xs))))
    return _named(_with_singular_grads(y, (edge, x, "inf")), "LogitBackward0")


def float_power(input, exponent):  # noqa: A002
    def f64(v):
        return ops.cast(v, dt.float64) if isinstance(v, Tensor) and v.dtype is not dt.float64 \
            else (float(v) if not isinstance(v, Tensor) else v)
    return F.pow(f64(input), f64(exponent))


def _check_broadcast(*operands) -> None:
    """PyTorch's error for operands that do not broadcast together, which
    names the pair as its TensorIterator meets them (the shape so far
    against the next operand), not the pair a composite's first step
    combines."""
    shapes = [tuple(x.shape) for x in operands if isinstance(x, Tensor)]
    if any(s != shapes[0] for s in shapes[1:]):
        ops.core.broadcast_shapes(*shapes)


def _lerp_fused(a, b, w):
    """PyTorch's vectorized CPU lerp of float32 ``a``, ``b`` (``lerp_vec``):
    ``fma(w, b - a, a)`` where ``|w| < 0.5``, else ``fma(w - 1, b - a, b)``,
    the product and the sum rounded once (through float64, where the
    product of two float32 is exact); ``w`` a float32 tensor or a number."""
    diff = ops.cast(ops.sub(b, a), dt.float64)
    if isinstance(w, Tensor):
        small = ops.lt(ops.abs_(w), 0.5)
        coeff = ops.cast(ops.where(small, w, ops.sub(w, 1.0)), dt.float64)
        base = ops.where(small, a, b)
    else:
        w32 = np.float32(w)
        coeff = float(w32) if abs(w) < 0.5 else float(np.float32(w32 - np.float32(1)))
        base = a if abs(w) < 0.5 else b
    return ops.cast(ops.add(ops.cast(base, dt.float64), ops.mul(diff, coeff)), dt.float32)


def lerp(input, end, weight):  # noqa: A002
    # (half inputs arrive in float32: half_in_float32, below)
    _check_broadcast(input, end, weight)
    (a, b, w), d = promote("lerp", input, end, weight)
    if d is dt.float32:
        out = _lerp_fused(a, b, w)
    else:
        # PyTorch's two-sided form: exact at both ends.  (float64 keeps two
        # roundings: without a wider type the fused value is not at hand.)
        lo = ops.add(a, ops.mul(w, ops.sub(b, a)))
        hi = ops.sub(b, ops.mul(ops.sub(b, a),
                                ops.sub(1.0, w) if isinstance(w, Tensor) else 1.0 - w))
        out = ops.where(ops.lt(ops.abs_(w), 0.5), lo, hi) if isinstance(w, Tensor) else \
            (lo if abs(w) < 0.5 else hi)
    from tracec.tensor_meta import keep_iter_layout
    keep_iter_layout(out, input, end, weight)      # (one kernel's layout, as PyTorch's)
    if not isinstance(w, Tensor):       # (LerpBackward0 saves no tensors: a number weight)
        keep_saved(out, (input, end))
    return _named(out, "LerpBackward1" if isinstance(w, Tensor) else "LerpBackward0")


def _pointwise3(name, input, tensor1, tensor2, value, combine):  # noqa: A002
    """``input + combine(value * tensor1, tensor2)`` rounded as PyTorch's
    CPU kernel: ``self + value * t1 op t2`` left to right (half inputs
    arrive in float32: half_in_float32, below).  Its float32 addcmul is
    compiled fused, ``fma(value * t1, t2, self)``: the product and the sum
    rounded once (through float64, where a float32 product is exact)."""
    if combine is F.mul and promote(name, input, tensor1, tensor2)[1] is dt.float32:
        scaled = ops.cast(F.mul(tensor1, value), dt.float64)
        out = ops.cast(F.add(F.mul(scaled, ops.cast(tensor2, dt.float64)),
                             ops.cast(input, dt.float64) if isinstance(input, Tensor) else input),
                       dt.float32)
        # (the casts are row-major: the layout TensorIterator gives the
        # three operands' result)
        from tracec.tensor_meta import keep_iter_layout
        return keep_iter_layout(out, input, tensor1, tensor2)
    return F.add(input, combine(F.mul(tensor1, value), tensor2))


def addcmul(input, tensor1, tensor2, *deprecated, value=1):  # noqa: A002
    if deprecated:   # addcmul(input, Number value, Tensor tensor1, Tensor tensor2)
        value, (tensor1, tensor2) = tensor1, F._number_first("addcmul", tensor1, (tensor2,) + deprecated,
                                                             value, "value", 2)
    _check_broadcast(input, tensor1, tensor2)
    return _named(_pointwise3("addcmul", input, tensor1, tensor2, value, F.mul),
                  "AddcmulBackward0")


def addcdiv(input, tensor1, tensor2, *deprecated, value=1):  # noqa: A002
    if deprecated:   # addcdiv(input, Number value, Tensor tensor1, Tensor tensor2)
        value, (tensor1, tensor2) = tensor1, F._number_first("addcdiv", tensor1, (tensor2,) + deprecated,
                                                             value, "value", 2)
    _check_broadcast(input, tensor1, tensor2)
    if (isinstance(tensor1, Tensor) and not tensor1.dtype.is_floating_point
            and isinstance(tensor2, Tensor) and not tensor2.dtype.is_floating_point):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                           "future release addcdiv will perform a true division of tensor1 "
                           "and tensor2. The historic addcdiv behavior can be implemented as "
                           "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) "
                           "for integer inputs and as (input + value * tensor1 / tensor2) for "
                           "float inputs. The future addcdiv behavior is just the latter "
                           "implementation: (input + value * tensor1 / tensor2), for all "
                           "dtypes.")
    return _named(_pointwise3("addcdiv", input, tensor1, tensor2, value, F.div),
                  "AddcdivBackward0")


# --- signs, predicates, float representation -----------------------------------------

def signbit(input):  # noqa: A002
    x = _t(input, "signbit")
    if x.dtype.is_floating_point:
        return _signbit(x.detach())
    return ops.lt(x, 0) if x.dtype is not dt.bool_ else ops.ne(x, x)


def sgn(input):  # noqa: A002
    x = _t(input, "sgn")
    if x.dtype is dt.bool_:
        return ops.cast(x, x.dtype)
    s = F.sign(x)
    if x.dtype.is_floating_point:   # PyTorch's sgn(nan) is 0 (its sign(nan) is nan)
        s = ops.where(ops.ne(x, x), 0.0, s)
    return _named(s, "SgnBackward0")


def positive(input):  # noqa: A002
    x = _t(input, "positive")
    if x.dtype is dt.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    a, b = _t(input, "isclose"), _t(other, "isclose")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{a.dtype} did not match {b.dtype}")
    if a.dtype is dt.bool_ or not a.dtype.is_floating_point:
        (a, b), _ = promote("isclose", a.detach(), b.detach(), min_dtype=dt.float64)
    a, b = a.detach(), b.detach()
    close = ops.eq(a, b)
    diff = ops.abs_(ops.sub(a, b))
    tol = ops.add(ops.mul(ops.abs_(b), float(rtol)), float(atol))
    finite = ops.lt(diff, float("inf"))
    close = ops.logical_or(close, ops.logical_and(finite, ops.le(diff, tol)))
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.ne(a, a), ops.ne(b, b)))
    return close


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    e = _t(elements, "isin")
    t = _t(test_elements, "isin")
    (e, t), _ = promote("isin", e.detach(), t.detach())
    flat = ops.reshape(t, (1,) * e.ndim + (t.numel(),))
    hit = ops.reduce_max(ops.cast(ops.eq(ops.reshape(e, tuple(e.shape) + (1,)), flat),
                                  dt.int32), (e.ndim,)) if t.numel() else \
        ops.full(tuple(e.shape), 0, dt.int32, like=e)
    r = ops.ne(hit, 0)
    return ops.logical_not(r) if invert else r


def isreal(input):  # noqa: A002
    x = _t(input, "isreal")
    return ops.full(tuple(x.shape), True, dt.bool_, like=x)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    x = _t(input, "nan_to_num")
    if not x.dtype.is_floating_point:
        return ops.cast(x, x.dtype)
    info = np.finfo(np.float32 if x.dtype is dt.bfloat16 else x.dtype.np)
    big = float(info.max) if x.dtype is not dt.bfloat16 else 3.3895313892515355e38
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    y = ops.where(ops.ne(x, x), float(nan), x)
    y = ops.where(ops.eq(y, float("inf")), float(posinf), y)
    return _named(ops.where(ops.eq(y, float("-inf")), float(neginf), y), "NanToNumBackward0")


def ldexp(input, other):  # noqa: A002
    x = _float(input, "ldexp")
    o = _t(other, "ldexp")
    (x, p), _ = promote("ldexp", x, ops.pow_(2.0, ops.cast(o, x.dtype if x.dtype
                                                              is not dt.float16 else dt.float32)))
    return _named(ops.mul(x, p), "MulBackward0")


FrexpResult = structseq("frexp", ["mantissa", "exponent"])


def frexp(input):  # noqa: A002
    """``(mantissa, exponent)`` with ``input == mantissa * 2**exponent`` and
    ``0.5 <= |mantissa| < 1`` (0, inf and nan: mantissa is the input, exponent 0)."""
    x = _t(input, "frexp")
    if not x.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    x = x.detach()
    w = ops.cast(x, dt.float64)
    ax = ops.abs_(w)
    ok = ops.logical_and(ops.gt(ax, 0.0), ops.lt(ax, float("inf")))
    a = _safe(ok, ax, 1.0)
    e = ops.add(_floor(ops.mul(ops.log(a), 1 / _LN2)), 1.0)
    m = ops.mul(a, ops.pow_(2.0, ops.neg(e)))
    hi = ops.ge(m, 1.0)
    e = ops.where(hi, ops.add(e, 1.0), e)
    m = ops.where(hi, ops.mul(m, 0.5), m)
    lo = ops.lt(m, 0.5)
    e = ops.where(lo, ops.sub(e, 1.0), e)
    m = ops.where(lo, ops.mul(m, 2.0), m)
    m = ops.where(ok, ops.where(ops.lt(w, 0.0), ops.neg(m), m), w)
    e = ops.where(ok, e, 0.0)
    return FrexpResult(ops.cast(m, x.dtype), ops.cast(e, dt.int32))


def nextafter(input, other):  # noqa: A002
    """Eager only: the next float after ``input`` towards ``other`` (bit level)."""
    (a, b), d = promote("nextafter", input, other)
    a, b = _t(a, "nextafter"), _t(b, "nextafter")
    if not d.is_floating_point or d is dt.bfloat16:
        raise RuntimeError(f"\"nextafter_cpu\" not implemented for '{d}'")
    r = np.nextafter(concrete(a, "nextafter() (eager only)"),
                     concrete(b, "nextafter() (eager only)"))
    out = Tensor._make(np.array(r, dtype=d.np, order="C"), d)
    if (a.requires_grad or b.requires_grad) and graph.is_grad_enabled():
        # PyTorch's derivative: the gradient passes to input as is (summed
        # to its shape), other's is zero
        return _nextafter_grad().apply(a, b, out)
    return out


@functools.lru_cache(maxsize=None)
def _nextafter_grad():
    from tracec import autograd, creation

    class Nextafter(autograd.Function):
        node_name = "NextafterBackward0"

        @staticmethod
        def forward(ctx, a, b, out):
            ctx.a_shape, ctx.b = tuple(a.shape), b
            return out.clone()

        @staticmethod
        def backward(ctx, g):
            return g.sum_to_size(ctx.a_shape), creation.zeros_like(ctx.b), None
    return Nextafter


# --- real tensors seen as complex ones -------------------------------------------------

def rsub(input, other, *, alpha=1):  # noqa: A002
    """``other - alpha * input``."""
    return F._named(F.sub(other, input, alpha=alpha),
                    "RsubBackward0" if isinstance(other, Tensor) else "RsubBackward1")


def angle(input):  # noqa: A002
    """The argument of a real number: pi below 0, else 0 (nan stays nan);
    no gradient flows (PyTorch's is zero for real inputs)."""
    x = _float(input, "angle")
    xd = x.detach()
    a = ops.where(ops.lt(xd, 0.0), math.pi, _const(xd, 0.0))     # (+0.0 for -0.0 and inf)
    return _named(_no_grad_link(ops.where(ops.ne(xd, xd), xd, a), x), "AngleBackward0")


def conj(input):  # noqa: A002
    """Real tensors are their own conjugate: the tensor itself (PyTorch's
    ``conj`` is a view)."""
    return _t(input, "conj")


resolve_conj = resolve_neg = real = conj


def conj_physical(input):  # noqa: A002
    return ops.cast(_t(input, "conj_physical"), input.dtype)


def imag(input):  # noqa: A002
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def is_conj(input) -> bool:  # noqa: A002
    return False


is_neg = is_conj


# Half-precision inputs of the multi-step composites are computed in float32.
# (xlogy is not: PyTorch's half kernel rounds log(y) to the half dtype, then
# the product: x * log(y) in half ops, as the plain composite computes it.)
# (fmod / remainder round a number operand to the half dtype, where the
# float32 number left 87-95% of elements one unit off; floor_divide reads
# its divisor in float32 but rounds a number dividend, 3001 // x)
_NUMBERS = {"fmod": (0, 1), "remainder": (0, 1), "floor_divide": (0,)}
_OPMATH = {"floor_divide": (1,)}
for _name in ("log1p expm1 log2 log10 exp2 logaddexp logaddexp2 fmod remainder "
              "floor_divide logit lerp addcmul addcdiv").split():
    globals()[_name] = half_in_float32(globals()[_name], _NUMBERS.get(_name, ()),
                                       _OPMATH.get(_name, ()))
