"""Attribute encodings of primitive parameters, and source locations.

A primitive's Python parameters map to xDSL properties by *kind*:

========  =================================  ==================================
kind      Python value                       property
========  =================================  ==================================
ints      tuple of ints (axes, shape, ...)   ``DenseArrayBase`` of ``i64``
int       int (axis)                         ``IntegerAttr`` of ``i64``
dtype     ``tracec.dtypes.DType``            the element type (``f32``, ``i1``)
scalar    float, int or bool (fill value)    ``FloatAttr`` f64 / ``IntegerAttr``
                                             i64 / ``IntegerAttr`` i1
str       str (a run-time check's message)   ``StringAttr``
========  =================================  ==================================

Invariant: ``decode(kind, encode(kind, v)) == v`` with the same Python type
(a float stays a float, a bool stays a bool, tuples come back as tuples of
``int``), so the IR can hand a primitive exactly the parameters it was
recorded with.  A scalar is kept in the type it was given because a fill
value's type is part of what the user wrote (int64 fills stay exact).

Locations are xDSL's builtin ``FileLineColLoc`` (``loc("f.py":12:4)`` in
text); ``file_loc`` makes one, ``loc_tuple`` reads one back.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    LocationAttr,
    StringAttr,
    UnknownLoc,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute

from tracec.ir import key_texts
from tracec.ir.types import dtype_of_element, element_type

__all__ = [
    "PARAM_KINDS", "encode_param", "decode_param", "file_loc", "to_location",
    "loc_tuple", "format_loc",
]

PARAM_KINDS = ("ints", "int", "dtype", "scalar")

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _as_int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{what}: expected an int, got {v!r}")
    v = int(v)
    if not _I64_MIN <= v <= _I64_MAX:
        raise ValueError(f"{what}: {v} does not fit in int64")
    return v


def encode_scalar(v) -> Attribute:
    """A Python (or NumPy) scalar as a typed attribute that keeps its kind."""
    if isinstance(v, (bool, np.bool_)):
        return IntegerAttr(bool(v), i1)
    if isinstance(v, numbers.Integral):
        return IntegerAttr(_as_int(v, "scalar"), i64)
    if isinstance(v, numbers.Real):
        return FloatAttr(float(v), f64)
    raise TypeError(f"expected a bool, int or float scalar, got {v!r}")


def decode_scalar(a: Attribute):
    """Inverse of ``encode_scalar``."""
    if isinstance(a, FloatAttr):
        return float(a.value.data)
    if isinstance(a, IntegerAttr):
        if a.type == i1:
            return bool(a.value.data)
        return int(a.value.data)
    raise TypeError(f"not a scalar attribute: {a}")


#: Properties made before, by ``_param_key`` (xDSL attributes are immutable
#: and shared freely): making and verifying one costs tens of microseconds,
#: and a trace makes one or more per op, mostly the same few values.
_PARAMS: dict = {}


def _param_key(kind: str, v):
    """A key that identifies ``encode_param(kind, v)``'s result exactly
    (the value's type kept: ``True``, ``1`` and ``1.0`` encode differently,
    and so do ``0.0`` and ``-0.0``), or None for a value not memoized."""
    tv = type(v)
    if tv is int or tv is bool or tv is str:
        return (kind, tv, v)
    if tv is float:
        return (kind, tv, v.hex())
    if tv is tuple and all(type(x) is int for x in v):
        return (kind, tv, v)
    return None


def encode_param(kind: str, v, what: str = "param") -> Attribute:
    """Encode one Python parameter value as the property of its kind."""
    key = _param_key(kind, v)
    if key is None:
        return _encode_param(kind, v, what)
    a = _PARAMS.get(key)
    if a is None:
        a = _encode_param(kind, v, what)
        if len(_PARAMS) > 4096:
            _PARAMS.clear()
        _PARAMS[key] = a
        key_texts.register(a, "P", (key[0], key[1].__name__, key[2]))
    return a


def _encode_param(kind: str, v, what: str) -> Attribute:
    if kind == "ints":
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise TypeError(f"{what}: expected a tuple of ints, got {v!r}")
        return DenseArrayBase.from_list(i64, [_as_int(x, what) for x in v])
    if kind == "int":
        return IntegerAttr(_as_int(v, what), i64)
    if kind == "dtype":
        return element_type(v)
    if kind == "scalar":
        return encode_scalar(v)
    if kind == "str":
        if not isinstance(v, str):
            raise TypeError(f"{what}: expected a str, got {v!r}")
        return StringAttr(v)
    raise ValueError(f"unknown parameter kind {kind!r}")


def decode_param(kind: str, a: Attribute):
    """Decode a property back to the Python value the primitive expects."""
    if kind == "ints":
        return tuple(int(x) for x in a.get_values())
    if kind == "int":
        return int(a.value.data)
    if kind == "dtype":
        return dtype_of_element(a)
    if kind == "scalar":
        return decode_scalar(a)
    if kind == "str":
        return a.data
    raise ValueError(f"unknown parameter kind {kind!r}")


def format_scalar(v) -> str:
    """Text of a scalar that ``parse_scalar_text`` reads back exactly:
    ``true``/``false``, a decimal integer, or a float that always has a
    ``.`` (``1.0``, ``1.0e-05``), ``inf``/``-inf``/``nan``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    s = repr(float(v))
    mant, sep, exp = s.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + sep + exp


# --- locations -----------------------------------------------------------------

#: Locations made before (a trace makes one per op, from a few hundred lines).
_LOCS: dict = {}


def file_loc(filename: str, line: int, col: int = 0) -> FileLineColLoc:
    """``loc("filename":line:col)`` (the same attribute object for the same
    place: attributes are immutable)."""
    key = (filename, line, col)
    loc = _LOCS.get(key)
    if loc is None:
        loc = FileLineColLoc(StringAttr(str(filename)), IntAttr(int(line)), IntAttr(int(col)))
        if type(filename) is str and type(line) is int and type(col) is int:
            if len(_LOCS) > 8192:
                _LOCS.clear()
            _LOCS[key] = loc
            key_texts.register(loc, "L", key)
    return loc


def to_location(loc) -> LocationAttr:
    """Accept None (unknown), a location attribute, or ``(file, line[, col])``."""
    if type(loc) is tuple:     # (the tracer's; before the abstract-class check)
        return file_loc(*loc)
    if loc is None:
        return UnknownLoc()
    if isinstance(loc, Attribute):
        return loc
    return file_loc(*loc)


def loc_tuple(x) -> tuple[str, int, int] | None:
    """``(file, line, col)`` of an op or a location; None when not a file
    location (unknown, or a location kind tracec does not emit)."""
    loc = getattr(x, "location", x)
    if isinstance(loc, FileLineColLoc):
        return (loc.filename.data, loc.line.data, loc.column.data)
    return None


def format_loc(x) -> str:
    """``file:line:col`` for messages, or ``<unknown location>``."""
    t = loc_tuple(x)
    return f"{t[0]}:{t[1]}:{t[2]}" if t else "<unknown location>"
