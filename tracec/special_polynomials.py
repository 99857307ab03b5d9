"""``torch.special``'s classical orthogonal polynomials P_n(x):
``chebyshev_polynomial_t/u/v/w``, ``shifted_chebyshev_polynomial_t/u/v/w``,
``hermite_polynomial_h/he``, ``laguerre_polynomial_l``, ``legendre_polynomial_p``.

Invariant: each is PyTorch's element rule (ATen ``Math.h``), evaluated in
the result dtype with primitives: n is truncated to an integer, n < 0 gives
0, the rule's exact values at its edge points (|x| = 1, or x = 0 / 1 for
the shifted ones), PyTorch's trigonometric closed form for large n inside
the interval (the Chebyshev kinds), else the three-term recurrence from
P_0 = 1 and PyTorch's P_1, run up to the largest n any element needs.  As in
PyTorch the result has no gradient (it never requires grad).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ops
from tracec.math_trig import acos
from tracec.ops.core import broadcast_shapes
from tracec.tensor import Tensor, concrete

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p"]


def _operands(x, n, name):
    """(x as the result dtype, n as int64, both broadcast, without grad; the
    degree itself when n is a Python number, else None)."""
    from tracec.creation import tensor as _tensor
    xt = x if isinstance(x, Tensor) else None
    nt = n if isinstance(n, Tensor) else None
    if xt is None and nt is None:
        got = ", ".join(type(v).__name__ for v in (x, n))
        raise TypeError(f"special_{name}() received an invalid combination of arguments - got "
                        f"({got}), but expected one of:\n"
                        " * (Tensor x, Tensor n, *, Tensor out = None)\n"
                        " * (Number x, Tensor n, *, Tensor out = None)\n"
                        " * (Tensor x, Number n, *, Tensor out = None)\n")
    tensors = [v for v in (xt, nt) if v is not None]
    scalars = [2 if isinstance(v, float) else 1 for v in (x, n)      # (categories)
               if not isinstance(v, Tensor)]
    d = dt.result_type([v.dtype for v in tensors if v.ndim],
                       [v.dtype for v in tensors if not v.ndim], scalars)
    if d.category < 2:       # integer and bool operands: the default float dtype
        d = dt.get_default_dtype()
    if d not in (dt.float32, dt.float64):      # ATen dispatches float and double only
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f"'{dt.scalar_type_name(d)}'")
    xs = xt.detach() if xt is not None else _tensor(float(x), dtype=d)
    ns = nt.detach() if nt is not None else _tensor(n)
    xs = ops.cast(xs, d) if xs.dtype is not d else xs
    ni = ops.cast(ns, dt.int64)       # (a float n truncates, as PyTorch's static_cast)
    shape = broadcast_shapes(tuple(xs.shape), tuple(ni.shape))
    if tuple(xs.shape) != shape:
        xs = ops.broadcast_to(xs, shape)
    if tuple(ni.shape) != shape:
        ni = ops.broadcast_to(ni, shape)
    return xs, ni, (None if nt is not None else int(n))


def _f(n, like):
    """An int64 tensor (or int) as ``like``'s dtype."""
    return ops.cast(n, like.dtype)


def _recurrence(x, n, first, step, skip, top):
    """P_n(x) by P_m = step(m, P_{m-1}, P_{m-2}) from P_0 = 1, P_1 = first,
    up to ``top`` (a Python degree), or to the largest n among elements not
    ``skip``ped (a tensor of degrees: read, so not inside a compiled trace)."""
    if top is None:
        nn = concrete(ops.where(skip, 0, n), "the degree n of a special polynomial")
        top = int(nn.max()) if nn.size else 0
    one = ops.full(tuple(x.shape), 1.0, x.dtype, like=x)
    out = ops.where(ops.eq(n, 1), first, one)
    p, q = one, first
    for m in range(2, top + 1):
        r = step(m, q, p)
        out = ops.where(ops.eq(n, m), r, out)
        p, q = q, r
    return out


def _even(n):
    # C++'s n % 2 == 0, on n as float64 (exact for any degree a loop can reach)
    return ops.eq(ops.fmod(ops.cast(n, dt.float64), 2.0), 0.0)


def _sel(cond, a, b, like):
    if not isinstance(a, Tensor):
        a = ops.full(tuple(like.shape), a, like.dtype, like=like)
    return ops.where(cond, a, b)


