"""How tracec's functions hand a nested tensor over to ``tracec.nested``.

``tracec.nested.NestedTensor`` is not a ``tracec.Tensor``: it holds one
dense tensor per batch entry.  A function that accepts nested tensors
(``matmul``, ``bmm``, ``softmax``, ``F.linear``, ``F.dropout``,
``F.scaled_dot_product_attention``) begins with

    nt = nested_operand(a, b, ...)
    if nt is not None:
        return nt.__nested_call__(f, (a, b, ...), kwargs)

so the nested type applies ``f`` entry by entry (as PyTorch's nested
kernels do) without the dense functions importing ``tracec.nested``,
which sits above them.

Invariant: ``nested_operand`` returns the first argument whose type
defines ``__nested_call__``, else None; it never inspects tensor data.
"""
from __future__ import annotations

__all__ = ["nested_operand"]


def nested_operand(*args):
    """The first of ``args`` that is a nested tensor, or None."""
    for a in args:
        if getattr(type(a), "__nested_call__", None) is not None:
            return a
    return None
