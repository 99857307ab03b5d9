"""Complex values inside a trace, as real ones.

The IR has no complex type.  While a call is recorded, a complex tensor of
shape ``S`` is represented by a real tensor of shape ``S + (2,)`` (real and
imaginary parts on the last axis: exactly ``view_as_real``'s layout), so
``view_as_complex`` / ``view_as_real`` record nothing at all, and each complex
operation records its definition in real primitives (``(a+ib)(c+id) =
(ac-bd) + i(ad+bc)``, ...).  Gradients then come from the autodiff pass
differentiating those real primitives: for a real loss they are the ones
PyTorch's conjugate Wirtinger convention gives the real tensors the complex
values were made from.

``PRIMITIVE_RULES`` covers the primitives applied to complex operands (the
arithmetic, movement and indexing the eager complex code runs through) and
``OP_RULES`` the complex ops outside the primitive set (``tracec.complex_ops``,
told to the tracer by name).  Invariant: a rule emits real primitives only,
and its result has the representation of the eager result (``S + (2,)`` for
complex, ``S`` for real); an operation with no rule is refused by the tracer.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ir
from tracec.complex_ops import _as_real_view
from tracec.ops import PRIMITIVES
from tracec.ops import creation as C, elementwise as E, linalg as L, movement as M
from tracec.ops import reduce as R
from tracec.ops.core import Aval, broadcast_shapes
from tracec.tensor import Tensor

__all__ = ["Value", "Out", "emitting", "PRIMITIVE_RULES", "OP_RULES", "real_view",
           "apply_primitive", "apply_op", "SameStorage", "message", "input_value", "view_chain",
           "record_primitive", "record_op"]


class _Emitter:
    """Where ``Value`` bindings go: appended to a recording's block at ``loc``."""

    def __init__(self, rec, loc):
        self.rec, self.loc = rec, loc


_EMIT: list = []


class emitting:
    """``with emitting(recording, loc):`` primitives bound to ``Value``s
    append their ops to ``recording``'s function."""

    def __init__(self, rec, loc):
        self.e = _Emitter(rec, loc)

    def __enter__(self):
        _EMIT.append(self.e)
        return self.e

    def __exit__(self, *exc):
        _EMIT.pop()


