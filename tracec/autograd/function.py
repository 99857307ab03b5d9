"""``torch.autograd.function``: ``Function``, ``FunctionCtx``,
``InplaceFunction`` and ``once_differentiable`` (the one definition of
Function lives in ``tracec.autograd``)."""
from __future__ import annotations

import functools

from tracec import graph
from tracec.autograd import Function, FunctionCtx
from tracec.tensor import Tensor

__all__ = ["Function", "FunctionCtx", "InplaceFunction", "once_differentiable"]


class InplaceFunction(Function):
    """A Function whose forward may write into its input (``inplace``)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class DelayedError(Function):
    """PyTorch's ``DelayedError``: passes its inputs through; backpropagating
    into it raises ``msg``."""

    @staticmethod
    def forward(ctx, msg, *tensors):
        ctx.msg = msg
        return tuple(t.clone() if t is not None else None for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(ctx.msg)


def once_differentiable(fn):
    """Marks a ``backward`` that is not itself differentiable: it runs with
    gradient recording off; when a graph is being built (``create_graph``)
    from gradients that require grad, its results require grad through a
    node that raises if differentiated, as PyTorch's do."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with graph.no_grad():
            outputs = fn(ctx, *args)
        if not graph.is_grad_enabled():
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs

        def fake_requires_grad(v):
            if v is not None:
                v = v.detach()
                v.requires_grad = True
            return v
        res = DelayedError.apply("trying to differentiate twice a function that was marked "
                                 "with @once_differentiable",
                                 *[fake_requires_grad(v) for v in outs])
        return res[0] if single else res
    return wrapper
