"""The primitive registry: what a primitive is and how it is applied.

A primitive owns, in one place (API.md "one definition per primitive"):
  * ``dtype_rule`` and ``shape_rule``: abstract evaluation on (shape, dtype);
  * ``impl``: its NumPy implementation (eager CPU and the interpreter);
  * ``vjp``: its vector-Jacobian product, written with primitives only, so
    the same rule runs on eager tensors (the tape) and on IR values (the
    autodiff pass);
  * ``save``: which primal values the VJP reads (so eager keeps no more),
    as indices or as a function ``save(operands, needs=None)`` returning
    them, where ``needs[i]`` says whether operand i's cotangent is wanted
    (None: all are); as PyTorch, the tape keeps ``w`` of ``x @ w`` only if
    ``x`` needs a gradient.

Applying a primitive (``Primitive.bind``) dispatches on the type of its
operands: each value type (the eager ``Tensor``, the autodiff pass's IR
values) implements ``_bind_primitive(prim, args, params)``.  Python scalars
are allowed as operands of elementwise primitives and are weakly typed: they
take the dtype of the tensor operands.  A VJP receives such an operand as
the scalar itself (it has no gradient: the VJP may return None for it), and
each value operand as the value if ``save`` lists it, else as its ``Aval``;
a cotangent whose formula reads an unsaved operand was not wanted, and the
VJP returns None for it (the autodiff pass passes every operand as a value).
"""
from __future__ import annotations

from typing import Callable, Sequence

from tracec import dtypes as dt

__all__ = ["Aval", "Primitive", "PRIMITIVES", "ShapeError", "broadcast_shapes",
           "normalize_axis", "is_value"]


_new_object = object.__new__


class ShapeError(RuntimeError):
    """A shape or dtype rule refused its operands.  Named as PyTorch's error
    is (``type(e).__name__`` and a traceback's last line read
    ``RuntimeError``); tracec's code catches it by this class."""

    def __reduce__(self):
        # (pickled as what it is named: a RuntimeError in another process)
        return RuntimeError, self.args


ShapeError.__name__ = ShapeError.__qualname__ = "RuntimeError"
ShapeError.__module__ = "builtins"


