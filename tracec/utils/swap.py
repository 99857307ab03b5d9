"""``torch.utils.swap_tensors(t1, t2)``: the two Python tensor objects
exchange everything they hold (class, ``__dict__``, every slot: data,
dtype, autograd state, views), so that each name keeps its object while
the contents trade places, as PyTorch swaps their TensorImpls.

Invariant: afterwards each leaf's accumulate-grad node (``_accum``) refers
to the object now holding its data, so a later backward accumulates into
the tensor that owns that data.  (PyTorch also refuses tensors that other
references or weakrefs hold; tracec's own caches keep weakrefs to
parameters, so that check is not made.)"""
from __future__ import annotations

from tracec.tensor import Tensor

_SKIPPED = ("__weakref__", "__dict__")


def _slots(cls) -> list:
    return [n for k in cls.__mro__ for n in getattr(k, "__slots__", ()) if n not in _SKIPPED]


def swap_tensors(t1, t2) -> None:
    """Swap the contents of tensors ``t1`` and ``t2`` in place."""
    for name, t in (("t1", t1), ("t2", t2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"Expected {name} to be a Tensor, but got {type(t).__name__}")
    slots = _slots(type(t1))
    if set(slots) != set(_slots(type(t2))):
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__
    d1, d2 = dict(t1.__dict__), dict(t2.__dict__)
    t1.__dict__.clear()
    t1.__dict__.update(d2)
    t2.__dict__.clear()
    t2.__dict__.update(d1)
    missing = object()
    for name in dict.fromkeys(slots):
        a, b = getattr(t1, name, missing), getattr(t2, name, missing)
        for t, v in ((t1, b), (t2, a)):
            if v is missing:
                if hasattr(t, name):
                    delattr(t, name)
            else:
                setattr(t, name, v)
    for t in (t1, t2):
        acc = getattr(t, "_accum", None)
        if acc is not None and getattr(acc, "variable", None) is not None:
            acc.variable = t
