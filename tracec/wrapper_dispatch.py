"""How tracec's functions hand a wrapper tensor over to its own type.

``tracec.nested.NestedTensor`` (one dense tensor per batch entry) and
``tracec.masked.MaskedTensor`` (data and a mask) are not
``tracec.Tensor``s.  A function that accepts them (``matmul``, ``bmm``,
``softmax``, ``exp`` and the other float unaries, ``where``, ``sum``,
``mean``, ``F.linear``, ``F.dropout``, ``F.scaled_dot_product_attention``,
``autograd.grad``) begins with

    w = dispatching_operand(a, b, ...)
    if w is not None:
        return w.__tracec_dispatch__(f, (a, b, ...), kwargs)

so the wrapper's type gives ``f`` its meaning (entry by entry, or on data
and mask), as PyTorch's ``__torch_function__`` / ``__torch_dispatch__``
do for these subclasses, without the dense functions importing the
wrapper packages, which sit above them.

Invariant: ``dispatching_operand`` returns the first argument whose type
defines ``__tracec_dispatch__``, else None; it never inspects tensor data.
"""
from __future__ import annotations

__all__ = ["dispatching_operand"]


#: type -> whether it dispatches (looked up once per type: the check runs
#: at the top of hot eager functions)
_DISPATCHES: dict = {}


def dispatching_operand(*args):
    """The first of ``args`` that is a wrapper tensor, or None."""
    for a in args:
        d = _DISPATCHES.get(type(a))
        if d is None:
            d = _DISPATCHES[type(a)] = getattr(type(a), "__tracec_dispatch__", None) is not None
        if d:
            return a
    return None