class Aval:
    """An abstract value: a static shape and a dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: dt.DType):
        self.shape = tuple(shape)
        self.dtype = dtype

    @staticmethod
    def of(shape: tuple, dtype: dt.DType) -> "Aval":
        """``Aval(shape, dtype)`` for a shape that is already a tuple (an
        array's): the eager tape makes one per unsaved operand."""
        a = _new_object(Aval)
        a.shape = shape
        a.dtype = dtype
        return a

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __eq__(self, other):
        return isinstance(other, Aval) and self.shape == other.shape and self.dtype is other.dtype

    def __hash__(self):
        return hash((self.shape, self.dtype.name))

    def __repr__(self):
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"


PRIMITIVES: dict[str, "Primitive"] = {}


# type -> is_value's answer: hasattr raises and catches inside for scalars,
# and backward nodes ask once per operand of every recorded op.
_VALUE_TYPES: dict = {}


def is_value(x) -> bool:
    """True for anything a primitive can be bound to (not a Python scalar)."""
    t = type(x)
    v = _VALUE_TYPES.get(t)
    if v is None:
        v = _VALUE_TYPES[t] = hasattr(t, "_bind_primitive")
    return v


class Primitive:
    """One primitive operation; see the module docstring for the contract.

    ``kind`` groups primitives for the passes: "elementwise", "reduce",
    "movement", "index", "matmul", "creation", "random".
    """

    def __init__(self, name: str, *, kind: str, impl: Callable,
                 shape_rule: Callable, dtype_rule: Callable,
                 vjp: Callable | None, save: Sequence[int] | Callable = (),
                 save_out: bool | Callable = False, nondiff_argnums: Sequence[int] = (),
                 variadic: bool = False):
        if name in PRIMITIVES:
            raise ValueError(f"primitive {name} defined twice")
        self.name = name
        self.kind = kind
        self.impl = impl
        self.shape_rule = shape_rule
        self.dtype_rule = dtype_rule
        self.vjp = vjp
        # Indices of the operands the VJP reads, or a function of the operands
        # and of which cotangents are wanted giving them (``x * 2`` need not
        # keep ``x``; ``x @ w`` keeps ``w`` only if ``x`` needs a gradient).
        self.save = save if callable(save) else tuple(save)
        # Whether the VJP reads the result: True, or a function of the
        # operands (values, Python scalars; or a freed node's avals, a saved
        # value's as None) saying so (``x ** 2`` does not keep its result,
        # ``x ** y`` does).
        self.save_out = save_out
        # Params only the eager impl and the VJP read, which the IR op does
        # not carry (the tracer drops them; the lowering decides alike)
        self.eager_params: frozenset = frozenset()
        self.nondiff_argnums = frozenset(nondiff_argnums)
        self.variadic = variadic
        PRIMITIVES[name] = self

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None

    def abstract_eval(self, *avals, **params) -> Aval:
        """Shape and dtype of the result for operands of these avals."""
        return Aval(self.shape_rule(*[a.shape for a in avals], **params),
                    self.dtype_rule(*[a.dtype for a in avals], **params))

    def bind(self, *args, like=None, **params):
        """Apply the primitive to values (or, with no value operand, in the
        context of ``like``)."""
        for a in args:
            binder = getattr(type(a), "_bind_primitive", None)
            if binder is not None:
                return binder(self, args, params)
        if like is not None:
            return type(like)._bind_primitive(self, args, params)
        raise TypeError(f"{self.name}: no tensor operand among {args!r}")

    __call__ = bind

    def __repr__(self):
        return f"Primitive({self.name})"


def broadcast_shapes(*shapes: tuple) -> tuple:
    """NumPy broadcasting; raises ShapeError naming every shape."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            j = i - ndim + len(s)
            if j < 0:
                continue
            d = s[j]
            if d != 1:
                if size != 1 and size != d:
                    both = " and ".join(str(tuple(s)) for s in shapes)
                    if len(shapes) == 2:
                        # PyTorch's sentence, word for word (programs
                        # print it), for the last dimension that differs
                        # (its check runs from the trailing end); both
                        # shapes in a note, which a traceback shows
                        k, da, db = next(
                            (k, da, db) for k in reversed(range(ndim))
                            for da, db in [(_size_at(shapes[0], k, ndim),
                                            _size_at(shapes[1], k, ndim))]
                            if da != db and da != 1 and db != 1)
                        err = ShapeError(
                            f"The size of tensor a ({da}) must match the size of tensor b "
                            f"({db}) at non-singleton dimension {k}")
                        err.add_note(f"(broadcasting shapes {both})")
                        raise err
                    # three or more (where's condition, input and other):
                    # PyTorch broadcasts them in turn, the shape so far
                    # against the next, and names the pair that fails
                    acc = shapes[0]
                    for s in shapes[1:]:
                        acc = broadcast_shapes(acc, s)
                    raise ShapeError(f"shapes {both} cannot be broadcast together (size "
                                     f"{size} vs {d} at dimension {i - ndim})")
                size = d
        out.append(size)
    return tuple(out)


def _size_at(shape: tuple, k: int, ndim: int):
    """Dimension ``k`` of ``shape`` right-aligned to ``ndim`` dimensions (1
    where it has none)."""
    j = k - ndim + len(shape)
    return shape[j] if j >= 0 else 1


def normalize_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"dim must be an int, got {type(axis).__name__}")
    lo = -max(ndim, 1)
    if axis < lo or axis >= max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{lo}, {max(ndim, 1) - 1}], but got {axis})")
    return axis % max(ndim, 1) if ndim else 0
