"""Per-element semantics of the elementwise primitives, as llvm-dialect ops.

Each tracec dtype has a *storage* type (in memory) and a *compute* type (in
registers): f32/f64 and the integers are themselves (LLVM's integers are
signless: the dtype says whether a comparison, a widening, a conversion to
or from float or a max/min is signed or unsigned); ``bool`` is stored as ``i8``
(NumPy's layout) and computed as ``i1``; ``float16`` is stored as ``half``
and computed in ``f32``; ``bfloat16`` is stored and computed as ``f32``.
Invariant: a value in registers is always exactly representable in its
dtype: results of float16/bfloat16 ops are rounded after every op, as NumPy
(float16) and the interpreter (bfloat16) do.

``apply`` mirrors ``PRIMITIVES[name].impl`` element by element; the few
places where it cannot match NumPy bit for bit (libm vs NumPy's own SIMD
routines, float->int casts of nan/inf, signed zeros in maximum/minimum) are
within the tolerances the tests use.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.symbolic import Sym
from tracec.backends.cpu import mathfns, mathfns64
from tracec.backends.cpu.builder import F16, F32, F64, I1, I8, I32, I64, FuncBuilder, is_float
from xdsl.dialects.builtin import i16 as I16

__all__ = ["storage_type", "compute_type", "itemsize", "load", "store", "constant",
           "apply", "cast", "LoweringError", "ELEMENTWISE"]


class LoweringError(RuntimeError):
    """The cpu backend cannot lower an op; the message names it and where."""


_INTS = {"int32": I32, "int64": I64, "int16": I16, "int8": I8, "uint8": I8, "uint16": I16,
         "uint32": I32, "uint64": I64}
_STORAGE = {"float32": F32, "float64": F64, "float16": F16, "bfloat16": F32, "bool": I8, **_INTS}
_COMPUTE = {"float32": F32, "float64": F64, "float16": F32, "bfloat16": F32, "bool": I1, **_INTS}
_SIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 4, "bool": 1,
         **{n: dt.to_dtype(n).itemsize for n in _INTS}}


def int_pred(d: dt.DType, pred: str) -> str:
    """The icmp predicate ``slt``/``ult``... for an ordering of dtype ``d``
    (unsigned for uint dtypes and bool)."""
    return ("s" if d.is_signed else "u") + pred

ELEMENTWISE = frozenset(
    "neg exp expm1 log log1p sqrt rsqrt sin cos tanh logistic abs sign erf logical_not stop_gradient add "
    "sub mul div "
    "pow maximum minimum fmod eq ne lt le gt ge logical_and logical_or bitwise_and bitwise_or bitwise_xor "
    "where cast check".split())


def storage_type(d: dt.DType):
    return _STORAGE[d.name]


def compute_type(d: dt.DType):
    return _COMPUTE[d.name]


def itemsize(d: dt.DType) -> int:
    return _SIZE[d.name]


# --- memory ------------------------------------------------------------------

def load(fb: FuncBuilder, ptr, idx, d: dt.DType):
    """Element ``idx`` of ``ptr`` (a buffer of dtype ``d``) in compute type."""
    st = _STORAGE[d.name]
    v = fb.load(fb.gep(ptr, idx, st), st, _SIZE[d.name])
    if d is dt.bool_:
        return fb.icmp("ne", v, fb.const(0, I8))
    if d is dt.float16:
        return fb.cast("fpext", v, F32)
    return v


def store(fb: FuncBuilder, v, ptr, idx, d: dt.DType) -> None:
    st = _STORAGE[d.name]
    if d is dt.bool_:
        v = fb.cast("zext", v, I8)
    elif d is dt.float16:
        v = fb.cast("fptrunc", v, F16)
    fb.store(v, fb.gep(ptr, idx, st), _SIZE[d.name])


def constant(fb: FuncBuilder, value, d: dt.DType):
    """A Python scalar as a compute-type constant of dtype ``d`` (rounded to
    ``d`` as NumPy would store it)."""
    import numpy as np
    if type(value) is Sym:      # a size known at run time (a mean's count)
        v = fb.size(value)
        if d is dt.bool_:
            return fb.icmp("ne", v, fb.i64(0))
        ct = _COMPUTE[d.name]
        if d.category != 1:
            return fb.cast("sitofp", v, ct)
        return v if ct == I64 else fb.cast("trunc", v, ct)
    if d is dt.bool_:
        return fb.const(bool(value), I1)
    if d.category == 1:   # fb.const wraps to the width, as the eager weak scalar does
        return fb.const(int(value), _COMPUTE[d.name])
    if d is dt.bfloat16:
        v = float(dt.round_bfloat16(np.array([value], np.float32))[0])
    elif d is dt.float16:      # (through float32, as PyTorch's Half)
        v = float(dt.to_float16(value))
    else:
        v = float(np.array(value).astype(d.np))
    return fb.const(v, _COMPUTE[d.name])


def round_to(fb: FuncBuilder, v, d: dt.DType):
    """Round a compute-type value to dtype ``d`` (float16/bfloat16 only)."""
    if d is dt.float16:
        return fb.cast("fpext", fb.cast("fptrunc", v, F16), F32)
    if d is dt.bfloat16:
        bits = fb.cast("bitcast", v, I32)
        lsb = fb.ibin("and", fb.ibin("lshr", bits, fb.i32(16)), fb.i32(1))
        r = fb.ibin("add", bits, fb.ibin("add", lsb, fb.i32(0x7FFF)))
        r = fb.cast("bitcast", fb.ibin("and", r, fb.i32(-65536)), F32)
        return fb.select(fb.fcmp("uno", v, v), v, r)
    return v


# --- casts ----------------------------------------------------------------------

def _unsigned_to_float(fb: FuncBuilder, v, ft):
    """``uitofp`` (xDSL's llvm dialect lacks it): narrower than 64 bits,
    zero-extended values are exact as signed i64; a uint64 with its top bit
    set is halved (keeping the lost bit sticky, so it rounds once) and doubled."""
    from tracec.backends.cpu.builder import bits_of
    if bits_of(v.type) < 64:
        return fb.cast("sitofp", fb.cast("zext", v, I64), ft)
    one = fb.i64(1)
    half = fb.ibin("or", fb.ibin("lshr", v, one), fb.ibin("and", v, one))
    hf = fb.cast("sitofp", half, ft)
    return fb.select(fb.icmp("slt", v, fb.i64(0)), fb.fbin("fadd", hf, hf),
                     fb.cast("sitofp", v, ft))


def to_bool(fb: FuncBuilder, v, d: dt.DType):
    if d is dt.bool_:
        return v
    if d.is_floating_point:
        return fb.fcmp("une", v, fb.const(0.0, v.type))
    return fb.icmp("ne", v, fb.const(0, v.type))


def cast(fb: FuncBuilder, v, src: dt.DType, dst: dt.DType):
    """``x.astype(dst)`` (then bfloat16 rounding), as ``cast``'s impl."""
    if src is dst:
        return v
    ct = _COMPUTE[dst.name]
    if dst is dt.bool_:
        return to_bool(fb, v, src)
    if src is dt.bool_:
        if dst.is_floating_point:
            return fb.select(v, fb.const(1.0, ct), fb.const(0.0, ct))
        return fb.cast("zext", v, ct)
    if dst.is_floating_point and not src.is_floating_point and not src.is_signed:
        return cast(fb, _unsigned_to_float(fb, v, F64 if dst is dt.float64 else F32),
                    dt.float64 if dst is dt.float64 else dt.float32, dst)
    if dst.is_floating_point:
        # (float64 and integers reach float16 through float32, as PyTorch's
        # c10::Half is built from a float: rounded twice)
        if src.is_floating_point:
            if src is dt.float64:
                v = fb.cast("fptrunc", v, F32)
            elif dst is dt.float64:
                v = fb.cast("fpext", v, F64)
        else:
            v = fb.cast("sitofp", v, F32 if dst is dt.float16 else ct)
        return round_to(fb, v, dst)
    # to an integer
    if src.is_floating_point:
        # NumPy truncates toward zero; out-of-range and nan saturate here
        # (NumPy's result there is unspecified).  Narrow types go through
        # int64 and keep the low bits, as PyTorch (and the eager cast) do.
        if dst.itemsize < 4:
            return fb.cast("trunc", fb.intr("llvm.fptosi.sat", [v], I64, overload=[I64, v.type]),
                           ct)
        sat = "llvm.fptosi.sat" if dst.is_signed else "llvm.fptoui.sat"
        return fb.intr(sat, [v], ct, overload=[ct, v.type])
    from tracec.backends.cpu.builder import bits_of
    if bits_of(ct) > bits_of(v.type):
        return fb.cast("sext" if src.is_signed else "zext", v, ct)
    if bits_of(ct) == bits_of(v.type):   # int8 <-> uint8: the same bits
        return v
    return fb.cast("trunc", v, ct)


# --- unary -------------------------------------------------------------------------

def _fintr(fb, name, x):
    return fb.intr(name, [x], x.type, overload=[x.type])


def _exp(fb, x):
    if x.type == F32:
        return mathfns.expf(fb, x)
    return mathfns64.exp64(fb, x) if fb.mb.device_math else _fintr(fb, "llvm.exp", x)


def _log(fb, x):
    if x.type == F32:
        return mathfns.logf(fb, x)
    return mathfns64.log64(fb, x) if fb.mb.device_math else _fintr(fb, "llvm.log", x)


def _in_f64(fb, fn, *xs):
    """``fn`` of float64 arguments at ``xs``' type (float32 through float64)."""
    t = xs[0].type
    if t == F64:
        return fn(fb, *xs)
    return fb.cast("fptrunc", fn(fb, *[fb.cast("fpext", x, F64) for x in xs]), t)


def _expm1(fb, x):
    """Kahan's ``expm1``: ``(u - 1) * x / log(u)`` with ``u = exp(x)``; the
    rounding of ``u`` cancels, so small ``x`` keep full relative precision
    (``exp(x) - 1`` gives 0 for ``|x|`` under half an ulp of 1).  ``u == 1``
    gives ``x`` itself (``-0.0`` stays ``-0.0``), ``u - 1 == -1`` gives -1
    and ``u == inf`` gives inf; NaN goes through the formula."""
    t = x.type
    one = fb.const(1.0, t)
    u = _exp(fb, x)
    um1 = fb.fbin("fsub", u, one)
    # (u - 1) * (x / log(u)): the quotient is near 1, so the product cannot
    # overflow before the division does (x = 88.7 in float32).
    r = fb.fbin("fmul", um1, fb.fbin("fdiv", x, _log(fb, u)))
    r = fb.select(fb.fcmp("oeq", u, fb.const(float("inf"), t)), u, r)
    r = fb.select(fb.fcmp("oeq", um1, fb.const(-1.0, t)), um1, r)
    return fb.select(fb.fcmp("oeq", u, one), x, r)


def _log1p(fb, x):
    """Kahan's ``log1p``: ``log(u) * x / (u - 1)`` with ``u = 1 + x``;
    ``u == 1`` gives ``x`` itself and ``u == inf`` gives inf; ``x < -1``
    gives NaN and ``x == -1`` gives -inf through ``log``."""
    t = x.type
    one = fb.const(1.0, t)
    u = fb.fbin("fadd", x, one)
    um1 = fb.fbin("fsub", u, one)
    lu = _log(fb, u)
    r = fb.fbin("fmul", lu, fb.fbin("fdiv", x, um1))   # x / (u - 1) is near 1
    r = fb.select(fb.fcmp("oeq", u, fb.const(float("inf"), t)), u, r)
    r = fb.select(fb.fcmp("oeq", u, fb.const(0.0, t)), lu, r)
    return fb.select(fb.fcmp("oeq", um1, fb.const(0.0, t)), x, r)


def _unary(fb: FuncBuilder, name: str, x, d: dt.DType):
    t = x.type
    if name == "stop_gradient":   # (canonicalization removes it; a forward identity)
        return x
    if name == "logical_not":
        return fb.ibin("xor", to_bool(fb, x, d), fb.const(True, I1))
    if d is dt.bool_:
        if name == "abs":
            return x
        raise TypeError(f"{name} is not defined for bool tensors")
    if d.category == 1:
        zero = fb.const(0, t)
        if name == "neg":
            return fb.ibin("sub", zero, x)
        if not d.is_signed and name == "abs":
            return x
        if not d.is_signed and name == "sign":
            return fb.cast("zext", fb.icmp("ne", x, zero), t)
        if name == "abs":
            return fb.select(fb.icmp("slt", x, zero), fb.ibin("sub", zero, x), x)
        if name == "sign":
            return fb.select(fb.icmp("sgt", x, zero), fb.const(1, t),
                             fb.select(fb.icmp("slt", x, zero), fb.const(-1, t), zero))
        raise TypeError(f"{name} needs a floating point operand")
    one = fb.const(1.0, t)
    if name == "neg":
        return fb.fneg(x)
    if name == "abs":
        return _fintr(fb, "llvm.fabs", x)
    if name == "sign":
        zero = fb.const(0.0, t)
        # PyTorch's: 0 at NaN and +0.0 at -0.0
        return fb.select(fb.fcmp("ogt", x, zero), one,
                         fb.select(fb.fcmp("olt", x, zero), fb.const(-1.0, t), zero))
    if name == "exp":
        return _exp(fb, x)
    if name == "log":
        return _log(fb, x)
    if name == "expm1":
        return _expm1(fb, x)
    if name == "log1p":
        return _log1p(fb, x)
    if name == "sqrt":
        return _fintr(fb, "llvm.sqrt", x)
    if name == "rsqrt":
        return fb.fbin("fdiv", one, _fintr(fb, "llvm.sqrt", x))
    if name in ("sin", "cos"):
        if fb.mb.device_math:
            return _in_f64(fb, mathfns64.sin64 if name == "sin" else mathfns64.cos64, x)
        return _fintr(fb, f"llvm.{name}", x)
    if name == "tanh":
        if t == F32:
            return mathfns.tanhf(fb, x)
        if fb.mb.device_math:
            # tanh|x| = -e / (e + 2), e = expm1(-2|x|): no cancellation near 0
            ax = _fintr(fb, "llvm.fabs", x)
            e = _expm1(fb, fb.fbin("fmul", ax, fb.const(-2.0, t)))
            r = fb.fneg(fb.fbin("fdiv", e, fb.fbin("fadd", e, fb.const(2.0, t))))
            return fb.intr("llvm.copysign", [r, x], t, overload=[t])
        return _fintr(fb, "llvm.tanh", x)
    if name == "logistic":
        # NumPy impl: x >= 0: 1/(1+exp(-x)); else exp(x)/(1+exp(x)).
        e = _exp(fb, fb.fneg(_fintr(fb, "llvm.fabs", x)))
        den = fb.fbin("fadd", one, e)
        return fb.select(fb.fcmp("oge", x, fb.const(0.0, t)), fb.fbin("fdiv", one, den),
                         fb.fbin("fdiv", e, den))
    if name == "erf":
        if t == F32:
            return mathfns.erff(fb, x)
        if fb.mb.device_math:
            return mathfns64.erf64(fb, x)
        fb.mb.declare("erf", [F64], F64)
        return fb.call("erf", [x], F64)
    raise TypeError(f"no scalar lowering for {name}")


# --- binary ----------------------------------------------------------------------------

_FCMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_ICMP = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_UCMP = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def _int_pow(fb: FuncBuilder, x, y, signed: bool = True):
    """Integer ``x ** y`` by squaring; a negative exponent truncates as in
    PyTorch (1 for a base of 1, -1 or 1 for -1 by the exponent's parity,
    else 0), never an error."""
    t = x.type
    zero, one = fb.const(0, t), fb.const(1, t)
    e0 = fb.select(fb.icmp("slt", y, zero), zero, y) if signed else y

    def body(r, b, e):
        bit = fb.icmp("ne", fb.ibin("and", e, one), zero)
        return [fb.select(bit, fb.ibin("mul", r, b), r), fb.ibin("mul", b, b),
                fb.ibin("lshr", e, one)]
    # e >= 0 and shifts right logically: "ne 0" ends it for unsigned e too.
    r, _, _ = fb.while_loop(lambda r, b, e: fb.icmp("ne", e, zero), body, [one, x, e0])
    if not signed:
        return r
    minus_one = fb.const(-1, t)
    odd = fb.icmp("ne", fb.ibin("and", y, one), zero)
    trunc = fb.select(fb.icmp("eq", x, one), one,
                      fb.select(fb.icmp("eq", x, minus_one), fb.select(odd, minus_one, one), zero))
    return fb.select(fb.icmp("slt", y, zero), trunc, r)


def _binary(fb: FuncBuilder, name: str, x, y, d: dt.DType):
    t = x.type
    if name in _FCMP:
        if d is dt.bool_:
            return fb.icmp(_UCMP[name], x, y)
        if d.is_floating_point:
            return fb.fcmp(_FCMP[name], x, y)
        return fb.icmp((_ICMP if d.is_signed else _UCMP)[name], x, y)
    if name == "logical_and":
        return fb.ibin("and", to_bool(fb, x, d), to_bool(fb, y, d))
    if name == "logical_or":
        return fb.ibin("or", to_bool(fb, x, d), to_bool(fb, y, d))
    if d is dt.bool_:
        if name in ("add", "maximum"):
            return fb.ibin("or", x, y)
        if name in ("mul", "minimum"):
            return fb.ibin("and", x, y)
        if name == "div":
            q = fb.fbin("fdiv", cast(fb, x, d, dt.float64), cast(fb, y, d, dt.float64))
            return to_bool(fb, q, dt.float64)
        raise TypeError(f"{name} is not defined for bool tensors")
    if d.category == 1:
        if name in ("add", "sub", "mul"):
            return fb.ibin(name, x, y)
        if name == "div":
            q = fb.fbin("fdiv", cast(fb, x, d, dt.float64), cast(fb, y, d, dt.float64))
            return cast(fb, q, dt.float64, d)
        if name == "maximum":
            return fb.select(fb.icmp(int_pred(d, "gt"), x, y), x, y)
        if name == "minimum":
            return fb.select(fb.icmp(int_pred(d, "lt"), x, y), x, y)
        if name == "pow":
            return _int_pow(fb, x, y, d.is_signed)
        if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            return fb.ibin(name[len("bitwise_"):], x, y)
        raise TypeError(f"no scalar lowering for {name}")
    if name in ("add", "sub", "mul", "div"):
        return fb.fbin("f" + name, x, y)
    if name == "maximum":
        return fb.intr("llvm.maximum", [x, y], t, overload=[t])
    if name == "minimum":
        return fb.intr("llvm.minimum", [x, y], t, overload=[t])
    if name == "pow":
        if fb.mb.device_math:
            return _in_f64(fb, mathfns64.pow64, x, y)
        return fb.intr("llvm.pow", [x, y], t, overload=[t])
    if name == "fmod":
        return fb.fbin("frem", x, y)      # LLVM's frem is C's fmod
    raise TypeError(f"no scalar lowering for {name}")


def pow_by_constant(fb: FuncBuilder, x, exponent: float, exact: bool = False):
    """``x ** c`` for the constant exponents NumPy's own ``power`` computes
    exactly (by multiplication, or ``sqrt``), and, ``exact`` (a float32 /
    float64 result), the ones eager computes as PyTorch does where
    ``np.power`` would not (``elementwise._EXACT_POW``); None for other
    exponents."""
    t = x.type
    if exponent == 1.0:
        return x
    if exponent == 2.0:
        return fb.fbin("fmul", x, x)
    if exponent == 0.0:
        return fb.const(1.0, t)
    if exponent == -1.0:
        return fb.fbin("fdiv", fb.const(1.0, t), x)
    if exponent == 0.5:
        return _fintr(fb, "llvm.sqrt", x)
    if exponent == 3.0 and exact:
        return fb.fbin("fmul", fb.fbin("fmul", x, x), x)
    if exponent == -0.5 and exact:
        return fb.fbin("fdiv", fb.const(1.0, t), _fintr(fb, "llvm.sqrt", x))
    return None


def apply(fb: FuncBuilder, name: str, params: dict, args: list, in_dtypes: list,
          out_dtype: dt.DType):
    """The compute-type result of primitive ``name`` on compute-type ``args``
    (none fails at run time: integer ``pow`` truncates negative exponents)."""
    if name == "cast":
        return cast(fb, args[0], in_dtypes[0], out_dtype)
    if name == "where":
        return fb.select(args[0], args[1], args[2])
    d = in_dtypes[0]
    if len(args) == 1:
        r = _unary(fb, name, args[0], d)
    else:
        r = _binary(fb, name, args[0], args[1], d)
    return round_to(fb, r, out_dtype) if out_dtype in (dt.float16, dt.bfloat16) else r


def accumulate(fb: FuncBuilder, kind: str, acc, x, d: dt.DType):
    """One step of a reduction.  ``reassoc`` is set on float sums only: it
    lets LLVM split the accumulation into vector lanes (NumPy's own
    pairwise sum reassociates as well); max/min are exact in any order."""
    if kind == "sum":
        if is_float(acc.type):
            return fb.fbin("fadd", acc, x, reassoc=True)
        return fb.ibin("add", acc, x)
    if d is dt.bool_:
        return fb.ibin("or" if kind == "max" else "and", acc, x)
    if is_float(acc.type):
        return fb.intr("llvm.maximum" if kind == "max" else "llvm.minimum", [acc, x],
                       acc.type, overload=[acc.type])
    pred = int_pred(d, "gt" if kind == "max" else "lt")
    return fb.select(fb.icmp(pred, acc, x), acc, x)


def identity(fb: FuncBuilder, kind: str, d: dt.DType):
    """The identity of a reduction in compute type."""
    t = _COMPUTE[d.name]
    if kind == "sum":
        return fb.const(0.0, t) if d.is_floating_point else fb.const(0, t)
    if d is dt.bool_:
        return fb.const(kind == "min", I1)
    if d.is_floating_point:
        return fb.const(float("-inf") if kind == "max" else float("inf"), t)
    info = dt.iinfo(d)
    return fb.const(info.min if kind == "max" else info.max, t)
