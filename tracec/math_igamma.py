"""The regularized incomplete gamma functions ``igamma`` (P(a, x)) and
``igammac`` (Q(a, x) = 1 - P), PyTorch's ``torch.igamma``/``igammac`` and
``torch.special.gammainc``/``gammaincc``.

Invariant: eager only: evaluated in float64 NumPy with loops that run until
convergence (the power series where x < a + 1, Lentz's continued fraction
for Q elsewhere, as Numerical Recipes' gser/gcf), so they read their
operands' values (``concrete``: a ``TraceError`` inside ``tracec.compile``).
The gradient with respect to ``x`` is x^(a-1) e^-x / Gamma(a) (times -1 for
Q); PyTorch has none with respect to ``a`` and neither has tracec (asking for
it raises).  Edge values follow PyTorch: NaN for a < 0, x < 0 or a = x = 0;
P = 1 for a = 0 or x = inf; P = 0 for x = 0 or a = inf.
"""
from __future__ import annotations

import math

import numpy as np

from tracec import autograd
from tracec import dtypes as dt
from tracec import ops
from tracec.functions import promote, tensor_arg
from tracec.tensor import Tensor, concrete

__all__ = ["igamma", "igammac"]

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_TINY = 1e-300
_MAX_STEPS = 100000


def _log_prefactor(a, x):
    """log(x^a e^-x / Gamma(a)), for a > 0 and x > 0."""
    return a * np.log(x) - x - _lgamma(a)


def _series_p(a, x):
    term = 1.0 / a
    total = term.copy()
    ap = a.copy()
    for _ in range(_MAX_STEPS):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
        if np.all(np.abs(term) <= np.abs(total) * 1e-17):
            break
    return total * np.exp(_log_prefactor(a, x))


def _fraction_q(a, x):
    b = x + 1.0 - a
    c = np.full_like(b, 1.0 / _TINY)
    d = 1.0 / b
    h = d.copy()
    for i in range(1, _MAX_STEPS):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + an / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1.0 / d
        step = d * c
        h = h * step
        if np.all(np.abs(step - 1.0) <= 1e-16):
            break
    return np.exp(_log_prefactor(a, x)) * h


def _p_and_q(a, x):
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    p = np.full(a.shape, np.nan)
    q = np.full(a.shape, np.nan)
    valid = (a >= 0) & (x >= 0) & ~(np.isnan(a) | np.isnan(x))
    one = valid & (((a == 0) & (x > 0)) | (np.isinf(x) & np.isfinite(a)))
    zero = valid & (((x == 0) & (a > 0)) | (np.isinf(a) & np.isfinite(x)))
    p[one], q[one] = 1.0, 0.0
    p[zero], q[zero] = 0.0, 1.0
    body = valid & (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    ser = body & (x < a + 1.0)
    frac = body & ~ser
    if ser.any():
        p[ser] = _series_p(a[ser], x[ser])
        q[ser] = 1.0 - p[ser]
    if frac.any():
        q[frac] = _fraction_q(a[frac], x[frac])
        p[frac] = 1.0 - q[frac]
    return p, q


def _density(a, x):
    """x^(a-1) e^-x / Gamma(a): dP/dx."""
    with np.errstate(all="ignore"):
        return np.exp((a - 1.0) * np.log(x) - x - _lgamma(a))


def _function(name, upper):
    def forward(ctx, a, x):
        why = f"{name}() (eager only: its series runs until it converges)"
        av, xv = concrete(a, why), concrete(x, why)
        ctx.a, ctx.x, ctx.dtype = av, xv, x.dtype
        with np.errstate(all="ignore"):
            p, q = _p_and_q(av, xv)
        return Tensor._make(np.array(q if upper else p, dtype=x.dtype.np, order="C"), x.dtype)

    def backward(ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"derivative for aten::{name} is not implemented")
        a, x = np.broadcast_arrays(ctx.a.astype(np.float64), ctx.x.astype(np.float64))
        gx = concrete(g, name) * _density(a, x) * (-1.0 if upper else 1.0)
        while gx.ndim > ctx.x.ndim:
            gx = gx.sum(0)
        for i, s in enumerate(ctx.x.shape):
            if s == 1 and gx.shape[i] != 1:
                gx = gx.sum(i, keepdims=True)
        return None, Tensor._make(np.array(gx, dtype=ctx.dtype.np, order="C"), ctx.dtype)
    cls = type(name.capitalize(), (autograd.Function,), {"forward": staticmethod(forward),
                                                         "backward": staticmethod(backward)})
    return cls.apply


_igamma = _function("igamma", False)
_igammac = _function("igammac", True)


def _operands(name, input, other):  # noqa: A002
    a, x = tensor_arg(input, name), tensor_arg(other, name)
    (a, x), d = promote(name, a, x, min_dtype=dt.get_default_dtype())
    return ops.cast(a, d) if a.dtype is not d else a, x


def igamma(input, other):  # noqa: A002
    """P(input, other): the lower regularized incomplete gamma function."""
    return _igamma(*_operands("igamma", input, other))


def igammac(input, other):  # noqa: A002
    """Q(input, other) = 1 - P: the upper regularized incomplete gamma function."""
    return _igammac(*_operands("igammac", input, other))
