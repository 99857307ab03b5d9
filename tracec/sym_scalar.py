"""Python numbers a compiled call advances (``self.n_steps += 1``, a
learning rate computed from it), traced as expressions instead of constants.

While ``tracec.compile`` traces a call with lifting (``tracec.lifted_state``),
the int and float values it found changed by the previous call of the same
function (a step counter on a plain object, a global, a closure variable)
hold ``SymScalar`` objects: each carries its value for the eager run of the
traced call (``value``) and a function of the lifted inputs computing it
(``fn(vals)``), so that every later compiled call recomputes it from that
call's numbers:

  * arithmetic (``+ - * / // % **``, ``abs``, ``round``, ``math.floor``...,
    ``math.exp / log / sqrt / cos / sin / tanh`` and NumPy's ufuncs of the
    same names on them) gives another ``SymScalar``;
  * a comparison or ``bool()`` gives a plain bool and records a guard (the
    decision, recomputed at each call; another decision retraces);
  * a use that needs the number itself (``float()``, ``int()``, ``str()``,
    an index, a tensor creation) gives it and records that the trace is
    specialized on it (``Lifting.concrete``): such a trace is refused, as a
    side effect compiled calls would not repeat;
  * mixed with a tensor (``v *= decay``) or read by an optimizer as its
    learning rate, it becomes a 0-d holder tensor that the trace reads as
    state and each compiled call refreshes (``Lifting.holder``).

Invariant: outside a lifted trace no ``SymScalar`` exists (the tracer
replaces each one it can reach by its value when the call ends, and
``Lifting.leaked`` refuses the trace if one escaped elsewhere).
"""
from __future__ import annotations

import math
import operator

__all__ = ["SymScalar", "Lifting", "ACTIVE", "LIFTED", "SnapshotToken", "concrete_operand",
           "patched_math"]

#: The lifting of the trace being recorded (at most one), or None.
ACTIVE: list = [None]


class Lifting:
    """One lifted trace's record: ``inputs`` (labels of the lifted
    numbers, in the order ``fn(vals)`` reads them), ``guards`` (``(fn,
    decision, where)``), ``concrete`` (where a value was made a plain
    number), ``holders`` (``(tensor, fn)``)."""

    def __init__(self, labels, where):
        self.labels = list(labels)
        self.guards: list = []
        self.concrete: list = []
        self.holders: list = []
        self._holder_of: dict = {}
        self.where = where          # () -> (file, line, col) of the user's code
        self.made: list = []        # every SymScalar made (to find leaks)

    def input(self, i: int, value) -> "SymScalar":
        return self.make(value, lambda vals, i=i: vals[i], self.labels[i])

    def make(self, value, fn, text) -> "SymScalar":
        s = SymScalar(value, fn, text, self)
        self.made.append(s)
        return s

    def decide(self, fn, decision):
        self.guards.append((fn, decision, self.where()))
        return decision

    def make_concrete(self, s: "SymScalar", why: str):
        self.concrete.append((s.text, why, self.where()))
        return s.value

    def holder(self, s: "SymScalar"):
        """A 0-d tensor holding ``s`` (float64, or int64 for an int), read by
        the trace as state and refreshed by every compiled call."""
        h = self._holder_of.get(id(s))
        if h is None:
            from tracec import creation
            from tracec import dtypes as dt
            from tracec.tensor import made_before_call
            d = dt.int64 if isinstance(s.value, int) else dt.float64
            h = made_before_call(creation.zeros((), dtype=d))
            h._data[()] = s.value
            self.holders.append((h, s.fn))
            self._holder_of[id(s)] = h
        return h


def _fn_of(x):
    return x.fn if type(x) is SymScalar else (lambda vals, c=x: c)


def _text(x) -> str:
    return x.text if type(x) is SymScalar else repr(x)


def _arith(op, sym):
    def f(self, other):
        if type(other) is not SymScalar and not isinstance(other, (int, float)):
            return NotImplemented
        a, b = (self, other) if not sym else (other, self)
        value = op(a.value if type(a) is SymScalar else a,
                   b.value if type(b) is SymScalar else b)
        if not isinstance(value, (int, float)):
            return value
        fa, fb = _fn_of(a), _fn_of(b)
        return self.lift.make(value, lambda vals: op(fa(vals), fb(vals)),
                              f"({_text(a)} {_SYMBOL[op]} {_text(b)})")
    return f


def _unary(op, name):
    def f(self):
        fn = self.fn
        return self.lift.make(op(self.value), lambda vals: op(fn(vals)), f"{name}({self.text})")
    return f


def _compare(op):
    def f(self, other):
        if type(other) is not SymScalar and not isinstance(other, (int, float)):
            return NotImplemented
        fa, fb = self.fn, _fn_of(other)
        d = op(self.value, other.value if type(other) is SymScalar else other)
        return self.lift.decide(lambda vals: op(fa(vals), fb(vals)), d)
    return f


def _concrete(why, conv):
    def f(self, *a):
        return conv(self.lift.make_concrete(self, why), *a)
    return f


_SYMBOL = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**"}


