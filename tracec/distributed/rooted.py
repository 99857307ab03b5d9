"""PyTorch's collectives beyond ``all_reduce`` / ``broadcast`` /
``all_gather``: the rooted ones (``reduce``, ``gather``, ``scatter``), the
reduce-scatters and ``all_to_all``, over both backends.

On MPI they are built from the traced primitives (``reduce_tensor``,
``_c.all_gather``, ``_c.broadcast``), so they run eagerly and inside
``tracec.compile`` alike; on gloo from the TCP group's ``exchange``.  A
rank takes its part of the full result (a rank's number is fixed for the
life of the process, so a trace made on it stays right).  They move more
bytes than a dedicated implementation would (``gather`` is an
``all_gather``): correct first, for the sizes scripts gather (metrics,
losses, small tensors).

Invariants, as PyTorch's: only ``dst`` receives ``reduce``'s result (other
ranks' tensors are left as they were) and ``gather``'s list; ``gather_list``
/ ``scatter_list`` are given on the root only (ValueError otherwise, with
PyTorch's message); ``all_to_all`` takes one tensor per rank, and tracec
needs them all of one shape.
"""
from __future__ import annotations

import numpy as np

from tracec import graph
from tracec.distributed import (ReduceOp, _array, _check_tensor, _done, _reduce_rankwise, _store,
                                _tcp, _tcp_group, default_group, reduce_tensor)
from tracec.ops import collective as _c
from tracec.shape_ops import stack
from tracec.tensor import Tensor

__all__ = ["reduce", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
           "reduce_scatter_single",
           "all_to_all", "get_global_rank", "get_group_rank"]


def get_global_rank(group, group_rank: int) -> int:
    """A rank of ``group`` as a global rank: the same number (tracec's
    groups are the whole world, ``new_group``)."""
    return _in_group(default_group(group), group_rank, "get_global_rank")


def get_group_rank(group, global_rank: int) -> int:
    return _in_group(default_group(group), global_rank, "get_group_rank")


def _in_group(pg, rank, what: str) -> int:
    if not 0 <= int(rank) < pg.size():
        raise ValueError(f"{what}: rank {rank} is not part of group {pg}")
    return int(rank)


def group_rank_of(pg, rank, group_rank, what: str, default=0) -> int:
    """The root named by ``rank`` (global) or ``group_rank`` (PyTorch's
    ``dst`` / ``group_dst`` pairs), ``default`` when neither is given."""
    if rank is not None and group_rank is not None:
        raise ValueError("Can't specify both group_rank and global_rank")
    chosen = group_rank if group_rank is not None else rank
    if chosen is None:
        if default is None:
            raise ValueError("Must specify global_rank or group_rank")
        chosen = default
    return _in_group(pg, chosen, what)


def _same_dtype(tensor: Tensor, tensors, what: str) -> None:
    for t in tensors:
        _check_tensor(t, what)
        if t.dtype != tensor.dtype:
            raise ValueError("Invalid usage of tensors with different dtypes"
                             f"Found {tensor.dtype} and  {t.dtype}")


def reduce(tensor: Tensor, dst: int | None = None, op=ReduceOp.SUM, group=None,
           async_op: bool = False, group_dst: int | None = None):
    """Rank ``dst``'s ``tensor`` := the reduction of every rank's (in place);
    the other ranks' tensors are left as they are."""
    _check_tensor(tensor, "reduce")
    pg = default_group(group)
    root = group_rank_of(pg, dst, group_dst, "reduce", default=None)
    if isinstance(pg, _tcp.TCPGroup):
        total = _reduce_rankwise(_tcp_group(pg, "reduce").exchange(tensor._data), op)
        if pg.rank() == root:
            _store(tensor, total)
        return _done(async_op)
    total = reduce_tensor(tensor, op, pg)
    if pg.rank() == root:
        with graph.no_grad():
            tensor.copy_(total)
    return _done(async_op)


def _root_list(tensor, tensors, pg, root: int, what: str, arg: str, role: str) -> list:
    """``tensors`` (a list) checked as PyTorch checks a rooted collective's
    list: given on the root only, one tensor per rank, ``tensor``'s dtype."""
    tensors = list(tensors or [])
    _same_dtype(tensor, tensors, what)
    if pg.rank() == root:
        if not tensors:
            raise ValueError(f"Argument ``{arg}`` must be specified on {role} rank.")
        if len(tensors) != pg.size():
            raise ValueError(f"{what}: {arg} has {len(tensors)} tensors for a group of size "
                             f"{pg.size()}")
    elif tensors:
        raise ValueError(f"Argument ``{arg}`` must NOT be specified on non-{role} ranks.")
    return tensors


def gather(tensor: Tensor, gather_list=None, dst: int | None = None, group=None,
           async_op: bool = False, group_dst: int | None = None):
    """Rank ``dst``'s ``gather_list[r]`` := rank r's ``tensor``: an
    ``all_gather`` whose results the other ranks drop."""
    from tracec.distributed import all_gather
    _check_tensor(tensor, "gather")
    pg = default_group(group)
    root = group_rank_of(pg, dst, group_dst, "gather")
    gather_list = _root_list(tensor, gather_list, pg, root, "gather", "gather_list",
                             "destination")
    if pg.rank() != root:
        gather_list = [tensor.new_zeros(tensor.shape) for _ in range(pg.size())]
    return all_gather(gather_list, tensor, group, async_op)


