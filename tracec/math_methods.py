"""Tensor methods and in-place forms (``x.atan()``, ``x.atan_()``) of the
functions in ``math_extra``, ``math_trig``, ``math_special`` and ``math_int``, and the
in-place forms PyTorch has of the older math functions (``abs_ cos_ eq_``...).

Invariant: binds only functions defined elsewhere; every in-place form is
``methods._inplace`` of its function (leaf, version-counter and dtype rules
live there: an in-place op whose result cannot be cast to the tensor's dtype
raises, as PyTorch's does).
"""
from __future__ import annotations

import numpy as np

from tracec import functions as F
from tracec import math_extra as M
from tracec import math_igamma as G
from tracec import math_int as I
from tracec import math_special as S
from tracec import math_trig as T
from tracec.methods import _inplace, _inplace_operator, defers_to_numpy, numpy_operator
from tracec.tensor import RECORDERS, Tensor

# name -> function, for the names PyTorch has both as ``x.name()`` and ``x.name_()``.
_WITH_INPLACE = {
    "acos": T.acos, "arccos": T.acos, "asin": T.asin, "arcsin": T.asin, "atan": T.atan,
    "arctan": T.atan, "acosh": T.acosh, "arccosh": T.acosh, "asinh": T.asinh,
    "arcsinh": T.asinh, "atanh": T.atanh, "arctanh": T.atanh, "atan2": T.atan2,
    "arctan2": T.atan2, "sinh": T.sinh, "cosh": T.cosh, "tan": T.tan, "hypot": T.hypot,
    "floor": M.floor, "ceil": M.ceil, "round": M.round, "trunc": M.trunc, "fix": M.trunc,
    "frac": M.frac, "log2": M.log2, "log10": M.log10, "exp2": M.exp2, "log1p": M.log1p,
    "expm1": M.expm1, "fmod": M.fmod, "remainder": M.remainder,
    "floor_divide": M.floor_divide, "copysign": M.copysign, "heaviside": M.heaviside,
    "xlogy": M.xlogy, "logit": M.logit, "sinc": T.sinc, "deg2rad": T.deg2rad,
    "rad2deg": T.rad2deg, "nan_to_num": M.nan_to_num, "float_power": M.float_power,
    "lerp": M.lerp, "addcmul": M.addcmul, "addcdiv": M.addcdiv, "sgn": M.sgn,
    "ldexp": M.ldexp, "nextafter": M.nextafter, "div": M.div, "divide": M.div,
    "lgamma": S.lgamma, "digamma": S.digamma, "erfc": S.erfc, "erfinv": S.erfinv,
    "i0": S.i0, "mvlgamma": S.mvlgamma,
    "bitwise_and": I.bitwise_and, "bitwise_or": I.bitwise_or, "bitwise_xor": I.bitwise_xor,
    "bitwise_not": I.bitwise_not, "bitwise_left_shift": I.bitwise_left_shift,
    "bitwise_right_shift": I.bitwise_right_shift, "gcd": I.gcd, "lcm": I.lcm,
    "logical_xor": I.logical_xor, "igamma": G.igamma, "igammac": G.igammac,
}

_METHOD_ONLY = {
    "angle": M.angle, "conj": M.conj, "conj_physical": M.conj_physical,
    "resolve_conj": M.resolve_conj, "resolve_neg": M.resolve_neg, "is_conj": M.is_conj,
    "is_neg": M.is_neg, "where": lambda self, condition, other: F.where(condition, self, other),
    "logaddexp": M.logaddexp, "logaddexp2": M.logaddexp2, "fmax": M.fmax, "fmin": M.fmin,
    "signbit": M.signbit, "positive": M.positive, "isclose": M.isclose, "isreal": M.isreal,
    "frexp": M.frexp, "greater": F.gt, "greater_equal": F.ge, "less": F.lt,
    "less_equal": F.le, "not_equal": F.ne,
}