class Value:
    """An SSA value of the function being recorded; ``cplx``: it represents
    a complex tensor (its last axis holds the real and imaginary parts)."""

    __slots__ = ("ssa", "cplx")

    def __init__(self, ssa, cplx: bool = False):
        self.ssa = ssa
        self.cplx = cplx

    @property
    def shape(self) -> tuple:
        rec = _EMIT[-1].rec
        if rec.symbols is not None:
            return tuple(rec.symbols.shape_of_value(self.ssa))
        return ir.shape_of(self.ssa.type)

    @property
    def dtype(self):
        return ir.dtype_of(self.ssa.type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def _bind_primitive(cls, prim, args, params):
        e = _EMIT[-1]
        ref = None
        for a in args:
            if isinstance(a, Value) and (ref is None or a.dtype.category > ref.category):
                ref = a.dtype
        operands, avals = [], []
        for a in args:
            if isinstance(a, Value):
                operands.append(a.ssa)
                avals.append(Aval(a.shape, a.dtype))
            else:
                operands.append(e.rec.scalar(a, ref))
                avals.append(Aval((), ref))
        aval = prim.abstract_eval(*avals, **params)
        op = ir.make_op(prim.name, operands, params, ir.tensor_type(aval.shape, aval.dtype),
                        loc=e.loc)
        e.rec.block.add_op(op)
        return Value(op.results[0])


# --- parts: a complex operand as (re, im) of shape S + (1,); im None means 0 ------------------

def _part(v: Value, k: int) -> Value:
    n = v.ndim
    return M.slice_(v, (0,) * (n - 1) + (k,), tuple(v.shape[:-1]) + (k + 1,), (1,) * n)


def _lift(v: Value) -> Value:
    return M.reshape(v, tuple(v.shape) + (1,))


def _drop(v: Value) -> Value:
    return M.reshape(v, tuple(v.shape[:-1]))


def _parts(x, rd: dt.DType):
    """``(re, im)`` of an operand at the real dtype ``rd``: Values of shape
    ``S + (1,)`` or Python numbers; ``im`` is None where it is 0."""
    if isinstance(x, Value):
        if x.cplx:
            if x.dtype is not rd:
                x = E.cast(x, rd)
            return _part(x, 0), _part(x, 1)
        if x.dtype is not rd:
            x = E.cast(x, rd)
        return _lift(x), None
    z = complex(x)
    return (z.real, None) if z.imag == 0 else (z.real, z.imag)


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return E.add(a, b)


def _sub(a, b):
    if b is None:
        return a
    if a is None:
        return E.neg(b) if isinstance(b, Value) else -b
    return E.sub(a, b)


def _mul(a, b):
    if a is None or b is None:
        return None
    return E.mul(a, b)


_LIKE = Value(None)   # the context creation primitives are bound in (no operand)


def _pack(re, im, shape, rd) -> Value:
    """The ``shape + (2,)`` representation of ``re + i im`` (parts of shape
    broadcastable to ``shape + (1,)``, Values or numbers, ``im`` None for 0)."""
    full = tuple(shape) + (1,)

    def as_value(p):
        if not isinstance(p, Value):
            return C.full(full, 0.0 if p is None else p, rd, like=_LIKE)
        if p.dtype is not rd:
            p = E.cast(p, rd)
        if tuple(p.shape) != full:
            p = M.broadcast_to(p, full)
        return p
    out = M.concatenate([as_value(re), as_value(im)], len(full) - 1)
    out.cplx = True
    return out


# --- rules for primitives applied to complex operands -----------------------------------------
# rule(operands, params, out) -> Value; operands: Values (cplx marks complex ones) or scalars;
# out: the result's dtype and (possibly symbolic) shape.

def _out_rd(out) -> dt.DType:
    return out.dtype.to_real() if out.dtype.category == 3 else out.dtype


def _binary(fn):
    def rule(xs, params, out):
        rd = _out_rd(out)
        (ar, ai), (br, bi) = _parts(xs[0], rd), _parts(xs[1], rd)
        re, im = fn(ar, ai, br, bi)
        return _pack(re, im, out.shape, rd)
    return rule


def _mul_parts(ar, ai, br, bi):
    return _sub(_mul(ar, br), _mul(ai, bi)), _add(_mul(ar, bi), _mul(ai, br))


def _div_parts(ar, ai, br, bi):
    if bi is None:
        return E.div(ar, br) if isinstance(ar, Value) or isinstance(br, Value) else ar / br, \
            None if ai is None else E.div(ai, br)
    den = E.add(E.mul(br, br), E.mul(bi, bi)) if isinstance(br, Value) else None
    if den is None:   # a complex scalar divisor: multiply by its reciprocal
        z = 1 / complex(br, bi)
        return _mul_parts(ar, ai, z.real, z.imag)
    return (E.div(_add(_mul(ar, br), _mul(ai, bi)), den),
            E.div(_sub(_mul(ai, br), _mul(ar, bi)), den))


def _unary(fn):
    def rule(xs, params, out):
        rd = _out_rd(out)
        re, im = fn(*_parts(xs[0], rd))
        return _pack(re, im, out.shape, rd)
    return rule


def _exp_parts(ar, ai):
    e = E.exp(ar)
    return (e, None) if ai is None else (E.mul(e, E.cos(ai)), E.mul(e, E.sin(ai)))


def _abs(xs, params, out):
    re, im = _parts(xs[0], out.dtype)
    sq = E.mul(re, re) if im is None else E.add(E.mul(re, re), E.mul(im, im))
    return _drop(E.sqrt(sq))


def _eq(negate):
    def rule(xs, params, out):
        ds = [x.dtype for x in xs if isinstance(x, Value)]
        rd = ds[0] if len(ds) == 1 else dt.promote_types(*ds)
        (ar, ai), (br, bi) = _parts(xs[0], rd), _parts(xs[1], rd)
        r = E.eq(ar, br)
        if ai is not None or bi is not None:
            r = E.logical_and(r, E.eq(0.0 if ai is None else ai, 0.0 if bi is None else bi))
        shape = tuple(out.shape) + (1,)
        r = _drop(r if tuple(r.shape) == shape else M.broadcast_to(r, shape))
        return E.logical_not(r) if negate else r
    return rule


def _cast(xs, params, out):
    x, d = xs[0], params["dtype"]
    if d.category == 3:
        re, im = _parts(x, d.to_real())
        return _pack(re, im, out.shape, d.to_real())
    # complex -> real keeps the real part (PyTorch warns that it discards the imaginary one)
    return E.cast(_drop(_part(x, 0)), d)


def _where(xs, params, out):
    rd = _out_rd(out)
    c = _lift(xs[0])
    (ar, ai), (br, bi) = _parts(xs[1], rd), _parts(xs[2], rd)
    a = _pack(ar, ai, out.shape, rd)
    b = _pack(br, bi, out.shape, rd)
    r = E.where(c, a, b)
    r.cplx = True
    return r


def _matmul(xs, params, out):
    rd = _out_rd(out)
    (ar, ai), (br, bi) = [_parts(x, rd) for x in xs]
    ar, ai, br, bi = [None if p is None else _drop(p) for p in (ar, ai, br, bi)]
    re = _sub(_mul_mm(ar, br), _mul_mm(ai, bi))
    im = _add(_mul_mm(ar, bi), _mul_mm(ai, br))
    return _pack(None if re is None else _lift(re), None if im is None else _lift(im),
                 out.shape, rd)


def _mul_mm(a, b):
    return None if a is None or b is None else L.matmul(a, b)


def _same(prim_name, extend):
    """A movement / reduction primitive applied to the representation, its
    parameters extended over the trailing parts axis."""
    prim = PRIMITIVES[prim_name]

    def rule(xs, params, out):
        x = xs[0]
        if not x.cplx:   # a real operand of a complex result (a cast came first)
            raise NotImplementedError
        r = prim.bind(x, *xs[1:], **extend(params, x.ndim - 1))
        r.cplx = True
        return r
    return rule


def _concat(xs, params, out):
    rd = _out_rd(out)
    vals = []
    for x in xs:
        if x.cplx and x.dtype is rd:
            vals.append(x)
        else:
            re, im = _parts(x, rd)
            vals.append(_pack(re, im, tuple(re.shape[:-1]), rd))
    r = M.concatenate(vals, params["axis"])
    r.cplx = True
    return r


def _pad(xs, params, out):
    rd = _out_rd(out)
    x = xs[0]
    if not (x.cplx and x.dtype is rd):
        re, im = _parts(x, rd)
        x = _pack(re, im, tuple(re.shape[:-1]), rd)
    v = complex(params["value"])
    ext = {"low": tuple(params["low"]) + (0,), "high": tuple(params["high"]) + (0,),
           "interior": tuple(params["interior"]) + (0,)}
    return _pack(M.pad(_part(x, 0), value=v.real, **ext), M.pad(_part(x, 1), value=v.imag, **ext),
                 out.shape, rd)


def _gather(xs, params, out):
    x, idx = xs
    idx = M.broadcast_to(_lift(idx), tuple(idx.shape) + (2,))
    r = PRIMITIVES["gather"].bind(x, idx, **params)
    r.cplx = True
    return r


def _full(xs, params, out):
    v, rd = complex(params["value"]), params["dtype"].to_real()
    shape = tuple(params["shape"]) + (1,)
    return _pack(C.full(shape, v.real, rd, like=_LIKE), C.full(shape, v.imag, rd, like=_LIKE),
                 params["shape"], rd)


def _identity(xs, params, out):
    r = PRIMITIVES["stop_gradient"].bind(xs[0])
    r.cplx = True
    return r


def _sum(xs, params, out):
    r = R.reduce_sum(xs[0], params["axes"])
    r.cplx = True
    return r


PRIMITIVE_RULES = {
    "add": _binary(lambda ar, ai, br, bi: (_add(ar, br), _add(ai, bi))),
    "sub": _binary(lambda ar, ai, br, bi: (_sub(ar, br), _sub(ai, bi))),
    "mul": _binary(_mul_parts),
    "div": _binary(_div_parts),
    "neg": _unary(lambda ar, ai: (E.neg(ar), None if ai is None else E.neg(ai))),
    "exp": _unary(_exp_parts),
    "abs": _abs,
    "eq": _eq(False),
    "ne": _eq(True),
    "cast": _cast,
    "where": _where,
    "matmul": _matmul,
    "stop_gradient": _identity,
    "reduce_sum": _sum,
    "reshape": _same("reshape", lambda p, n: {"shape": tuple(p["shape"]) + (2,)}),
    "transpose": _same("transpose", lambda p, n: {"perm": tuple(p["perm"]) + (n,)}),
    "broadcast_to": _same("broadcast_to", lambda p, n: {"shape": tuple(p["shape"]) + (2,)}),
    "slice": _same("slice", lambda p, n: {"starts": tuple(p["starts"]) + (0,),
                                          "stops": tuple(p["stops"]) + (2,),
                                          "steps": tuple(p["steps"]) + (1,)}),
    "take": _same("take", lambda p, n: p),
    "gather": _gather,
    "concatenate": _concat,
    "pad": _pad,
    "full": _full,
}


class Out:
    """The dtype and shape (symbolic sizes included) of an op's result."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, tuple(shape)


def _shape(x) -> tuple:
    """The shape of the value an operand represents."""
    if isinstance(x, Value):
        return tuple(x.shape[:-1]) if x.cplx else tuple(x.shape)
    return ()


def apply_primitive(prim, values, params, dtype):
    """The representation of ``prim(*values, **params)`` whose result has
    ``dtype``; raises KeyError for a primitive with no rule."""
    shape = prim.shape_rule(*[_shape(v) for v in values], **params)
    return PRIMITIVE_RULES[prim.name](values, params, Out(dtype, shape))


def apply_op(name, values, dtype):
    """The representation of the complex op ``name`` (``OP_RULES``)."""
    return OP_RULES[name](values, Out(dtype, ()))


# --- rules for the complex ops outside the primitive set (tracec.complex_ops) ------------------

def _polar(xs, out):
    rd = out.dtype.to_real()
    r, t = [_lift(x if x.dtype is rd else E.cast(x, rd)) for x in xs]
    return _pack(E.mul(r, E.cos(t)), E.mul(r, E.sin(t)),
                 broadcast_shapes(_shape(xs[0]), _shape(xs[1])), rd)


def _complex(xs, out):
    rd = out.dtype.to_real()
    re, im = [_lift(x) for x in xs]
    return _pack(re, im, broadcast_shapes(_shape(xs[0]), _shape(xs[1])), rd)


def _component(k):
    def rule(xs, out):
        return _drop(_part(xs[0], k))
    return rule


def _conj(xs, out):
    re, im = _parts(xs[0], out.dtype.to_real())
    return _pack(re, E.neg(im), _shape(xs[0]), out.dtype.to_real())


def _as_complex(xs, out):
    return Value(xs[0].ssa, True)


def _as_real(xs, out):
    return Value(xs[0].ssa, False)


# --- the discrete Fourier transforms (tracec.fft) as products with DFT matrices ------------------
# Each transformed axis is a real-linear map: the operand (its real and
# imaginary parts) times a constant matrix of that axis's length, so the
# autodiff pass differentiates it like any matmul, and the gradients are
# the adjoint transforms PyTorch's FFT backward computes.  The cropping or
# zero padding of ``n`` / ``s`` is folded into the matrix (rows past the
# transform's length are zero; an input shorter than it uses the first
# rows).  O(n^2) per axis instead of O(n log n): exact, and fine at the
# lengths traced programs transform (an FNO's grid).

def _const(arr: np.ndarray, rd: dt.DType) -> Value:
    e = _EMIT[-1]
    op = ir.constant(np.ascontiguousarray(arr, dtype=rd.np), rd, loc=e.loc)
    e.rec.block.add_op(op)
    return Value(op.results[0])


def _fft_scale(n: int, norm: str, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _static_length(v: Value, axis: int) -> int:
    m = v.shape[axis]
    if not isinstance(m, (int, np.integer)):
        raise NotImplementedError("a transformed dimension of symbolic size")
    return int(m)


def _along(x: Value, axis: int, mat: Value) -> Value:
    """``x`` (real, no parts axis) times ``mat`` ``[m, k]`` along ``axis``."""
    n = x.ndim
    perm = [d for d in range(n) if d != axis] + [axis]
    moved = x if axis == n - 1 else M.transpose(x, tuple(perm))
    if n == 1:
        moved = M.reshape(moved, (1,) + tuple(moved.shape))
    y = L.matmul(moved, mat)
    if n == 1:
        return M.reshape(y, tuple(y.shape[1:]))
    if axis == n - 1:
        return y
    return M.transpose(y, tuple(int(i) for i in np.argsort(perm)))


def _dft_axis(re, im, axis, mats, rd):
    """``(re + i im)`` times the complex matrix ``mats = (real, imag)`` along
    ``axis``; ``im`` or a part of ``mats`` None for 0."""
    mr, mi = [None if m is None else _const(m, rd) for m in mats]
    prods = [[None if (a is None or b is None) else _along(a, axis, b) for b in (mr, mi)]
             for a in (re, im)]
    return _sub(prods[0][0], prods[1][1]), _add(prods[0][1], prods[1][0])


def _dft_matrix(m: int, n: int, k: int, sign: float, scale: float):
    """``[m, k]``: row j < min(m, n) is ``scale * exp(sign 2 pi i j kk / n)``,
    the rest zero (the input cropped to n)."""
    j = np.arange(min(m, n), dtype=np.float64)[:, None]
    theta = sign * 2 * np.pi * ((j * np.arange(k)[None, :]) % n) / n
    re, im = np.zeros((m, k)), np.zeros((m, k))
    re[:len(j)], im[:len(j)] = scale * np.cos(theta), scale * np.sin(theta)
    return re, im


def _c2c_axes(re, im, axes, sizes, norm, inverse, rd):
    for ax, n in zip(axes, sizes):
        m = _static_length(re, ax)
        mats = _dft_matrix(m, n, n, 1.0 if inverse else -1.0, _fft_scale(n, norm, inverse))
        re, im = _dft_axis(re, im, ax, mats, rd)
    return re, im


def _split(v: Value, rd):
    if v.cplx:
        return _drop(_part(v, 0)), _drop(_part(v, 1))
    return (v if v.dtype is rd else E.cast(v, rd)), None


def _joined(re, im, rd) -> Value:
    out = _pack(_lift(re), None if im is None else _lift(im), tuple(re.shape), rd)
    return out


def _fft_r2c(xs, out):
    x, axes, sizes, norm, onesided = xs
    rd = out.dtype.to_real()
    re, im = _split(x, rd)
    last, n = axes[-1], sizes[-1]
    k = n // 2 + 1 if onesided else n
    re, im = _dft_axis(re, im, last, _dft_matrix(_static_length(re, last), n, k, -1.0,
                                                 _fft_scale(n, norm, False)), rd)
    re, im = _c2c_axes(re, im, axes[:-1], sizes[:-1], norm, False, rd)
    return _joined(re, im, rd)


def _fft_c2c(xs, out):
    x, axes, sizes, norm, forward = xs
    rd = out.dtype.to_real()
    re, im = _c2c_axes(*_split(x, rd), axes, sizes, norm, not forward, rd)
    return _joined(re, im, rd)


def _fft_c2r(xs, out):
    x, axes, sizes, norm = xs
    rd = out.dtype
    re, im = _c2c_axes(*_split(x, rd), axes[:-1], sizes[:-1], norm, True, rd)
    last, n = axes[-1], sizes[-1]
    m, half = _static_length(re, last), n // 2 + 1
    # x_j = scale sum_k w_k (Re X_k cos t - Im X_k sin t), t = 2 pi j k / n, over
    # the first ``half`` bins; w_k = 2 for the bins that also stand for their
    # mirror images (the imaginary parts of bin 0 and bin n/2 meet sin t = 0)
    kk = np.arange(min(m, half), dtype=np.float64)[:, None]
    w = np.where((kk == 0) | (2 * kk == n), 1.0, 2.0) * _fft_scale(n, norm, True)
    theta = 2 * np.pi * ((kk * np.arange(n)[None, :]) % n) / n
    mr, mi = np.zeros((m, n)), np.zeros((m, n))
    mr[:len(kk)], mi[:len(kk)] = w * np.cos(theta), -w * np.sin(theta)
    y = _along(re, last, _const(mr, rd))
    if im is not None:
        y = E.add(y, _along(im, last, _const(mi, rd)))
    return y


OP_RULES = {
    "fft_r2c": _fft_r2c,
    "fft_c2c": _fft_c2c,
    "fft_c2r": _fft_c2r,
    "view_as_complex": _as_complex,
    "view_as_real": _as_real,
    "polar": _polar,
    "complex": _complex,
    "real": _component(0),
    "imag": _component(1),
    "conj": _conj,
    "conj_physical": _conj,
    "resolve_conj": lambda xs, out: Value(xs[0].ssa, True),
}


# --- complex state ------------------------------------------------------------------------------

class SameStorage:
    """A guard: the complex state tensor ``t`` still has the storage array its
    real view (the trace's input) was made from."""

    def __init__(self, t: Tensor):
        self.t, self.arr = t, t._data

    def __call__(self) -> bool:
        return self.t._data is self.arr

    def describe_change(self, old, new) -> str:
        return (f"a complex tensor the trace reads ({self.t.dtype.name}"
                f"{list(self.t.shape)}) has new storage")


def real_view(t: Tensor) -> Tensor:
    """The real ``[..., 2]`` tensor sharing ``t``'s memory that a trace reads
    and writes in place of the complex state tensor ``t`` (one per storage
    array, so every trace of ``t`` names the same tensor)."""
    cached = t.__dict__.get("_traced_real_view")
    if cached is not None and cached[0] is t._data:
        return cached[1]
    v = Tensor._make(_as_real_view(t._data), t.dtype.to_real())
    v._birth = -1          # state that existed before the call
    t.__dict__["_traced_real_view"] = (t._data, v)
    return v



# --- recording (the tracer's hooks call these with its Recording) --------------------------------

def message(op: str, where: str) -> str:
    """Why ``op`` on complex values cannot be compiled (``where``: file:line)."""
    return (f"{where}: {op} cannot be compiled: complex tensors are compiled only through "
            "view_as_complex, view_as_real, polar, complex, real, imag, conj, arithmetic "
            "(+ - * /, exp, abs, ==, !=, where, matmul, sum), movement (reshape, view, "
            f"slicing, indexing, transpose, expand, cat) and torch.fft's transforms; {op} on "
            "complex values (as angle, sgn, ...) is eager only (the IR has no complex type). Move that part out of the "
            "compiled function, or use tracec.compile(fn, fallback=\"eager\").")


def input_value(rec, t: Tensor, loc):
    """A complex tensor's representation when no recorded op made it: a
    constant, or state read (and written back) through ``real_view``."""
    if t._birth == rec.epoch:
        real = real_view(t)
        op = ir.constant(np.ascontiguousarray(real._data), real.dtype, loc=loc)
        rec.block.add_op(op)
        rec.consts.add(id(t))
        rec.env[id(t)] = (t, op.results[0])
        return op.results[0]
    rec.guards.append((SameStorage(t), True))
    ssa = rec.value_of(real_view(t))
    rec.env[id(t)] = (t, ssa)
    return ssa


def view_chain(rec, t: Tensor, v, loc):
    """The representation of ``t``, an alias made in the call, from its base's ``v``."""
    for prim, params, _ in t._view_chain:
        with emitting(rec, loc):
            v = apply_primitive(prim, [Value(v, True)], params, t.dtype).ssa
    rec.env[id(t)] = (t, v)
    return v


def record_primitive(rec, prim, args, params, out: Tensor, where: str, loc):
    """Record a primitive with complex operands or result by its rule."""
    if prim.name not in PRIMITIVE_RULES:
        return rec.fail(message(prim.name, where))
    values = [Value(rec.value_of(a), a.dtype.category == 3) if isinstance(a, Tensor) else a
              for a in args]
    if rec.suspended:
        return None
    try:
        with emitting(rec, loc):
            res = apply_primitive(prim, values, params, out.dtype)
    except Exception as e:  # an operand combination the rule does not cover
        return rec.fail(f"{message(prim.name, where)} ({type(e).__name__}: {e})")
    rec.env[id(out)] = (out, res.ssa)
    return None


#: Ops whose result shares memory with their operand.
_VIEWS = ("view_as_real", "view_as_complex", "real", "imag")
#: Those of them whose result has the representation of their operand.
_SAME_REPR = ("view_as_real", "view_as_complex")


def record_op(rec, name: str, args, out: Tensor, where: str, loc):
    """Record a complex op outside the primitive set (``OP_RULES``)."""
    if name not in OP_RULES:
        return rec.fail(message(f"{name}()", where))
    # tensors become Values; other arguments (an FFT's dims, sizes, norm) pass as they are
    values = [Value(rec.value_of(a), a.dtype.category == 3) if isinstance(a, Tensor) else a
              for a in args]
    if rec.suspended:
        return None
    try:
        with emitting(rec, loc):
            res = apply_op(name, values, out.dtype)
    except NotImplementedError as e:
        return rec.fail(f"{where}: a torch.fft transform over {e} cannot be compiled (its "
                        "DFT matrix needs the length): keep that dimension static "
                        "(tracec.compile(fn, dynamic=False)), or use "
                        "tracec.compile(fn, fallback=\"eager\").")
    rec.env[id(out)] = (out, res.ssa)
    if name in _VIEWS:
        rec.component_views.append(out)
    if name in _SAME_REPR:
        # one representation for both (the real view's layout): an in-place
        # write to either is a write to both (an optimizer's update of a
        # complex parameter through view_as_real)
        rec.same_repr.setdefault(id(out), []).append(args[0])
        rec.same_repr.setdefault(id(args[0]), []).append(out)
    elif name in _VIEWS:
        for t in (args[0], out):   # they share memory
            rec.component_shared[id(t)] = t
    return None
