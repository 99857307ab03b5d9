"""PyTorch's integer and bit functions: ``bitwise_and/or/xor/not``,
``bitwise_left_shift/right_shift``, ``gcd lcm logical_xor``, and the
operators ``& | ^ ~ << >>`` on integer and bool tensors.

Invariant: on bool tensors every function is a composite of the logical
primitives, and ``not`` and the shifts are integer arithmetic composites
(``~a == -a - 1``, ``a << b == a * 2**b``, ``a >> b == floor(a / 2**b)``, or
the sign fill for a count past the value bits),
so they trace; ``and/or/xor`` of integer tensors are primitives
(``ops.bitwise_*``), so they trace too (HashNeRF's spatial hash);
``gcd lcm`` read their operands' values (``concrete``): eager only, a
``TraceError`` naming the function inside ``tracec.compile``.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import _operand, promote
from tracec.math_extra import floor_divide
from tracec.tensor import Tensor, concrete

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
           "bitwise_right_shift", "gcd", "lcm", "logical_xor"]

_TORCH = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}


def _ints(name, a, b):
    (a, b), d = promote(name, a, b)
    if d.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_TORCH[d.name]}'")
    if not isinstance(a, Tensor):
        a = ops.full(tuple(b.shape), _wrapped(a, d), d, like=b)
    if not isinstance(b, Tensor):
        b = ops.full(tuple(a.shape), _wrapped(b, d), d, like=a)
    return a, b, d


def _wrapped(v, d):
    """A Python int as the integer dtype holds it, two's complement
    (``uint8_image & -32`` reads -32 as 224, as PyTorch's C++ cast does)."""
    if isinstance(v, bool) or not isinstance(v, int) or d is dt.bool_:
        return v
    bits = 8 * np.dtype(d.np).itemsize
    v %= 1 << bits
    return v - (1 << bits) if np.issubdtype(d.np, np.signedinteger) and v >= 1 << (bits - 1) \
        else v


def _eager(name, f, a, b, d):
    why = f"{name}() of integer tensors (eager only)"
    r = f(concrete(a, why), concrete(b, why))
    return Tensor._make(np.array(r, dtype=d.np, order="C"), d)


def _bitwise(name, logical, prim):
    def fn(input, other):  # noqa: A002
        a, b, d = _ints(name, input, other)
        if d is dt.bool_:
            return logical(a, b)
        return prim(a, b)
    fn.__name__ = name
    return fn


bitwise_and = _bitwise("bitwise_and", ops.logical_and, ops.bitwise_and)
bitwise_or = _bitwise("bitwise_or", ops.logical_or, ops.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", ops.ne, ops.bitwise_xor)


def bitwise_not(input):  # noqa: A002
    x = _operand(input, "bitwise_not")
    if not isinstance(x, Tensor):
        raise TypeError("bitwise_not(): argument 'input' must be Tensor")
    if x.dtype.is_floating_point:
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for "
                                  f"'{_TORCH[x.dtype.name]}'")
    if x.dtype is dt.bool_:
        return ops.logical_not(x)
    return ops.sub(ops.neg(x), 1)


def bitwise_left_shift(input, other):  # noqa: A002
    a, b, d = _ints("bitwise_left_shift", input, other)
    if d is dt.bool_:
        raise NotImplementedError("\"lshift_cpu\" not implemented for 'Bool'")
    return ops.mul(a, ops.pow_(ops.full(tuple(b.shape), 2, d, like=b), b))


def bitwise_right_shift(input, other):  # noqa: A002
    a, b, d = _ints("bitwise_right_shift", input, other)
    if d is dt.bool_:
        raise NotImplementedError("\"rshift_cpu\" not implemented for 'Bool'")
    # PyTorch's arithmetic shift: a count past the value bits (or negative)
    # gives the sign fill, -1 or 0; 2 ** count would wrap (int8 2**7 is
    # -128, 2**8 is 0) there, so only counts below that reach the division.
    signed = d is not dt.uint8
    top = 8 * d.itemsize - 1 if signed else 8 * d.itemsize
    ok = ops.logical_and(ops.ge(b, ops.full((), 0, d, like=b)),
                         ops.lt(b, ops.full((), top, d, like=b)))
    count = ops.where(ok, b, ops.full((), 0, d, like=b))
    q = floor_divide(a, ops.pow_(ops.full(tuple(b.shape), 2, d, like=b), count))
    zero = ops.full((), 0, d, like=a)
    fill = ops.where(ops.lt(a, zero), ops.full((), -1, d, like=a), zero) if signed else zero
    return ops.where(ok, q, fill)


def gcd(input, other):  # noqa: A002
    a, b, d = _ints("gcd", input, other)
    return _eager("gcd", np.gcd, a, b, d)


def lcm(input, other):  # noqa: A002
    a, b, d = _ints("lcm", input, other)
    return _eager("lcm", np.lcm, a, b, d)


def logical_xor(input, other):  # noqa: A002
    def as_bool(v):
        v = _operand(v, "logical_xor")
        return ops.ne(v, 0) if isinstance(v, Tensor) and v.dtype is not dt.bool_ else v
    return ops.ne(as_bool(input), as_bool(other))


def _op(fn, reflected=False):
    def op(self, other):
        if not isinstance(other, (Tensor, int, bool, np.integer, np.bool_)):
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    return op


Tensor.__and__ = _op(bitwise_and)
Tensor.__rand__ = _op(bitwise_and, True)
Tensor.__or__ = _op(bitwise_or)
Tensor.__ror__ = _op(bitwise_or, True)
Tensor.__xor__ = _op(bitwise_xor)
Tensor.__rxor__ = _op(bitwise_xor, True)


def _invert(self):
    if self.dtype.is_floating_point or self.dtype.is_complex:   # (torch's Python operator)
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return bitwise_not(self)


Tensor.__invert__ = _invert
Tensor.__lshift__ = _op(bitwise_left_shift)
Tensor.__rlshift__ = _op(bitwise_left_shift, True)
Tensor.__rshift__ = _op(bitwise_right_shift)
Tensor.__rrshift__ = _op(bitwise_right_shift, True)