def _chebyshev(kind: str, shifted: bool):
    """One of the eight Chebyshev rules: ``kind`` in tuvw."""
    trig_min = {"t": 6, "u": 8, "v": 8, "w": 8}[kind] if not shifted else \
        {"t": 6, "u": 6, "v": 6, "w": 4}[kind]

    def fn(input, n):
        x, n, top = _operands(input, n, fn.__name__)
        y = ops.sub(ops.add(x, x), 1.0) if shifted else x      # PyTorch's x + x - 1
        two_y = ops.add(y, y)
        first = {"t": y, "u": two_y, "v": ops.sub(two_y, 1.0), "w": ops.add(two_y, 1.0)}[kind]
        nf = _f(n, x)
        n1 = ops.add(nf, 1.0)
        n21 = _f(ops.add(ops.add(n, n), 1), x)
        inside = ops.lt(ops.abs_(y), 1.0)
        trig = ops.logical_and(ops.gt(n, trig_min), inside)
        ys = ops.where(inside, y, 0.0)           # (acos outside [-1, 1] is not taken)
        th = acos(ys)
        if kind == "t":
            closed = ops.cos(ops.mul(nf, th))
        elif kind == "u":
            s = ops.sin(th)
            closed = ops.where(ops.ne(s, 0.0), ops.div(ops.sin(ops.mul(n1, th)), s),
                               ops.div(ops.mul(n1, ops.cos(ops.mul(n1, th))), ys))
        elif kind == "v":
            half = ops.div(th, 2.0)
            alt = ops.where(_even(n), n21, ops.neg(n21))
            closed = ops.where(ops.ne(ops.sin(half), 1.0),
                               ops.div(ops.cos(ops.mul(ops.add(nf, 0.5), th)), ops.cos(half)), alt)
        else:
            half = ops.div(th, 2.0)
            pm1 = _sel(_even(n), 1.0, _sel(ops.gt(n, -1), -1.0, 1.0, x), x)
            alt = pm1 if shifted else ops.where(ops.gt(x, 0.0), n21, pm1)
            closed = ops.where(ops.ne(ops.cos(half), 1.0),
                               ops.div(ops.sin(ops.mul(ops.add(nf, 0.5), th)), ops.sin(half)), alt)
        res = _recurrence(x, n, first, lambda m, q, p: ops.sub(ops.mul(two_y, q), p), trig, top)
        res = ops.where(trig, closed, res)
        # the edge points
        even = _even(n)
        if not shifted:
            edge, pos = ops.eq(ops.abs_(x), 1.0), ops.gt(x, 0.0)
            if kind == "t":
                val = _sel(ops.logical_or(pos, even), 1.0, -1.0, x)
            elif kind == "u":
                val = ops.where(ops.logical_or(pos, even), n1, ops.neg(n1))
            elif kind == "v":
                val = _sel(pos, 1.0, ops.where(even, n21, ops.neg(n21)), x)
            else:
                val = ops.where(pos, n21, _sel(even, 1.0, -1.0, x))
            res = ops.where(edge, val, res)
        else:
            at0 = {"t": _sel(even, 1.0, -1.0, x), "u": ops.where(even, n1, ops.neg(n1)),
                   "v": ops.where(even, n21, ops.neg(n21)), "w": _sel(even, 1.0, -1.0, x)}[kind]
            at1 = {"t": 1.0, "u": n1, "v": 1.0, "w": n21}[kind]
            res = ops.where(ops.eq(x, 0.0), at0, res)
            res = _sel(ops.eq(x, 1.0), at1, res, x)
        return ops.where(ops.lt(n, 0), 0.0, res)
    fn.__name__ = ("shifted_" if shifted else "") + f"chebyshev_polynomial_{kind}"
    fn.__doc__ = (f"``torch.special.{fn.__name__}(input, n)``: the "
                  f"{'shifted ' if shifted else ''}Chebyshev polynomial of the "
                  f"{'first second third fourth'.split()['tuvw'.index(kind)]} kind.")
    return fn


def hermite_polynomial_h(input, n):
    """``torch.special.hermite_polynomial_h``: the physicists' Hermite H_n(x)."""
    x, n, top = _operands(input, n, "hermite_polynomial_h")
    two_x = ops.add(x, x)
    res = _recurrence(x, n, two_x,
                      lambda m, q, p: ops.sub(ops.mul(two_x, q), ops.mul(p, float(2 * (m - 1)))),
                      ops.lt(n, 0), top)
    return ops.where(ops.lt(n, 0), 0.0, res)


def hermite_polynomial_he(input, n):
    """``torch.special.hermite_polynomial_he``: the probabilists' Hermite He_n(x)."""
    x, n, top = _operands(input, n, "hermite_polynomial_he")
    res = _recurrence(x, n, x, lambda m, q, p: ops.sub(ops.mul(x, q), ops.mul(p, float(m - 1))),
                      ops.lt(n, 0), top)
    return ops.where(ops.lt(n, 0), 0.0, res)


def laguerre_polynomial_l(input, n):
    """``torch.special.laguerre_polynomial_l``: the Laguerre L_n(x) (1 at x = 0)."""
    x, n, top = _operands(input, n, "laguerre_polynomial_l")
    one_minus = ops.add(ops.neg(x), 1.0)      # 1 - x (exactly)

    def step(m, q, p):
        k = m - 1
        return ops.div(ops.sub(ops.mul(ops.add(one_minus, float(k + k)), q), ops.mul(p, float(k))),
                       float(k + 1))
    res = _recurrence(x, n, one_minus, step, ops.lt(n, 0), top)
    res = ops.where(ops.eq(ops.abs_(x), 0.0), 1.0, res)
    return ops.where(ops.lt(n, 0), 0.0, res)


def legendre_polynomial_p(input, n):
    """``torch.special.legendre_polynomial_p``: the Legendre P_n(x)."""
    x, n, top = _operands(input, n, "legendre_polynomial_p")

    def step(m, q, p):
        k = m - 1
        return ops.div(ops.sub(ops.mul(ops.mul(x, float(k + k + 1)), q), ops.mul(p, float(k))),
                       float(k + 1))
    edge = ops.eq(ops.abs_(x), 1.0)
    res = _recurrence(x, n, x, step, ops.logical_or(ops.lt(n, 0), edge), top)
    val = _sel(ops.logical_or(ops.gt(x, 0.0), _even(n)), 1.0, -1.0, x)
    res = ops.where(edge, val, res)
    return ops.where(ops.lt(n, 0), 0.0, res)


chebyshev_polynomial_t = _chebyshev("t", False)
chebyshev_polynomial_u = _chebyshev("u", False)
chebyshev_polynomial_v = _chebyshev("v", False)
chebyshev_polynomial_w = _chebyshev("w", False)
shifted_chebyshev_polynomial_t = _chebyshev("t", True)
shifted_chebyshev_polynomial_u = _chebyshev("u", True)
shifted_chebyshev_polynomial_v = _chebyshev("v", True)
shifted_chebyshev_polynomial_w = _chebyshev("w", True)
