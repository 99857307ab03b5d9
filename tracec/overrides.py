"""``tracec.overrides``: PyTorch's ``__torch_function__`` entry points as
functions copied from PyTorch call them (``if has_torch_function(...):
return handle_torch_function(...)``).

Invariant: an argument overrides when its type is not Tensor and has a
``__torch_function__`` other than ``_disabled_torch_function_impl`` (every
Tensor subclass inherits ``Tensor.__torch_function__``, PyTorch's default:
``tracec.subclass_dispatch``), and ``handle_torch_function`` calls the overriding types'
``__torch_function__(func, types, args, kwargs)`` in PyTorch's order
(subclasses before their bases, else left to right) until one does not
return ``NotImplemented``.
"""
from __future__ import annotations

from tracec import subclass_dispatch as _sd
from tracec.subclass_dispatch import dispatch, get_default_nowrap_functions, place  # noqa: F401
from tracec.torch_function_switch import disabled_torch_function_impl
from tracec.tensor import Tensor

__all__ = ["get_default_nowrap_functions", "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
           "handle_torch_function", "is_tensor_like", "TorchFunctionMode"]

def _overrides(a) -> bool:
    t = type(a)
    tf = getattr(t, "__torch_function__", None)
    return tf is not None and t is not Tensor and tf is not disabled_torch_function_impl


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
        if _overrides(a):
            place(types, out, a)
    return out


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    return dispatch(public_api, _overloaded(relevant_args), args, kwargs)


class TorchFunctionMode:
    """``with MyMode():``: every public call on this thread (functions,
    Tensor methods and operators, tensor-valued properties) goes to
    ``MyMode().__torch_function__(func, types, args, kwargs)`` first, with
    the mode itself off while that runs (so calling ``func(*args,
    **kwargs)`` inside does the work); ``types`` are the overriding
    subclasses among the arguments.  Modes nest, the innermost first; they
    are per thread (``tracec.subclass_dispatch``)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        _sd.push_mode(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _sd.pop_mode(self)
        return False
