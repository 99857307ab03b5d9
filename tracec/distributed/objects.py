"""PyTorch's collectives of picklable Python objects
(``all_gather_object``, ``broadcast_object_list``, ``gather_object``,
``scatter_object_list``, ``send_object_list`` / ``recv_object_list``),
batched point-to-point (``P2POp``, ``batch_isend_irecv``) and the small
helpers scripts call around them.

Objects travel pickled: through mpi4py's object API on MPI groups, as
length-prefixed byte messages on gloo groups (``_tcp``).  They are eager
only (Python objects have no IR), as PyTorch's are outside its graphs.

Invariants, as PyTorch's: every list argument is filled in place (never
replaced), on the ranks PyTorch fills it on; a list given where PyTorch
wants none, or missing where it wants one, raises ValueError.
"""
from __future__ import annotations

import os
import pickle

from tracec.distributed import _tcp, barrier, default_group, irecv, isend
from tracec.distributed.rooted import group_rank_of

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
           "send_object_list", "recv_object_list", "monitored_barrier", "get_node_local_rank",
           "is_backend_available", "P2POp", "batch_isend_irecv", "is_ucc_available",
           "is_xccl_available"]


def _refuse_traced(what: str) -> None:
    from tracec.tensor import RECORDERS
    if RECORDERS:
        raise NotImplementedError(f"{what}: collectives of Python objects run eagerly only "
                                  "(outside torch.compile)")


def _allgather(pg, obj, what: str) -> list:
    """Every rank's ``obj``, in rank order."""
    _refuse_traced(what)
    if isinstance(pg, _tcp.TCPGroup):
        return [pickle.loads(b) for b in pg.exchange_bytes(pickle.dumps(obj))]
    return pg.comm.allgather(obj)


def all_gather_object(object_list: list, obj, group=None) -> None:
    """``object_list[r]`` := rank r's ``obj`` (on every rank)."""
    pg = default_group(group)
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries for "
                         f"a group of size {pg.size()}")
    object_list[:] = _allgather(pg, obj, "all_gather_object")


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None,
                          group_src: int | None = None) -> None:
    """Every rank's ``object_list`` := rank ``src``'s (entry by entry; the
    lists have one length on all ranks)."""
    pg = default_group(group)
    root = group_rank_of(pg, src, group_src, "broadcast_object_list")
    _refuse_traced("broadcast_object_list")
    if isinstance(pg, _tcp.TCPGroup):
        if pg.rank() == root:
            payload = pickle.dumps(list(object_list))
            for peer in sorted(pg.peers):
                pg.send(_bytes_array(payload), peer)
            return
        got = pickle.loads(pg.recv_bytes(root))
    else:
        got = pg.comm.bcast(list(object_list) if pg.rank() == root else None, root=root)
        if pg.rank() == root:
            return
    if len(got) != len(object_list):
        raise ValueError(f"broadcast_object_list: rank {root} broadcast {len(got)} objects, "
                         f"but this rank's object_list has {len(object_list)} entries")
    object_list[:] = got


def _bytes_array(payload: bytes):
    import numpy as np
    return np.frombuffer(payload, np.uint8)


