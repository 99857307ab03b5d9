"""``torch.autograd.Variable``: the pre-0.4 wrapper, kept by PyTorch for old
programs (PyTorch-GAN's ``Variable(imgs.type(Tensor))``).

As in PyTorch: ``Variable(t, requires_grad=False)`` returns ``t.detach()``
(sharing its memory) with ``requires_grad`` set; ``Variable()`` is an empty
tensor; non-tensor data raises ``TypeError``; ``volatile`` only warns; and
every tensor is an instance of ``Variable``.
"""
from __future__ import annotations

import warnings

from tracec import creation
from tracec.tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "torch.no_grad():` instead.", UserWarning, stacklevel=2)
        if data is None:
            data = creation.empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
