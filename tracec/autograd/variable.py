"""``torch.autograd.Variable``: the pre-0.4 wrapper, kept for the many
public programs that still write ``Variable(x, requires_grad=True)``.

Invariant: as in PyTorch, ``Variable(t)`` is a new leaf tensor sharing
``t``'s storage (``t.detach()``) with ``requires_grad`` as given, and every
tensor is an instance of ``Variable``.
"""
from __future__ import annotations

import warnings

from tracec.tensor import Tensor, py_type_name

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


#: PyTorch's ``Variable(data, requires_grad, volatile, _grad_fn, name)``
#: parameters, parsed as its C constructor parses them (PyArg_Parse...).
_PARAMS = ("data", "requires_grad", "volatile", "_grad_fn", "name")


def _as_flag(v) -> bool:
    """An ``int``-like flag as the C parser reads one ("b"/"i")."""
    if not hasattr(v, "__index__"):
        raise TypeError(f"'{py_type_name(v)}' object cannot be interpreted as an integer")
    return bool(v.__index__())


class Variable(metaclass=_VariableMeta):
    def __new__(cls, *args, **kwargs):
        if len(args) + len(kwargs) > len(_PARAMS):
            raise TypeError(f"function takes at most {len(_PARAMS)} arguments "
                            f"({len(args) + len(kwargs)} given)")
        given = dict(zip(_PARAMS, args))
        for k, v in kwargs.items():
            if k not in _PARAMS:
                raise TypeError(f"'{k}' is an invalid keyword argument for this function")
            if k in given:
                raise TypeError(f"argument for function given by name ('{k}') and position "
                                f"({_PARAMS.index(k) + 1})")
            given[k] = v
        data = given.get("data")
        requires_grad = _as_flag(given.get("requires_grad", False))
        if _as_flag(given.get("volatile", False)):
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        if data is None:
            from tracec.creation import zeros
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {py_type_name(data)}")
        out = data.detach().requires_grad_(requires_grad)
        if given.get("name") is not None:
            out.name = given["name"]
        return out