def scatter(tensor: Tensor, scatter_list=None, src: int | None = None, group=None,
            async_op: bool = False, group_src: int | None = None):
    """``tensor`` := rank ``src``'s ``scatter_list[rank]``."""
    _check_tensor(tensor, "scatter")
    pg = default_group(group)
    root = group_rank_of(pg, src, group_src, "scatter")
    me = pg.rank()
    scatter_list = _root_list(tensor, scatter_list, pg, root, "scatter", "scatter_list",
                              "source")
    if isinstance(pg, _tcp.TCPGroup):
        _tcp_group(pg, "scatter")
        if me == root:
            for peer in sorted(pg.peers):
                pg.send(_array(scatter_list[peer], "scatter"), peer)
            _store(tensor, scatter_list[me]._data)
        else:
            _store(tensor, pg.recv(tensor._data, root))
        return _done(async_op)
    with graph.no_grad():
        # every rank broadcasts a stack of the root's tensors (the others'
        # stand-ins have its shape) and keeps its own row
        whole = (stack(scatter_list) if me == root else
                 tensor.new_zeros((pg.size(), *tensor.shape)))
        tensor.copy_(_c.broadcast(whole, root, pg.fint)[me])
    return _done(async_op)


def reduce_scatter(output: Tensor, input_list, op=ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """``output`` := the reduction over ranks of their ``input_list[rank]``."""
    _check_tensor(output, "reduce_scatter")
    pg = default_group(group)
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors for a "
                         f"group of size {pg.size()}")
    _same_dtype(output, input_list, "reduce_scatter")
    return _reduce_rows(output, _stack(list(input_list)), op, pg, async_op, "reduce_scatter")


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM,  # noqa: A002
                          group=None, async_op: bool = False):
    """``reduce_scatter_single``, deprecated by PyTorch 2.13 (the same warning)."""
    import warnings
    warnings.warn("`torch.distributed.reduce_scatter_tensor` is deprecated. Please use "
                  "`torch.distributed.reduce_scatter_single` instead.", FutureWarning,
                  stacklevel=2)
    return reduce_scatter_single(output, input, op, group, async_op)


def reduce_scatter_single(output: Tensor, input: Tensor, op=ReduceOp.SUM,  # noqa: A002
                          group=None, async_op: bool = False):
    """``output`` := chunk ``rank`` (along dimension 0) of the reduction of
    every rank's ``input`` (world size times ``output``'s numel)."""
    _check_tensor(output, "reduce_scatter_single")
    _check_tensor(input, "reduce_scatter_single")
    pg = default_group(group)
    if input.numel() != output.numel() * pg.size():
        raise ValueError(f"reduce_scatter_single: the input has {input.numel()} elements, "
                         f"not the world size ({pg.size()}) times the output's "
                         f"{output.numel()}")
    return _reduce_rows(output, input.reshape(pg.size(), *output.shape), op, pg, async_op,
                        "reduce_scatter_single")


def _stack(tensors) -> Tensor:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise NotImplementedError(f"tracec.distributed needs the tensors of one rank to share "
                                  f"a shape here, got {sorted(shapes)}")
    return stack(tensors)


def _reduce_rows(output, rows: Tensor, op, pg, async_op, what: str):
    me = pg.rank()
    if isinstance(pg, _tcp.TCPGroup):
        total = _reduce_rankwise(_tcp_group(pg, what).exchange(rows._data), op)
        _store(output, total[me].reshape(output._data.shape))
        return _done(async_op)
    with graph.no_grad():
        output.copy_(reduce_tensor(rows, op, pg)[me].reshape(output.shape))
    return _done(async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    """``output_tensor_list[r]`` := rank r's ``input_tensor_list[rank]``."""
    pg = default_group(group)
    n, me = pg.size(), pg.rank()
    for name, lst in (("output_tensor_list", output_tensor_list),
                      ("input_tensor_list", input_tensor_list)):
        if len(lst) != n:
            raise ValueError(f"all_to_all: {name} has {len(lst)} tensors for a group of "
                             f"size {n}")
        for t in lst:
            _check_tensor(t, "all_to_all")
    rows = _stack(list(input_tensor_list))
    if isinstance(pg, _tcp.TCPGroup):
        arrays = _tcp_group(pg, "all_to_all").exchange(rows._data)
        for out, arr in zip(output_tensor_list, arrays):
            _store(out, np.asarray(arr)[me].reshape(out._data.shape))
        return _done(async_op)
    with graph.no_grad():
        gathered = _c.all_gather(rows, n, pg.fint)        # [rank, row, ...]
        for r, out in enumerate(output_tensor_list):
            out.copy_(gathered[r][me].reshape(out.shape))
    return _done(async_op)
