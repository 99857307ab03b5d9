"""Differentiable collectives (PyTorch's ``torch.distributed.nn.functional``):
each returns new tensors (its input untouched) and has a backward that is
itself a collective, so every rank must call ``backward`` alike.

- ``all_reduce``: the reduction over the ranks; the gradient is the same
  reduction of the ranks' gradients (the ``all_reduce`` primitive's VJP;
  MAX has none).
- ``broadcast``: rank ``src``'s tensor on every rank; ``src``'s gradient is
  the sum of all ranks' gradients, the others' zero.
- ``all_gather``: a tuple of every rank's tensor; rank r's gradient is the
  sum over ranks of their gradients for element r.
"""
from __future__ import annotations

from tracec import distributed as dist
from tracec import graph
from tracec.autograd import Function
from tracec.functions import _named
from tracec.ops import collective as _c
from tracec.shape_ops import stack

__all__ = ["all_gather", "all_reduce", "broadcast"]


def _group(group, what):
    """The MPI process group ``group`` names (default: the world); the
    TCP backend's eager collectives have no autograd."""
    pg = dist.default_group(group)
    if isinstance(pg, dist._tcp.TCPGroup):
        raise NotImplementedError(f"a differentiable {what} needs backend='mpi'; "
                                  "backend='gloo' runs collectives on tensors in place only")
    return pg


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None):
    """The reduction of ``tensor`` over the group's ranks, as a new tensor."""
    dist._check_tensor(tensor, "all_reduce")
    return _named(dist.reduce_tensor(tensor, op, _group(group, "all_reduce")),
                  "_AllReduceBackward")


def _sum_over_ranks(t, pg):
    return dist.reduce_tensor(t, dist.ReduceOp.SUM, pg)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, pg, tensor):
        ctx.src, ctx.pg = src, pg
        with graph.no_grad():
            return _c.broadcast(tensor, src, pg.fint)

    @staticmethod
    def backward(ctx, grad):
        total = _sum_over_ranks(grad, ctx.pg)
        return None, None, total if ctx.pg.rank() == ctx.src else total * 0


def broadcast(tensor, src, group=None):
    """Rank ``src``'s ``tensor`` on every rank, as a new tensor."""
    dist._check_tensor(tensor, "broadcast")
    pg = _group(group, "broadcast")
    if not 0 <= src < pg.size():
        raise ValueError(f"broadcast: src={src} is not a rank of a group of size {pg.size()}")
    return _Broadcast.apply(src, pg, tensor)


class _AllGather(Function):
    @staticmethod
    def forward(ctx, pg, tensor):
        ctx.pg = pg
        with graph.no_grad():
            gathered = _c.all_gather(tensor, pg.size(), pg.fint)
            return tuple(gathered[r].clone() for r in range(pg.size()))

    @staticmethod
    def backward(ctx, *grads):
        summed = _sum_over_ranks(stack(grads), ctx.pg)
        return None, summed[ctx.pg.rank()]


def all_gather(tensor, group=None):
    """Every rank's ``tensor``, a tuple indexed by rank."""
    dist._check_tensor(tensor, "all_gather")
    pg = _group(group, "all_gather")
    return _AllGather.apply(pg, tensor)
