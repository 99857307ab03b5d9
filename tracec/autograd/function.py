"""``torch.autograd.function``: ``Function``, ``FunctionCtx``,
``InplaceFunction`` and ``once_differentiable`` (the one definition of
Function lives in ``tracec.autograd``)."""
from __future__ import annotations

import functools

from tracec import graph
from tracec.autograd import Function, FunctionCtx

__all__ = ["Function", "FunctionCtx", "InplaceFunction", "once_differentiable"]


class InplaceFunction(Function):
    """A Function whose forward may write into its input (``inplace``)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


def once_differentiable(fn):
    """Marks a ``backward`` that is not itself differentiable: it runs with
    gradient recording off, so a double backward through it fails loudly
    (no graph) instead of silently giving zeros."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with graph.no_grad():
            return fn(ctx, *args)
    return wrapper
