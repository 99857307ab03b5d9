"""Tensor types of the tracec dialect: xDSL's builtin ``tensor<..>`` with a
shape and one of tracec's element types.

Invariant: every value in tracec IR has a ``TensorType`` whose element type
is one of ``f32 f64 f16 bf16 i64 i32 i16 i8 ui8 ui16 ui32 ui64 i1`` (one per
``tracec.dtypes`` dtype: signless integers are the signed dtypes, MLIR's
unsigned ``uiN`` the unsigned ones, ``i1`` is ``bool``) and whose shape is either fully
static with no encoding, or has *symbolic* dimensions: those are MLIR's
``?`` and the encoding is an array with every dimension's size as text
(``tensor<?x784xf32, ["B", "784"]>``; see ``tracec.symbolic``), so dumps
and errors say ``B``.  ``tensor_type`` / ``dtype_of`` / ``shape_of``
convert between this and tracec's (shape, DType) view, where a symbolic
dimension is a ``Sym``.
"""
from __future__ import annotations

from typing import Iterable

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    IntegerType,
    NoneAttr,
    Signedness,
    StringAttr,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

from tracec import dtypes as dt
from tracec.ir import key_texts
from tracec.symbolic import Sym, parse

__all__ = [
    "ELEMENT_TYPES", "element_type", "dtype_of_element", "tensor_type",
    "dtype_of", "shape_of", "is_tensor_type", "is_symbolic_type", "format_type",
]

_BY_DTYPE: dict[str, Attribute] = {
    "float32": f32, "float64": f64, "float16": f16, "bfloat16": bf16,
    "int32": i32, "int64": i64, "int16": i16, "int8": i8, "bool": i1,
    **{f"uint{n}": IntegerType(n, Signedness.UNSIGNED) for n in (8, 16, 32, 64)},
}
_BY_ELEMENT: dict[Attribute, dt.DType] = {
    _BY_DTYPE[d.name]: d for d in dt.all_dtypes
}

#: The element types a tracec tensor may have.
ELEMENT_TYPES: tuple[Attribute, ...] = tuple(_BY_ELEMENT)


def element_type(dtype) -> Attribute:
    """The builtin element type (``f32``, ``i1``, ...) of a tracec dtype.

    Accepts anything ``tracec.dtypes.to_dtype`` accepts ("float32", "f32",
    a DType, a NumPy dtype)."""
    return _BY_DTYPE[dt.to_dtype(dtype).name]


def dtype_of_element(elt: Attribute) -> dt.DType:
    """The tracec dtype of a builtin element type; TypeError for others."""
    try:
        return _BY_ELEMENT[elt]
    except (KeyError, TypeError):
        raise TypeError(f"{elt} is not a tracec element type "
                        f"(expected one of {' '.join(d.short for d in dt.all_dtypes)})"
                        ) from None


def tensor_type(shape: Iterable, dtype) -> TensorType:
    """``tensor<shape x elt>`` for a shape (ints, or ``Sym`` for symbolic
    dimensions) and a tracec dtype."""
    shape = tuple(shape)
    if any(isinstance(d, Sym) for d in shape):
        dims = [DYNAMIC_INDEX if isinstance(d, Sym) else int(d) for d in shape]
        if any(d < 0 and d != DYNAMIC_INDEX for d in dims):
            raise ValueError(f"tensor sizes are non-negative, got {shape}")
        return TensorType(element_type(dtype), dims,
                          ArrayAttr([StringAttr(str(d)) for d in shape]))
    shape = tuple(int(d) for d in shape)
    elt = element_type(dtype)
    key = (shape, elt)
    t = _STATIC_TYPES.get(key)
    if t is None:
        if any(d < 0 for d in shape):
            raise ValueError(f"tensor shapes are static and non-negative, got {shape}")
        if len(_STATIC_TYPES) > 4096:
            _STATIC_TYPES.clear()
        t = _STATIC_TYPES[key] = TensorType(elt, shape)
        key_texts.register(t, "T", (shape, _BY_ELEMENT[elt].name))
    return t


# Static tensor types made before, shared (xDSL attributes are immutable):
# making and verifying one costs ~0.1 ms, and a trace makes one per value.
_STATIC_TYPES: dict = {}


def is_tensor_type(t: Attribute) -> bool:
    """True for a tensor type with a tracec element type whose shape is
    static, or symbolic as the module docstring says."""
    if not (isinstance(t, TensorType) and t.element_type in _BY_ELEMENT):
        return False
    if isinstance(t.encoding, NoneAttr):
        return all(d >= 0 for d in t.get_shape())
    try:
        dims = _symbolic_shape(t)
    except (TypeError, ValueError):
        return False
    return all((isinstance(s, Sym) and d == DYNAMIC_INDEX) or (s == d and d >= 0)
               for s, d in zip(dims, t.get_shape()))


def is_symbolic_type(t: Attribute) -> bool:
    """True for a tensor type with a symbolic dimension."""
    t = getattr(t, "type", t)
    return isinstance(t, TensorType) and not isinstance(t.encoding, NoneAttr)


def _symbolic_shape(t: TensorType) -> tuple:
    enc = t.encoding
    if not isinstance(enc, ArrayAttr) or len(enc.data) != len(t.get_shape()) or \
            not all(isinstance(a, StringAttr) for a in enc.data):
        raise TypeError(f"{t}: the encoding must name every dimension's size")
    return tuple(parse(a.data) for a in enc.data)


def _check(t: Attribute) -> TensorType:
    if not isinstance(t, TensorType):
        raise TypeError(f"expected a tensor type, got {t}")
    return t


def dtype_of(t: Attribute) -> dt.DType:
    """The tracec dtype of a tensor type (or of a value's ``.type``)."""
    t = getattr(t, "type", t)
    return dtype_of_element(_check(t).element_type)


def shape_of(t: Attribute) -> tuple:
    """The shape of a tensor type (or of a value's ``.type``): ints, and a
    ``Sym`` for each symbolic dimension."""
    t = getattr(t, "type", t)
    hit = _SHAPES.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    shape = tuple(t.get_shape()) if isinstance(_check(t).encoding, NoneAttr) \
        else _symbolic_shape(t)
    if len(_SHAPES) >= 8192:
        _SHAPES.clear()
    _SHAPES[id(t)] = (t, shape)
    return shape


# id(type) -> (type, its shape): the passes and the lowering ask a few
# hundred types for their shapes ~100,000 times on a training step.  A type
# is immutable, and the entry holds it, so its id is not reused meanwhile.
_SHAPES: dict = {}


def format_type(t: Attribute) -> str:
    """A short human form, ``f32[4,8]``, for error messages."""
    try:
        return f"{dtype_of(t).short}[{','.join(map(str, shape_of(t)))}]"
    except TypeError:
        return str(t)
