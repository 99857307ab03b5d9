"""tracec's dtypes and PyTorch's type-promotion rules.

This module sits below every other layer (the IR, the primitives and the
front end all import it, it imports only NumPy).  Invariant: every tracec
dtype maps to exactly one NumPy storage dtype; ``bfloat16`` is stored as
float32 rounded to bfloat16 precision after each op ("compute may upcast",
API.md §1), because NumPy has no bfloat16.
"""
from __future__ import annotations

import numpy as np

# The module name reprs use: "tracec", or "torch" once
# ``tracec.install_as_torch()`` made tracec answer to that name (so a script
# prints ``torch.float32`` and ``torch.Size([2])`` as under PyTorch).
PUBLIC_NAME = ["tracec"]

__all__ = [
    "DType", "float32", "float64", "float16", "bfloat16", "int32", "int64",
    "bool_", "float", "double", "half", "long", "int", "all_dtypes",
    "from_numpy_dtype", "promote_types", "can_cast", "result_type", "to_dtype",
    "get_default_dtype", "set_default_dtype",
]


class DType:
    """A tensor element type: a name, a NumPy storage dtype and a category.

    Categories order the promotion lattice: bool < int < float.
    """

    __slots__ = ("name", "np", "category", "itemsize", "short")

    def __init__(self, name: str, np_dtype, category: int, short: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = 2 if name in ("float16", "bfloat16") else self.np.itemsize
        self.short = short

    @property
    def is_floating_point(self) -> bool:
        return self.category == 2

    @property
    def is_signed(self) -> bool:
        return self.category != 0

    def __repr__(self) -> str:
        return f"{PUBLIC_NAME[0]}.{self.name}"

    def __reduce__(self):
        return (to_dtype, (self.name,))


float32 = DType("float32", np.float32, 2, "f32")
float64 = DType("float64", np.float64, 2, "f64")
float16 = DType("float16", np.float16, 2, "f16")
bfloat16 = DType("bfloat16", np.float32, 2, "bf16")
int32 = DType("int32", np.int32, 1, "i32")
int64 = DType("int64", np.int64, 1, "i64")
bool_ = DType("bool", np.bool_, 0, "i1")

# PyTorch's aliases.
float = float32  # noqa: A001 - PyTorch's public name
double = float64
half = float16
long = int64
int = int32  # noqa: A001 - PyTorch's public name

all_dtypes = (float32, float64, float16, bfloat16, int32, int64, bool_)
_BY_NAME = {d.name: d for d in all_dtypes}
_BY_NAME.update({d.short: d for d in all_dtypes})
_BY_NAME.update({"float": float32, "double": float64, "half": float16,
                 "long": int64, "int": int32, "bool_": bool_})
_BY_NP = {np.dtype(np.float32): float32, np.dtype(np.float64): float64,
          np.dtype(np.float16): float16, np.dtype(np.int32): int32,
          np.dtype(np.int64): int64, np.dtype(np.bool_): bool_,
          np.dtype(np.int8): int32, np.dtype(np.int16): int32,
          np.dtype(np.uint8): int64, np.dtype(np.uint16): int32,
          np.dtype(np.uint32): int64}

_default_float = [float32]


def get_default_dtype() -> DType:
    return _default_float[0]


def set_default_dtype(d) -> None:
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating point types are allowed, got {d}")
    _default_float[0] = d


def from_numpy_dtype(npd) -> DType:
    npd = np.dtype(npd)
    try:
        return _BY_NP[npd]
    except KeyError:
        raise TypeError(f"tracec has no dtype for NumPy dtype {npd}") from None


def to_dtype(d) -> DType:
    """Accept a DType, its name, a NumPy dtype or a Python type."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str):
        if d in _BY_NAME:
            return _BY_NAME[d]
        raise TypeError(f"unknown dtype {d!r}")
    if d is builtins_float:
        return get_default_dtype()
    if d is builtins_int:
        return int64
    if d is builtins_bool:
        return bool_
    try:
        return from_numpy_dtype(d)
    except TypeError:
        raise TypeError(f"not a dtype: {d!r}") from None


import builtins as _b  # noqa: E402  (after the aliases that shadow float/int)

builtins_float, builtins_int, builtins_bool = _b.float, _b.int, _b.bool


def promote_types(a: DType, b: DType) -> DType:
    """PyTorch's promote_types for two dtypes."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 2:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    return a if a.itemsize >= b.itemsize else b


def can_cast(src: DType, dst: DType) -> bool:
    """PyTorch's ``can_cast`` for in-place results: never down a category
    (float to int, int to bool)."""
    return src.category <= dst.category


def result_type(dims: list, zero_dims: list, scalars: list) -> DType:
    """PyTorch's result type: dimensioned tensors dominate 0-dim tensors,
    which dominate Python scalars, except when a lower tier is of a higher
    category (bool < int < float), as in ``int_tensor * 2.5 -> float32``."""
    def fold(ds):
        out = None
        for d in ds:
            out = d if out is None else promote_types(out, d)
        return out

    cat_dims = max((d.category for d in dims), default=-1)
    cat_zero = max((d.category for d in zero_dims), default=-1)
    cat_scal = max(scalars, default=-1)
    top = max(cat_dims, cat_zero, cat_scal)
    if cat_dims == top:
        return fold(dims)
    if cat_zero == top:
        return fold(zero_dims)
    return (bool_, int64, get_default_dtype())[top]


def round_bfloat16(a: np.ndarray) -> np.ndarray:
    """Round float32 storage to bfloat16 precision (round to nearest even)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(a), a, out)
