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


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        if data is None:
            from tracec.creation import zeros
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {py_type_name(data)}")
        return data.detach().requires_grad_(bool(requires_grad))
