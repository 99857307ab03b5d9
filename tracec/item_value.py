"""``loss.item()`` inside ``tracec.compile``: a number the call returns.

A training step commonly ends ``return loss.item()`` (or returns a dict of
such numbers).  While tracing, ``item()`` called by the user's code on a
recorded one-element floating tensor gives an ``ItemValue`` instead of a
float: the tracer makes that tensor an output, and where the function
returns the ``ItemValue`` (in any container it returns), the first call
returns its float and every compiled call the float of that call's output
(``("number", k)`` in the trace's template).

A comparison with a Python int or float or another such number
(Sinkhorn's ``if err.item() < thresh: break``) is a decision on tensor data,
as ``bool(err < thresh)`` is: the tracer compares the tensor in float64 (as
Python compares the doubles) and speculates on the result (guards.md row
24e), and the comparison gives the plain bool.

``+``, ``-``, ``*``, ``/`` and unary ``-`` / ``+`` between such numbers and
Python ints and floats (the chatbot tutorial's ``print_losses.append(
mask_loss.item() * nTotal)`` ... ``return sum(print_losses) / n_totals``)
give a new ``ItemValue`` whose tensor the tracer computes in float64 from
the others (``derive``): the same IEEE double operations Python does, so
compiled calls return the very float eager calls do.

``math.ceil`` / ``math.floor`` give the plain int, speculated likewise by
the two comparisons that pin it.

Any other use while recording (``float()``, formatting, an
operand of a tensor op, ``math.exp``, ``//``, ``**``) would freeze the first
call's value into the trace or into Python state: it is refused with a
``TraceError`` naming the line of the use and of the ``item()`` (with
``fallback="eager"``: the call finishes eagerly, with plain floats).  The
class is deliberately not a ``float`` subclass: NumPy and ``math`` read a
float subclass's value without calling any of its methods, so such uses
could not be seen.

Invariant: once the traced call has returned (``Recording.items`` are made
inert), an ``ItemValue`` that escaped elsewhere (an attribute, which the
state guard then refuses as a change every call) computes as its float.
"""
from __future__ import annotations

import math
import operator

__all__ = ["ItemValue", "DrawValue", "plain", "DERIVABLE", "COMPARISONS"]


class ItemValue:
    """``value``: the float of this (first, eager) call; ``source``: the
    tensor whose item() it is; ``where``: the user's (file, line, col) of
    the item() call; ``refuse(item_value, what)``: raises while recording,
    None once the call has returned; ``derive(item_value, other, op,
    reflected)``: the ``ItemValue`` of ``op`` applied to it and ``other``
    (a number, another ``ItemValue`` or None for a unary op), computed by
    recorded tensor ops, or None where it cannot be."""

    __slots__ = ("value", "source", "where", "refuse", "derive")

    def __init__(self, value: float, source, where, refuse, derive=None):
        self.value, self.source, self.where, self.refuse = value, source, where, refuse
        self.derive = derive

    def use(self, what: str) -> float:
        """The float, for a use other than returning it (refused while
        recording)."""
        if self.refuse is not None:
            self.refuse(self, what)
        return self.value

    def __repr__(self):
        return repr(self.use("repr()"))

    def __getattr__(self, name):
        # float methods and attributes (is_integer, real, hex)
        if name in ItemValue.__slots__ or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.use(f".{name}"), name)


def _operand(x, what):
    return x.use(what) if type(x) is ItemValue else x


def _derived(self, other, op, reflected):
    """The derived ``ItemValue`` of ``op``, or None (then refused as a use)."""
    if self.refuse is None or self.derive is None:
        return None
    return self.derive(self, other, op, reflected)


def _binary(op, what, reflected=False, derivable=False):
    def f(self, other):
        if derivable:
            r = _derived(self, other, op, reflected)
            if r is not None:
                return r
        a = self.use(what)
        b = _operand(other, what)
        return op(b, a) if reflected else op(a, b)
    return f


def _unary(op, what, derivable=False):
    def f(self, *args):
        if derivable:
            r = _derived(self, None, op, False)
            if r is not None:
                return r
        return op(self.use(what), *args)
    return f