def gather_object(obj, object_gather_list=None, dst: int | None = None, group=None,
                  group_dst: int | None = None) -> None:
    """Rank ``dst``'s ``object_gather_list[r]`` := rank r's ``obj``."""
    pg = default_group(group)
    root = group_rank_of(pg, dst, group_dst, "gather_object")
    if pg.rank() == root:
        if object_gather_list is None or len(object_gather_list) != pg.size():
            raise ValueError("Argument ``gather_list`` must be specified on destination rank"
                             f" (a list of {pg.size()} entries for this group)")
    elif object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    _refuse_traced("gather_object")
    if isinstance(pg, _tcp.TCPGroup):
        got = _allgather(pg, obj, "gather_object")
    else:
        got = pg.comm.gather(obj, root=root)
    if pg.rank() == root:
        object_gather_list[:] = got


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list=None,
                        src: int | None = None, group=None,
                        group_src: int | None = None) -> None:
    """``scatter_object_output_list[0]`` := rank ``src``'s
    ``scatter_object_input_list[rank]``."""
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size "
                         "at least 1.")
    pg = default_group(group)
    root = group_rank_of(pg, src, group_src, "scatter_object_list")
    me = pg.rank()
    if me == root and (scatter_object_input_list is None
                       or len(scatter_object_input_list) != pg.size()):
        raise ValueError(f"scatter_object_list: rank {root} needs scatter_object_input_list "
                         f"with {pg.size()} entries")
    _refuse_traced("scatter_object_list")
    if isinstance(pg, _tcp.TCPGroup):
        if me == root:
            for peer in sorted(pg.peers):
                pg.send(_bytes_array(pickle.dumps(scatter_object_input_list[peer])), peer)
            mine = scatter_object_input_list[me]
        else:
            mine = pickle.loads(pg.recv_bytes(root))
    else:
        mine = pg.comm.scatter(list(scatter_object_input_list) if me == root else None,
                               root=root)
    scatter_object_output_list[0] = mine


def send_object_list(object_list: list, dst: int | None = None, group=None, device=None,
                     group_dst: int | None = None, use_batch: bool = False) -> None:
    """Send ``object_list`` to rank ``dst`` (``recv_object_list`` there)."""
    pg = default_group(group)
    peer = group_rank_of(pg, dst, group_dst, "send_object_list", default=None)
    _refuse_traced("send_object_list")
    if isinstance(pg, _tcp.TCPGroup):
        pg.send(_bytes_array(pickle.dumps(list(object_list))), peer)
    else:
        pg.comm.send(list(object_list), dest=peer)


def recv_object_list(object_list: list, src: int | None = None, group=None, device=None,
                     group_src: int | None = None, use_batch: bool = False) -> int:
    """Fill ``object_list`` from rank ``src``'s ``send_object_list``; the
    sender's rank."""
    pg = default_group(group)
    peer = group_rank_of(pg, src, group_src, "recv_object_list", default=None)
    _refuse_traced("recv_object_list")
    if isinstance(pg, _tcp.TCPGroup):
        got = pickle.loads(pg.recv_bytes(peer))
    else:
        got = pg.comm.recv(source=peer)
    if len(got) != len(object_list):
        raise ValueError(f"recv_object_list: rank {peer} sent {len(got)} objects, but "
                         f"object_list has {len(object_list)} entries")
    object_list[:] = got
    return peer


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False) -> None:
    """A barrier (tracec's barriers wait for every rank; a rank that fails
    aborts the job, ``faults``)."""
    barrier(group)


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """``LOCAL_RANK`` from the launcher's environment, else ``fallback_rank``."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
        "`get_node_local_rank` to work, assuming you are not running in a multi-device "
        "context and want the code to run locally instead.")


def is_backend_available(backend: str) -> bool:
    """Whether ``backend`` (or every backend of ``"cpu:gloo,cuda:nccl"``) runs here."""
    from tracec import distributed as d
    names = [part.split(":")[-1] for part in str(backend).lower().split(",")]
    have = {"gloo": True, "mpi": d.is_mpi_available()}
    return all(have.get(n, False) for n in names)


def is_ucc_available() -> bool:
    return False


def is_xccl_available() -> bool:
    return False


class P2POp:
    """One send or receive of ``batch_isend_irecv``: ``op`` is
    ``dist.isend`` or ``dist.irecv``."""

    def __init__(self, op, tensor, peer: int | None = None, group=None, tag: int = 0,
                 group_peer: int | None = None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        self.op, self.tensor, self.group, self.tag = op, tensor, group, tag
        self.peer = peer if peer is not None else group_peer

    def __repr__(self):
        return (f"P2POp(op={self.op.__name__}, tensor=Tensor(shape={list(self.tensor.shape)}), "
                f"peer={self.peer})")


def batch_isend_irecv(p2p_op_list) -> list:
    """Start every operation of ``p2p_op_list``; their requests (``wait()``)."""
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    return [p.op(p.tensor, p.peer, p.group, p.tag) for p in p2p_op_list]