class SymScalar:
    """A lifted Python number (see the module docstring)."""

    __slots__ = ("value", "fn", "text", "lift")

    def __init__(self, value, fn, text, lift):
        self.value, self.fn, self.text, self.lift = value, fn, text, lift

    __add__, __radd__ = _arith(operator.add, False), _arith(operator.add, True)
    __sub__, __rsub__ = _arith(operator.sub, False), _arith(operator.sub, True)
    __mul__, __rmul__ = _arith(operator.mul, False), _arith(operator.mul, True)
    __truediv__, __rtruediv__ = _arith(operator.truediv, False), _arith(operator.truediv, True)
    __floordiv__, __rfloordiv__ = (_arith(operator.floordiv, False),
                                   _arith(operator.floordiv, True))
    __mod__, __rmod__ = _arith(operator.mod, False), _arith(operator.mod, True)
    __pow__, __rpow__ = _arith(operator.pow, False), _arith(operator.pow, True)
    __neg__ = _unary(operator.neg, "-")
    __pos__ = _unary(operator.pos, "+")
    __abs__ = _unary(abs, "abs")
    __floor__ = _unary(math.floor, "floor")
    __ceil__ = _unary(math.ceil, "ceil")
    __trunc__ = _unary(math.trunc, "trunc")
    # NumPy's ufuncs call these methods on object operands (np.exp(n)).
    exp = _unary(math.exp, "exp")
    log = _unary(math.log, "log")
    sqrt = _unary(math.sqrt, "sqrt")
    cos = _unary(math.cos, "cos")
    sin = _unary(math.sin, "sin")
    tanh = _unary(math.tanh, "tanh")

    def __round__(self, ndigits=None):
        fn = self.fn
        return self.lift.make(round(self.value, ndigits), lambda vals: round(fn(vals), ndigits),
                              f"round({self.text})")

    __lt__, __le__ = _compare(operator.lt), _compare(operator.le)
    __gt__, __ge__ = _compare(operator.gt), _compare(operator.ge)
    __eq__, __ne__ = _compare(operator.eq), _compare(operator.ne)

    def __bool__(self):
        fn = self.fn
        return self.lift.decide(lambda vals: bool(fn(vals)), bool(self.value))

    __float__ = _concrete("float()", float)
    __int__ = _concrete("int()", int)
    __index__ = _concrete("an index or int()", operator.index)
    __complex__ = _concrete("complex()", complex)
    __str__ = _concrete("str()", str)
    __format__ = _concrete("a format string", format)
    __hash__ = _concrete("hashing", hash)

    def __repr__(self):
        return repr(self.lift.make_concrete(self, "repr()"))

    def __getattr__(self, name):
        # int / float methods and attributes (is_integer, real, bit_length):
        # those of the number itself, which the trace then specializes on.
        if name in SymScalar.__slots__ or name.startswith("__"):
            raise AttributeError(name)
        if not hasattr(self.value, name):
            # (as the number would: ``getattr(lr, "dtype", None)`` is None)
            raise AttributeError(f"'{type(self.value).__name__}' object has no attribute "
                                 f"'{name}'")
        return getattr(self.lift.make_concrete(self, f".{name}"), name)


class SnapshotToken:
    """Stands for a value a guard's snapshot must not compare exactly (a
    lifted number, a replayed tensor attribute): equal to what ``matches``
    accepts."""

    def __init__(self, matches, text: str):
        self.matches, self.text = matches, text

    def __eq__(self, other):
        return other is self or self.matches(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __repr__(self):
        return self.text


def _is_number(other) -> bool:
    """A number, bare or as a snapshot's ``(type, value)`` entry."""
    if type(other) is tuple and len(other) == 2 and type(other[0]) is type:
        other = other[1]
    return isinstance(other, (int, float, SymScalar)) and not isinstance(other, bool) \
        or type(other).__module__ == "numpy" and hasattr(other, "dtype") and \
        other.dtype.kind in "iuf" and getattr(other, "ndim", 1) == 0


#: A lifted number in a guard's snapshot (a module's attributes, the
#: snapshot of what a function reads); its ``LiftedGuard`` checks the value.
LIFTED = SnapshotToken(_is_number, "<lifted number>")


def concrete_operand(x):
    """``x``, or its number if a ``SymScalar`` (the trace specializes on it)."""
    if type(x) is SymScalar:
        return x.lift.make_concrete(x, "a tensor operation")
    return x


_MATH = ("exp", "log", "sqrt", "cos", "sin", "tanh", "floor", "ceil", "trunc", "log2",
         "log10", "exp2", "atan", "fabs", "pow", "isfinite", "isnan", "isinf")


def _math_wrapper(name, orig):
    def f(*args):
        if not any(type(a) is SymScalar for a in args):
            return orig(*args)
        s = next(a for a in args if type(a) is SymScalar)
        fns = [_fn_of(a) for a in args]
        value = orig(*[a.value if type(a) is SymScalar else a for a in args])
        if isinstance(value, bool):
            return s.lift.decide(lambda vals: orig(*[g(vals) for g in fns]), value)
        return s.lift.make(value, lambda vals: orig(*[g(vals) for g in fns]),
                           f"math.{name}({', '.join(_text(a) for a in args)})")
    f.__name__ = name
    return f


class patched_math:
    """While a lifted trace runs, ``math.exp`` and friends (looked up on the
    ``math`` module at call time, as ``math.exp(-x / tau)``) keep a
    ``SymScalar`` symbolic; restored on exit."""

    def __enter__(self):
        self.saved = {n: getattr(math, n) for n in _MATH if hasattr(math, n)}
        for n, orig in self.saved.items():
            setattr(math, n, _math_wrapper(n, orig))
        return self

    def __exit__(self, *exc):
        for n, orig in self.saved.items():
            setattr(math, n, orig)
        return False
