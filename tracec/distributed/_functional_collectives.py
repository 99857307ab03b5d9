"""``torch.distributed._functional_collectives``: collectives that return
new tensors.  tracec's collectives complete before they return, so
``wait_tensor`` has nothing to wait for."""
from __future__ import annotations

from tracec import autograd, creation
from tracec import distributed as dist

__all__ = ["wait_tensor", "all_to_all_single_autograd"]


def wait_tensor(tensor):
    """``tensor`` itself: it is complete already."""
    return tensor


class _AllToAll(autograd.Function):
    @staticmethod
    def forward(ctx, x, output_split_sizes, input_split_sizes, group):
        ctx.splits, ctx.group = (input_split_sizes, output_split_sizes), group
        out = creation.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), output_split_sizes, input_split_sizes, group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # the gradient goes back the way the data came: splits swapped
        out = creation.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous(), *ctx.splits, ctx.group)
        return out, None, None, None


def all_to_all_single_autograd(input, output_split_sizes, input_split_sizes, group):  # noqa: A002
    """``all_to_all_single`` into a new tensor, differentiable (the backward
    is the all-to-all of the gradient)."""
    return _AllToAll.apply(input, output_split_sizes, input_split_sizes, group)
