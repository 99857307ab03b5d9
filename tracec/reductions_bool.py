"""``all`` / ``any`` (functions and Tensor methods): PyTorch's truth
reductions, over every element or ``dim`` (an int or a tuple), with
``keepdim``; the result is a bool tensor whatever the input dtype.

Composites: count the zero (for ``all``) or non-zero (for ``any``)
elements with ``sum`` and compare the count, so no primitive is added; the
result is a comparison, so it carries no gradient, as in PyTorch.
"""
from __future__ import annotations

from tracec import functions as F
from tracec import ops
from tracec.tensor import Tensor

__all__ = ["all", "any"]


def _count(x, name, nonzero, dim, keepdim):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(x).__name__}")
    hits = ops.ne(x, 0) if nonzero else ops.eq(x, 0)
    return F.sum(hits, dim=dim, keepdim=keepdim)


def all(input, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """True where every element (along ``dim``) is non-zero."""
    return ops.eq(_count(input, "all", False, dim, keepdim), 0)


def any(input, dim=None, keepdim: bool = False):  # noqa: A001
    """True where some element (along ``dim``) is non-zero."""
    return ops.gt(_count(input, "any", True, dim, keepdim), 0)


Tensor.all = all
Tensor.any = any
