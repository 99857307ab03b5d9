"""Integers read from tensor data at run time inside ``tracec.compile``
(MoCo's queue pointer: guards.md row 24g).

While a call is recorded, ``int(t)`` or ``t.item()`` of a one-element
integer tensor that existed before the call and is not an argument (a
``queue_ptr`` buffer; or an element of a small one, ``self.ptrs[1]``), read
before the call wrote it, gives a
``RuntimeInt``: its ``value`` is this call's number, its ``tensor`` a 0-d
int64 copy of the buffer made by recorded ops, so every compiled call reads
the number from the buffer (a load in native code) instead of a guard
making one trace per value:

  * ``+ - * // %`` and unary ``-`` with ints, symbolic sizes and other
    ``RuntimeInt``s give ``RuntimeInt``s (recorded int64 tensor arithmetic,
    Python's floor semantics; a result outside int64 at the traced call
    specializes, one that overflows only at a later call wraps as int64
    does); a sum with a constant remembers its base and offset, so the
    length of ``ptr:ptr + B`` is known to be ``B``;
  * ``x[..., ptr:ptr + L, ...]`` (``L`` a number or a symbolic size) and
    ``x[ptr]``, in any dimensions of one index of ints, slices and an
    Ellipsis, read ``L`` (one) elements from a run-time start: the trace
    records a gather at ``ptr + iota(L)`` per such dimension after a
    run-time ``check`` that ``0 <= ptr <= size - L``;
    ``x[..., ptr:ptr + L] = v`` records the same slab written back with
    ``where`` (``tracec.runtime_index``); autograd through both is that of
    ``take``/``index_add``/``where``;
  * written into a tensor (``buf[0] = ptr``, ``fill_(ptr)``,
    ``tensor(ptr)``, an operand of a tensor op) it is its tensor.

The value is never silently frozen: every other use (a comparison,
``bool()``, ``int()``, ``range(ptr)``, a size, a slice whose length is not
fixed, NumPy, formatting, ``isinstance()`` (answered as for an int), a
number kept after the call or returned) *specializes*
the trace on it, as before this module existed: a guard on the entry value
of each buffer it came from (``runtime_reads.Reader.specialize``), a note in
``cache_info()``.  Eager values of the traced call are exact: a dynamic
slice hands the user a real view at this call's offset (its IR value is
the gather), and replaying that view's chain (a write through it, a read
after its base changed: ``view_replayed``) specializes too, so aliasing
stays eager's.

``int()`` must return an exact ``int`` (CPython copies a subclass), so for
``name = int(buf)`` the plain number is returned and the local ``name`` is
rebound to the ``RuntimeInt`` right after the store (a one-frame opcode
trace, ``_rebind_after_store``); ``int(buf)`` used any other way, or while
another tracer (a debugger, coverage) is installed, specializes.

Invariant: outside a recording no live ``RuntimeInt`` exists (``ACTIVE`` is
empty); once the recording ends every ``RuntimeInt`` it made is inert and
computes as its ``value``, and the trace is specialized on any one that
escaped (``runtime_reads.Reader.finish``).
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.symbolic import Sym, hint_of

__all__ = ["RuntimeInt", "ACTIVE", "operand", "view_replayed", "SPECIALIZE_ON_REPLAY",
           "as_tensor"]

#: The ``Reader`` of the recording in progress once it handed out a
#: ``RuntimeInt`` (at most one), else empty: indexing scans a key only then.
ACTIVE: list = []

#: ``id(params) -> (RuntimeInt, ...)``: the view steps (``(prim, params, aval)`` of
#: a ``_view_chain``) of slices made at a run-time offset; replaying one
#: specializes the trace on the offset (``view_replayed``).
SPECIALIZE_ON_REPLAY: dict = {}

_MAX_INT64 = (1 << 63) - 1


class RuntimeInt:
    """An integer the compiled code reads at run time (see the module
    docstring).  ``value``: this call's number; ``tensor``: its 0-d int64
    tracec tensor; ``base``/``offset``: this is ``base + offset`` (``base``
    None: it is its own base); ``sources``: the ``(buffer, entry value,
    where)`` reads it depends on; ``reader``: the recording's ``Reader``, or
    None once inert."""

    __slots__ = ("value", "tensor", "base", "offset", "sources", "reader", "text")

    def __init__(self, value, tensor, sources, reader, text, base=None, offset=0):
        self.value, self.tensor, self.sources, self.reader = value, tensor, sources, reader
        self.text, self.base, self.offset = text, base, offset

    def _live(self) -> bool:
        r = self.reader
        return r is not None and not r.rec.suspended

    def use(self, why: str) -> int:
        """The number, for a use the compiled code cannot read at run time:
        the trace specializes on it."""
        if self._live():
            self.reader.specialize(self, why)
        return self.value

    # --- recorded arithmetic ----------------------------------------------------

    def _arith(self, other, sym, reflected=False):
        if type(other) is RuntimeInt:
            if not (self._live() and other.reader is self.reader):
                return _PY_OPS[sym](*((other.value, self.use(sym))
                                      if reflected else (self.use(sym), other.value)))
            ov, ot = other.value, other.tensor
        elif isinstance(other, (int, np.integer, np.bool_)):     # (a bool is an int)
            ov = ot = int(other)
        elif isinstance(other, Sym):
            ov, ot = hint_of(other), other
            if ov is None:
                return NotImplemented
        elif isinstance(other, (float, complex, np.floating)):
            return self._plain(other, sym, reflected)
        else:
            return NotImplemented      # a Tensor: its own reflected method
        a, b = (ov, self.value) if reflected else (self.value, ov)
        value = _PY_OPS[sym](a, b)     # eager's number first (ZeroDivisionError as Python)
        if not self._live():
            return value
        if not -_MAX_INT64 - 1 <= value <= _MAX_INT64:
            return _PY_OPS[sym](*((ov, self.use(sym)) if reflected else (self.use(sym), ov)))
        ta, tb = (ot, self.tensor) if reflected else (self.tensor, ot)
        tensor = _TENSOR_OPS[sym](ta, tb)
        base, offset = None, 0
        if type(other) is not RuntimeInt and sym in "+-" and not (reflected and sym == "-"):
            base = self.base if self.base is not None else self
            offset = self.offset + (ot if sym == "+" else -ot)
            if isinstance(offset, int) and offset == 0:
                return base
        o = other.text if type(other) is RuntimeInt else ot
        text = f"({o} {sym} {self.text})" if reflected else f"({self.text} {sym} {o})"
        sources = self.sources + (other.sources if type(other) is RuntimeInt else ())
        return self.reader.make(value, tensor, sources, text, base, offset)

    def __add__(self, o): return self._arith(o, "+")
    def __radd__(self, o): return self._arith(o, "+", True)
    def __sub__(self, o): return self._arith(o, "-")
    def __rsub__(self, o): return self._arith(o, "-", True)
    def __mul__(self, o): return self._arith(o, "*")
    def __rmul__(self, o): return self._arith(o, "*", True)
    def __floordiv__(self, o): return self._arith(o, "//")
    def __rfloordiv__(self, o): return self._arith(o, "//", True)
    def __mod__(self, o): return self._arith(o, "%")
    def __rmod__(self, o): return self._arith(o, "%", True)

    def __neg__(self):
        return self._arith(-1, "*")

    def __pos__(self):
        return self

    # --- uses that need the number: specialized ------------------------------------

    @property
    def __class__(self):
        # ``isinstance(ptr, int)`` (the user's, or library code choosing a
        # path for a number) reads ``__class__``: an int, specialized, so
        # every path taken from that answer is right for this trace
        # (``type(ptr)`` still says RuntimeInt: tracec's own checks)
        self.use("a type check (isinstance)")
        return int

    def __getattr__(self, name):
        # int's methods and attributes (bit_length, real, to_bytes)
        if name in RuntimeInt.__slots__ or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.use(f".{name}"), name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.use("NumPy"), dtype)

    def __index__(self): return self.use("used as an index or size (__index__)")
    def __int__(self): return self.use("int()")
    def __float__(self): return float(self.use("float()"))
    def __complex__(self): return complex(self.use("complex()"))
    def __bool__(self): return bool(self.use("bool()"))
    def __hash__(self): return hash(self.use("hash() (a dict key, a set)"))
    def __str__(self): return str(self.use("str()"))
    def __repr__(self): return repr(self.use("repr()"))
    def __format__(self, spec): return format(self.use("formatting"), spec)
    def __round__(self, n=None): return round(self.use("round()"), n)
    def __trunc__(self): return self.use("math.trunc()")
    def __floor__(self): return self.use("math.floor()")
    def __ceil__(self): return self.use("math.ceil()")
    def __abs__(self): return abs(self.use("abs()"))
    def __invert__(self): return ~self.use("~")

    def _compare(self, other, op):
        if type(other) is RuntimeInt:
            other = other.use(f"a comparison ({op})")
        if isinstance(other, Sym):
            other = int(other)
        return _PY_OPS[op](self.use(f"a comparison ({op})"), other)

    def __eq__(self, o): return self._compare(o, "==")
    def __ne__(self, o): return self._compare(o, "!=")
    def __lt__(self, o): return self._compare(o, "<")
    def __le__(self, o): return self._compare(o, "<=")
    def __gt__(self, o): return self._compare(o, ">")
    def __ge__(self, o): return self._compare(o, ">=")

    def _plain(self, o, sym, reflected=False):
        o = o.use(sym) if type(o) is RuntimeInt else o
        v = self.use(sym)
        return _PY_OPS[sym](o, v) if reflected else _PY_OPS[sym](v, o)

    def __truediv__(self, o): return self._plain(o, "/")
    def __rtruediv__(self, o): return self._plain(o, "/", True)
    def __pow__(self, o): return self._plain(o, "**")
    def __rpow__(self, o): return self._plain(o, "**", True)
    def __and__(self, o): return self._plain(o, "&")
    def __rand__(self, o): return self._plain(o, "&", True)
    def __or__(self, o): return self._plain(o, "|")
    def __ror__(self, o): return self._plain(o, "|", True)
    def __xor__(self, o): return self._plain(o, "^")
    def __rxor__(self, o): return self._plain(o, "^", True)
    def __lshift__(self, o): return self._plain(o, "<<")
    def __rlshift__(self, o): return self._plain(o, "<<", True)
    def __rshift__(self, o): return self._plain(o, ">>")
    def __rrshift__(self, o): return self._plain(o, ">>", True)
    def __divmod__(self, o): return self._plain(o, "divmod")
    def __rdivmod__(self, o): return self._plain(o, "divmod", True)


def _floordiv(a, b):
    return a // b


_PY_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "//": _floordiv, "%": lambda a, b: a % b, "/": lambda a, b: a / b,
           "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
           "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
           "divmod": divmod, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
           "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b}


def as_tensor(x, like):
    from tracec import ops
    from tracec.tensor import Tensor
    if isinstance(x, Tensor):
        return x
    # a number or a symbolic size: a 0-d int64 value (a size: read at run time)
    return ops.full((), x, dt.int64, like=like)


def _t_op(name):
    def apply(a, b):
        from tracec.tensor import Tensor
        like = a if isinstance(a, Tensor) else b
        a, b = as_tensor(a, like), as_tensor(b, like)
        return getattr(a, name)(b)
    return apply


_TENSOR_OPS = {"+": _t_op("__add__"), "-": _t_op("__sub__"), "*": _t_op("__mul__"),
               "//": _t_op("__floordiv__"), "%": _t_op("__mod__")}


# --- uses: tensor operands, views (indexing: tracec.runtime_index) ---------------------

def operand(x):
    """``x`` (a ``RuntimeInt``) as a tensor operand: its 0-d int64 tensor
    while recording, else its number."""
    if x._live():
        return x.tensor
    return x.value


def view_replayed(chain) -> None:
    """A view chain is replayed (a write through the view, a read after its
    base changed): its run-time offsets are specialized."""
    for step in chain:
        for ri in SPECIALIZE_ON_REPLAY.get(id(step[1]), ()):
            ri.use("the offset of a view written through, or read after its base changed")