# The in-place forms PyTorch has of functions defined before this module.
_OLDER_INPLACE = {
    "abs_": F.abs, "absolute_": F.abs, "cos_": F.cos, "sin_": F.sin, "log_": F.log,
    "sign_": F.sign, "rsqrt_": F.rsqrt, "reciprocal_": F.reciprocal, "square_": F.square,
    "erf_": F.erf, "negative_": F.neg, "true_divide_": F.div, "multiply_": F.mul,
    "subtract_": F.sub, "eq_": F.eq, "ne_": F.ne, "lt_": F.lt, "le_": F.le, "gt_": F.gt,
    "ge_": F.ge, "greater_": F.gt, "greater_equal_": F.ge, "less_": F.lt,
    "less_equal_": F.le, "not_equal_": F.ne, "logical_and_": F.logical_and,
    "logical_or_": F.logical_or, "logical_not_": F.logical_not,
}


def _polygamma(self, n):
    return S.polygamma(n, self)


for _name, _fn in list(_WITH_INPLACE.items()) + list(_METHOD_ONLY.items()):
    setattr(Tensor, _name, _fn)
for _name, _fn in _WITH_INPLACE.items():
    setattr(Tensor, _name + "_", _inplace(_name + "_", _fn))
for _name, _fn in _OLDER_INPLACE.items():
    setattr(Tensor, _name, _inplace(_name, _fn))
Tensor.polygamma = _polygamma
Tensor.polygamma_ = _inplace("polygamma_", _polygamma)


def _operator(fn, ufunc, reflected=False):
    """``fn`` as an operator; a NumPy array operand is NumPy's (as
    PyTorch's; tracec.methods.defers_to_numpy / numpy_operator)."""
    def op(self, other):
        if defers_to_numpy(other):
            if RECORDERS and not reflected:
                return numpy_operator(ufunc, fn, self, other)
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    return op


Tensor.__floordiv__ = _operator(M.floor_divide, np.floor_divide)
Tensor.__rfloordiv__ = _operator(M.floor_divide, np.floor_divide, True)
Tensor.__ifloordiv__ = _inplace_operator("floor_divide_", M.floor_divide)
Tensor.__mod__ = _operator(M.remainder, np.remainder)
Tensor.__rmod__ = _operator(M.remainder, np.remainder, True)
Tensor.__imod__ = _inplace_operator("remainder_", M.remainder)
# (without these Python rebinds ``v &= m`` to ``v & m``: a view's base unchanged)
Tensor.__iand__ = _inplace_operator("bitwise_and_", I.bitwise_and)
Tensor.__ior__ = _inplace_operator("bitwise_or_", I.bitwise_or)
Tensor.__ixor__ = _inplace_operator("bitwise_xor_", I.bitwise_xor)
Tensor.__ilshift__ = _inplace_operator("bitwise_left_shift_", I.bitwise_left_shift)
Tensor.__irshift__ = _inplace_operator("bitwise_right_shift_", I.bitwise_right_shift)
Tensor.__pos__ = M.positive
# PyTorch's real/imag are attributes; a real tensor's real part is itself.
Tensor.real = property(M.real)
Tensor.imag = property(M.imag)
Tensor.conj_physical_ = _inplace("conj_physical_", M.conj_physical)




def _top_level_inplace(name):
    def fn(input, *args, **kwargs):  # noqa: A002
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"``torch.{name}(input, ...)``: ``input.{name}(...)``."
    return fn


#: PyTorch's top-level in-place functions (``torch.abs_(x)``) of the math ops.
TOP_LEVEL_INPLACE = {n: _top_level_inplace(n) for n in (
    "abs_ acos_ acosh_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ "
    "atanh_ ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ erf_ erfc_ exp2_ exp_ "
    "expm1_ fix_ floor_ frac_ gcd_ i0_ lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ "
    "nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ round_ rsqrt_ sigmoid_ sin_ sinc_ "
    "sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_ addmv_ conj_physical_").split()}