#: The operations an ``ItemValue`` derives another from (``derive``).
DERIVABLE = frozenset(("add", "sub", "mul", "truediv", "neg", "pos"))
#: The comparisons ``derive`` decides (a bool, not an ``ItemValue``).
COMPARISONS = frozenset((operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
                         operator.ne))

for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("divmod", divmod),
                   ("matmul", operator.matmul)):
    setattr(ItemValue, f"__{_name}__", _binary(_op, "arithmetic", derivable=_name in DERIVABLE))
    setattr(ItemValue, f"__r{_name}__", _binary(_op, "arithmetic", reflected=True,
                                                derivable=_name in DERIVABLE))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                   ("ge", operator.ge), ("eq", operator.eq), ("ne", operator.ne)):
    # derived: the plain bool, a decision the trace speculates on
    setattr(ItemValue, f"__{_name}__", _binary(_op, "a comparison", derivable=True))
for _name, _op, _what in (("neg", operator.neg, "arithmetic"), ("pos", operator.pos, "arithmetic"),
                          ("abs", abs, "abs()"), ("bool", bool, "a truth test"),
                          ("float", float, "float()"), ("int", int, "int()"),
                          ("index", operator.index, "an index"),
                          ("complex", complex, "complex()"), ("round", round, "round()"),
                          ("trunc", int, "math.trunc()"),
                          ("str", str, "str()"), ("format", format, "a format string"),
                          ("hash", hash, "hashing")):
    setattr(ItemValue, f"__{_name}__", _unary(_op, _what, derivable=_name in DERIVABLE))
del _name, _op


def _rounding(op, what, lower_gt: bool):
    """``math.ceil`` / ``math.floor`` of the number: the int Python gives,
    speculated on the tensor by the two comparisons that pin it (for ceil,
    ``r - 1 < x <= r``; for floor, ``r <= x < r + 1``), each a decision the
    trace guards, as ``err.item() < thresh`` is; so a grid size from
    ``torch.ceil(...).item()`` (torchdiffeq's fixed-step grid) is one trace
    per size.  Refused as a use where the comparisons cannot be derived."""
    def f(self):
        if self.refuse is None or self.derive is None:
            return op(self.use(what))
        r = op(self.value)
        if lower_gt:
            pinned = (_derived(self, r - 1, operator.gt, False), _derived(self, r, operator.le, False))
        else:
            pinned = (_derived(self, r, operator.ge, False), _derived(self, r + 1, operator.lt, False))
        if None in pinned:
            return op(self.use(what))
        return r
    return f


ItemValue.__ceil__ = _rounding(math.ceil, "math.ceil()", True)
ItemValue.__floor__ = _rounding(math.floor, "math.floor()", False)


class DrawValue(ItemValue):
    """``random.random()``'s number inside a traced call: a comparison with
    a Python int or float gives the plain bool and tells ``decide(draw, op,
    other, result)`` (the trace records the decision; each compiled call
    draws its own numbers and checks it, ``compiled_entry.Entry.run``);
    every other use is refused (``refuse``), as an ``ItemValue``'s.
    ``index``: which of the call's draws it is."""

    __slots__ = ("index", "decide")

    def __init__(self, value: float, where, refuse, index: int, decide):
        super().__init__(value, None, where, refuse)
        self.index, self.decide = index, decide


def _decision(op):
    def f(self, other):
        if self.refuse is not None and type(other) in (int, float):
            r = op(self.value, other)
            self.decide(self, op, other, r)
            return r
        return op(self.use("a comparison"), _operand(other, "a comparison"))
    return f


for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                   ("ge", operator.ge)):
    setattr(DrawValue, f"__{_name}__", _decision(_op))
del _name, _op


def plain(x):
    """``x`` with every ``ItemValue`` in it (and in the tuples, lists,
    dicts, namedtuples and dataclasses it holds) replaced by its float;
    containers holding none are returned as they are."""
    if type(x) is ItemValue or type(x) is DrawValue:
        return x.value
    if isinstance(x, tuple):
        items = [plain(v) for v in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if isinstance(x, list):
        for i, v in enumerate(x):
            x[i] = plain(v)
        return x
    if isinstance(x, dict):
        for k, v in x.items():
            x[k] = plain(v)
        return x
    import dataclasses
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            p = plain(v)
            if p is not v:
                object.__setattr__(x, f.name, p)
    return x
