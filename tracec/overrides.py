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

from tracec import subclass_dispatch
from tracec.subclass_dispatch import dispatch, get_default_nowrap_functions, place  # noqa: F401
from tracec.torch_function_switch import ENTERED, disabled_torch_function_impl, mode_stack, modes_on
from tracec.tensor import Tensor

__all__ = ["get_default_nowrap_functions", "get_overridable_functions", "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
           "handle_torch_function", "is_tensor_like", "TorchFunctionMode"]


class TorchFunctionMode:
    """``torch.overrides.TorchFunctionMode``: inside ``with mode:``, every
    call of a function the protocol covers (and of the ``nn.init``
    functions PyTorch routes through it) goes to
    ``mode.__torch_function__(func, types, args, kwargs)`` first, with the
    mode off while that runs; modes nest (innermost first) and are per
    thread.  Entering one turns the protocol's wrappers on
    (``subclass_dispatch.enable``), creation functions included
    (``torch.ones``: ``subclass_dispatch.MODE_FACTORIES``)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        subclass_dispatch.enable()
        mode_stack().append(self)
        ENTERED[0] += 1
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        stack = mode_stack()
        if stack and stack[-1] is self:
            stack.pop()
        else:
            stack.remove(self)
        ENTERED[0] -= 1
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        instance = cls(*args, **kwargs)
        instance.__enter__()
        return instance


def _get_current_function_mode_stack() -> list:
    return list(mode_stack())

def _overrides(a) -> bool:
    t = type(a)
    tf = getattr(t, "__torch_function__", None)
    return tf is not None and t is not Tensor and tf is not disabled_torch_function_impl


def has_torch_function(relevant_args) -> bool:
    return modes_on() or any(_overrides(a) for a in relevant_args)


def has_torch_function_unary(a) -> bool:
    return modes_on() or _overrides(a)


def has_torch_function_variadic(*args) -> bool:
    return modes_on() or any(_overrides(a) for a in args)


def is_tensor_like(inp) -> bool:
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def _overloaded(relevant_args) -> list:
    types, out = [], []
    for a in relevant_args:
        if _overrides(a):
            place(types, out, a)
    return out


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    if modes_on():
        types = tuple(type(a) for a in _overloaded(relevant_args)) or \
            tuple(dict.fromkeys(type(a) for a in relevant_args if issubclass(type(a), Tensor)))
        stack = mode_stack()
        mode = stack.pop()
        try:
            r = mode.__torch_function__(public_api, types, args, kwargs)
        finally:
            stack.append(mode)
        if r is not NotImplemented:
            return r
    return dispatch(public_api, _overloaded(relevant_args), args, kwargs)


def get_overridable_functions() -> dict:
    """``{namespace: [functions]}`` that ``__torch_function__`` overrides
    reach (``subclass_dispatch.overridable_functions``)."""
    return subclass_dispatch.overridable_functions()
