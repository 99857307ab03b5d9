"""``tracec.overrides``: PyTorch's ``__torch_function__`` entry points as
functions copied from PyTorch call them (``if has_torch_function(...):
return handle_torch_function(...)``).

Invariant: an argument overrides when its type defines a
``__torch_function__`` other than tracec.Tensor's (tracec's own tensors
define none), and ``handle_torch_function`` calls the overriding types'
``__torch_function__(func, types, args, kwargs)`` in PyTorch's order
(subclasses before their bases, else left to right) until one does not
return ``NotImplemented``.
"""
from __future__ import annotations

from tracec.tensor import Tensor

__all__ = ["has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
           "handle_torch_function", "is_tensor_like"]

_BASE = getattr(Tensor, "__torch_function__", None)


def _overrides(a) -> bool:
    tf = getattr(type(a), "__torch_function__", None)
    return tf is not None and tf is not _BASE


def has_torch_function(relevant_args) -> bool:
    return any(_overrides(a) for a in relevant_args)


def has_torch_function_unary(a) -> bool:
    return _overrides(a)


def has_torch_function_variadic(*args) -> bool:
    return any(_overrides(a) for a in args)


def is_tensor_like(inp) -> bool:
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def _overloaded(relevant_args) -> list:
    types, out = [], []
    for a in relevant_args:
        t = type(a)
        if _overrides(a) and t not in types:
            # subclasses go before their base classes
            at = len(out)
            for i, other in enumerate(types):
                if issubclass(t, other):
                    at = i
                    break
            types.insert(at, t)
            out.insert(at, a)
    return out


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    overloaded = _overloaded(relevant_args)
    types = tuple(type(a) for a in overloaded)
    for a in overloaded:
        result = type(a).__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"no implementation found for '{getattr(public_api, '__module__', '')}."
                    f"{getattr(public_api, '__name__', public_api)}' on types that implement "
                    f"__torch_function__: {[type(a) for a in overloaded]}")

