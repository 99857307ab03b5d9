"""``tracec.distributed``: PyTorch's process-group API on MPI (API.md §6),
and eagerly over TCP for ``backend='gloo'`` (``_tcp``: ranks the script
starts itself, meeting at ``MASTER_ADDR`` / ``MASTER_PORT``; the
collectives plus ``send`` / ``recv`` / ``isend`` / ``irecv``).

One default process group over ``MPI_COMM_WORLD`` (mpi4py): rank and world
size come from the launcher (``mpiexec -n 4 python train.py``); a script
started without one runs as a world of size 1.  The collectives are the
primitives of ``tracec.ops.collective``, so the same calls run eagerly
(through mpi4py) and inside ``tracec.compile`` (IR ops whose native code
calls the MPI library itself).

Invariants: ``all_reduce`` and ``broadcast`` update their tensor in place
(as PyTorch's do) outside autograd; every collective first checks that all
ranks pass the same shape and dtype and raises
``CollectiveShapeError`` on every rank when they do not.  After
``init_process_group`` an uncaught exception on any rank prints that rank's
traceback and aborts the whole job (``tracec.distributed.faults``) instead
of leaving the other ranks waiting forever.
"""
from __future__ import annotations

import enum
import threading

import numpy as np

from tracec import graph
from tracec.ops import collective as _c
from tracec.ops.collective import CollectiveShapeError
from tracec.tensor import Tensor
from tracec.distributed import _tcp, device_mesh, faults  # noqa: F401  (torch.distributed.device_mesh: PyTorch imports it)

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "get_rank", "get_world_size", "get_backend", "barrier", "all_reduce", "broadcast",
           "all_gather", "all_gather_into_tensor", "ReduceOp", "ProcessGroup", "is_torchelastic_launched",
           "CollectiveShapeError", "default_group", "group", "new_group", "send", "recv",
           "isend", "irecv", "is_mpi_available", "is_gloo_available", "is_nccl_available",
           "Backend"]


class ReduceOp(enum.Enum):
    """How ``all_reduce`` combines the ranks' tensors: PyTorch's members
    (Ignite maps its names to them at import).  SUM, AVG and MAX run under
    either backend; PRODUCT, MIN and the bitwise ones on ``gloo``'s eager
    path only (``_reduce_rankwise``); PREMUL_SUM is not supported."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"
    UNUSED = "unused"


# torch's ops are members of the nested enum ReduceOp.RedOpType (type hints
# and isinstance checks name it): here the one enum is both.
ReduceOp.RedOpType = ReduceOp


class Backend(str):
    """PyTorch's backend names (``dist.Backend.NCCL`` is ``"nccl"``; Ignite
    reads them at import): ``Backend("GLOO")`` is ``"gloo"``, an unknown
    name its lower case.  tracec's collectives run over MPI
    (``init_process_group`` says which backends it accepts)."""
    UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE = (
        "undefined", "gloo", "nccl", "xccl", "ucc", "mpi", "fake")
    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE]
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL, "xpu": XCCL, "mps": GLOO}
    backend_capability = {GLOO: ["cpu", "cuda"], NCCL: ["cuda"], XCCL: ["xpu"],
                          UCC: ["cpu", "cuda"], MPI: ["cpu", "cuda"],
                          FAKE: ["cpu", "cuda", "hpu", "xpu"]}

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError("Backend constructor parameter must be string-ish")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        return name.lower() if value == Backend.UNDEFINED else value


class ProcessGroup:
    """Ranks that run collectives together: an MPI communicator.  ``fint``
    is its Fortran handle, the name the IR and native code use."""

    def __init__(self, comm):
        self.comm = comm
        self.fint = int(comm.py2f())
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def __repr__(self):
        return f"ProcessGroup(mpi, rank={self._rank}, size={self._size})"


class group:  # noqa: N801 - PyTorch's name
    """``dist.group.WORLD``: the default group (None until initialized)."""
    WORLD: ProcessGroup | None = None


def is_torchelastic_launched() -> bool:
    """Whether torchrun (torch elastic) started this process: it sets
    ``TORCHELASTIC_RUN_ID`` in every worker's environment."""
    import os
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_available() -> bool:
    """Whether mpi4py (and so an MPI library) can be imported."""
    try:
        _c.mpi()
    except ImportError:
        return False
    return True


def is_mpi_available() -> bool:
    return is_available()


def is_gloo_available() -> bool:
    """The TCP backend needs nothing beyond Python's sockets."""
    return True


def is_nccl_available() -> bool:
    return False


def init_process_group(backend: str = "mpi", init_method=None, timeout=None,
                       world_size: int = -1, rank: int = -1, store=None,
                       group_name: str = "", pg_options=None, device_id=None) -> None:
    """Create the default group over ``MPI_COMM_WORLD``.  ``world_size`` and
    ``rank``, if given, must agree with the launcher's."""
    if backend is None:
        backend = "mpi"
    if str(backend).lower() == "gloo":
        # ranks the script starts itself, meeting over TCP (eager only)
        if group.WORLD is not None:
            raise RuntimeError("trying to initialize the default process group twice!")
        group.WORLD = _tcp.rendezvous(init_method, rank, world_size, timeout)
        return
    if str(backend).lower() != "mpi":
        raise ValueError(f"tracec.distributed supports backend='mpi' (ranks started by "
                         f"mpiexec; collectives traced by torch.compile) and 'gloo' (ranks "
                         f"the script starts, meeting at MASTER_ADDR / MASTER_PORT; eager "
                         f"only), got {backend!r}")
    if group.WORLD is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    MPI = _c.mpi()
    pg = ProcessGroup(MPI.COMM_WORLD)
    for name, want, got in (("world_size", world_size, pg.size()), ("rank", rank, pg.rank())):
        if want not in (-1, None) and want != got:
            raise ValueError(f"init_process_group: {name}={want} but the MPI launcher "
                             f"gave {got}")
    group.WORLD = pg
    faults.install(MPI.COMM_WORLD)


def destroy_process_group(group_=None) -> None:
    """Forget the default group (MPI itself finalizes at exit; a gloo
    group's sockets close)."""
    if isinstance(group.WORLD, _tcp.TCPGroup):
        group.WORLD.close()
    group.WORLD = None
    faults.uninstall()


def is_initialized() -> bool:
    return group.WORLD is not None


def default_group(pg: ProcessGroup | None = None) -> ProcessGroup:
    """``pg``, or the default group; raises if none was initialized."""
    if pg is not None:
        return pg
    if group.WORLD is None:
        raise RuntimeError("Default process group has not been initialized, please make "
                           "sure to call init_process_group.")
    return group.WORLD


def get_rank(group: ProcessGroup | None = None) -> int:
    return default_group(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    return default_group(group).size()


def get_backend(group: ProcessGroup | None = None) -> str:
    return getattr(default_group(group), "backend", "mpi")


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids=None):
    pg = default_group(group)
    if isinstance(pg, _tcp.TCPGroup):
        pg.exchange(np.zeros(1, np.uint8))
    else:
        pg.comm.Barrier()
    return _done(async_op)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None):
    """The default group, when ``ranks`` is all of it (subgroups are not
    implemented)."""
    pg = default_group()
    if ranks is not None and sorted(ranks) != list(range(pg.size())):
        raise NotImplementedError(f"new_group: tracec.distributed has the default group only, "
                                  f"not a subgroup of ranks {list(ranks)}")
    return pg


def _tcp_group(pg, what: str):
    """``pg`` if it is a gloo group and nothing is being traced, else why not."""
    from tracec.tensor import RECORDERS
    if not isinstance(pg, _tcp.TCPGroup):
        raise NotImplementedError(f"{what}: point-to-point operations need backend='gloo' "
                                  "(tracec's MPI backend has the collectives only)")
    if RECORDERS:
        raise NotImplementedError(f"{what} under backend='gloo' runs eagerly only; inside "
                                  "torch.compile use backend='mpi'")
    return pg


def _array(t: Tensor, what: str) -> np.ndarray:
    _check_tensor(t, what)
    return t._data


def _store(t: Tensor, arr: np.ndarray) -> None:
    with graph.no_grad():
        t.copy_(Tensor._make(np.array(arr, t._data.dtype), t.dtype))


def _reduce_rankwise(arrays: list, op) -> np.ndarray:
    """The ranks' arrays combined in rank order (the same bits on every rank)."""
    op = ReduceOp(op.value if isinstance(op, ReduceOp) else str(op).lower())
    if op is ReduceOp.AVG and arrays[0].dtype.kind not in "fc":
        raise TypeError(f"all_reduce(AVG) needs a floating point tensor, got {arrays[0].dtype}")
    combine = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
               ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum,
               ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
               ReduceOp.BXOR: np.bitwise_xor}.get(op)
    if combine is None:
        raise NotImplementedError(f"all_reduce: ReduceOp.{op.name} is not supported by tracec")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and arrays[0].dtype.kind not in "biu":
        raise TypeError(f"all_reduce({op.name}) needs an integer or bool tensor, "
                        f"got {arrays[0].dtype}")
    acc = arrays[0]
    for a in arrays[1:]:
        acc = combine(acc, a)
    return acc / len(arrays) if op is ReduceOp.AVG else acc


def send(tensor: Tensor, dst: int, group=None, tag: int = 0, group_dst=None) -> None:
    """Send ``tensor`` to rank ``dst`` (gloo); returns once it is sent."""
    _tcp_group(default_group(group), "send").send(_array(tensor, "send"), dst)


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src=None) -> int:
    """Fill ``tensor`` with the next message from rank ``src`` (gloo); the
    sender's rank.  ``src=None`` (any sender) only in a group of two."""
    pg = _tcp_group(default_group(group), "recv")
    if src is None:
        if pg.size() != 2:
            raise NotImplementedError("recv(src=None): receiving from any rank is implemented "
                                      "for a group of two only")
        src = 1 - pg.rank()
    _store(tensor, pg.recv(_array(tensor, "recv"), src))
    return src


class _Request:
    """``isend`` / ``irecv``'s handle: the transfer runs on a thread;
    ``wait()`` joins it (raising what it raised)."""

    def __init__(self, fn):
        self._error: list = []

        def run():
            try:
                fn()
            except BaseException as e:        # handed to wait()
                self._error.append(e)
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait(self, timeout=None) -> bool:
        self._thread.join()
        if self._error:
            raise self._error[0]
        return True

    def is_completed(self) -> bool:
        return not self._thread.is_alive()


def isend(tensor: Tensor, dst: int, group=None, tag: int = 0, group_dst=None) -> _Request:
    pg = _tcp_group(default_group(group), "isend")
    data = np.array(_array(tensor, "isend"))     # (the bytes as they are now)
    return _Request(lambda: pg.send(data, dst))


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0,
          group_src=None) -> _Request:
    _tcp_group(default_group(group), "irecv")
    return _Request(lambda: recv(tensor, src, group))


class _Work:
    """A collective that has already completed (tracec's collectives are
    blocking; ``async_op=True`` returns this so PyTorch code still runs)."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _done(async_op: bool):
    return _Work() if async_op else None


def _check_tensor(t, what: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a tracec.Tensor, got {type(t).__name__}")


def reduce_tensor(t: Tensor, op, pg: ProcessGroup) -> Tensor:
    """The reduction of ``t`` over ``pg`` as a new tensor (traced like any
    op); AVG divides the sum by the world size when it runs (the size is
    not traced)."""
    if isinstance(pg, _tcp.TCPGroup):
        raise NotImplementedError("a differentiable all_reduce (SyncBatchNorm) needs "
                                  "backend='mpi'; backend='gloo' reduces tensors in place only")
    op = ReduceOp(op.value if isinstance(op, ReduceOp) else str(op).lower())
    if op is ReduceOp.AVG and not t.dtype.is_floating_point:
        raise TypeError(f"all_reduce(AVG) needs a floating point tensor, got {t.dtype}")
    code = {ReduceOp.SUM: _c.SUM, ReduceOp.MAX: _c.MAX, ReduceOp.AVG: _c.AVG}.get(op)
    if code is None:
        raise NotImplementedError(f"all_reduce: ReduceOp.{op.name} runs only on backend='gloo' "
                                  "(eagerly); backend='mpi' reduces with SUM, AVG or MAX")
    return _c.all_reduce(t, code, pg.fint)


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False):
    """Replace ``tensor`` (in place) by its reduction over all ranks."""
    _check_tensor(tensor, "all_reduce")
    pg = default_group(group)
    if isinstance(pg, _tcp.TCPGroup):
        _store(tensor, _reduce_rankwise(_tcp_group(pg, "all_reduce").exchange(tensor._data), op))
        return _done(async_op)
    with graph.no_grad():
        tensor.copy_(reduce_tensor(tensor, op, pg))
    return _done(async_op)


def broadcast(tensor: Tensor, src: int = 0, group: ProcessGroup | None = None,
              async_op: bool = False):
    """Replace ``tensor`` (in place) on every rank by rank ``src``'s."""
    _check_tensor(tensor, "broadcast")
    pg = default_group(group)
    if not 0 <= src < pg.size():
        raise ValueError(f"broadcast: src={src} is not a rank of a group of size {pg.size()}")
    if isinstance(pg, _tcp.TCPGroup):
        _tcp_group(pg, "broadcast")
        if pg.rank() == src:
            for peer in sorted(pg.peers):
                pg.send(tensor._data, peer)
        else:
            _store(tensor, pg.recv(tensor._data, src))
        return _done(async_op)
    with graph.no_grad():
        tensor.copy_(_c.broadcast(tensor, src, pg.fint))
    return _done(async_op)


def all_gather(tensor_list: list, tensor: Tensor, group: ProcessGroup | None = None,
               async_op: bool = False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor``."""
    _check_tensor(tensor, "all_gather")
    pg = default_group(group)
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a "
                         f"group of size {pg.size()}")
    if isinstance(pg, _tcp.TCPGroup):
        for out, arr in zip(tensor_list, _tcp_group(pg, "all_gather").exchange(tensor._data)):
            _store(out, arr)
        return _done(async_op)
    with graph.no_grad():
        gathered = _c.all_gather(tensor, pg.size(), pg.fint)
        for r, out in enumerate(tensor_list):
            out.copy_(gathered[r])
    return _done(async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor,
                           group: ProcessGroup | None = None, async_op: bool = False):
    """``all_gather_single``, deprecated by PyTorch 2.13 (the same warning)."""
    import warnings
    warnings.warn("`torch.distributed.all_gather_into_tensor` is deprecated. Please use "
                  "`torch.distributed.all_gather_single` instead.", FutureWarning, stacklevel=2)
    return all_gather_single(output_tensor, input_tensor, group, async_op)


def all_gather_single(output_tensor: Tensor, input_tensor: Tensor,
                      group: ProcessGroup | None = None, async_op: bool = False):
    """``output_tensor`` (world size times the input's first dimension) :=
    the ranks' inputs concatenated along dimension 0."""
    _check_tensor(input_tensor, "all_gather_single")
    _check_tensor(output_tensor, "all_gather_single")
    pg = default_group(group)
    if output_tensor.dtype != input_tensor.dtype:
        raise RuntimeError(f"all_gather_single: the output is {output_tensor.dtype}, the "
                           f"input {input_tensor.dtype}; they must be of one dtype")
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError(f"all_gather_single: the output has {output_tensor.numel()} "
                         f"elements, not the world size ({pg.size()}) times the input's "
                         f"{input_tensor.numel()}")
    if isinstance(pg, _tcp.TCPGroup):
        arrays = _tcp_group(pg, "all_gather_single").exchange(input_tensor._data)
        _store(output_tensor, np.stack(arrays).reshape(output_tensor._data.shape))
        return _done(async_op)
    with graph.no_grad():
        gathered = _c.all_gather(input_tensor, pg.size(), pg.fint)
        output_tensor.copy_(gathered.reshape(output_tensor.shape))
    return _done(async_op)


def get_process_group_ranks(group: ProcessGroup) -> list:
    """The global ranks of ``group``: all of them (tracec has the default
    group only, ``new_group``)."""
    return list(range(default_group(group).size()))


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes=None,  # noqa: A002
                      input_split_sizes=None, group: ProcessGroup | None = None,
                      async_op: bool = False):
    """``output`` := chunk ``rank`` of every rank's ``input`` (split evenly
    along dimension 0), concatenated in rank order.  Uneven splits are not
    supported."""
    _check_tensor(input, "all_to_all_single")
    pg = default_group(group)
    n = pg.size()
    if output_split_sizes is not None or input_split_sizes is not None:
        if any(list(s) != [input.shape[0] // n] * n
               for s in (output_split_sizes, input_split_sizes) if s is not None):
            raise NotImplementedError("all_to_all_single: tracec.distributed supports even "
                                      "splits only")
    if input.shape[0] % n:
        raise RuntimeError(f"all_to_all_single: dimension 0 ({input.shape[0]}) is not divisible "
                           f"by the world size {n}")
    me = pg.rank()
    if isinstance(pg, _tcp.TCPGroup):
        arrays = _tcp_group(pg, "all_to_all_single").exchange(input._data)
        _store(output, np.concatenate([np.split(a, n)[me] for a in arrays]))
        return _done(async_op)
    with graph.no_grad():
        gathered = _c.all_gather(input, n, pg.fint)       # every rank's whole input
        rows = input.shape[0] // n
        output.copy_(gathered[:, me * rows:(me + 1) * rows].reshape(output.shape))
    return _done(async_op)


__all__ += ["get_process_group_ranks", "all_to_all_single"]

# (after the names above, which they import)
from tracec.distributed.rooted import (all_to_all, gather, get_global_rank,  # noqa: E402
                                       get_group_rank, reduce, reduce_scatter,
                                       reduce_scatter_single, reduce_scatter_tensor, scatter)
from tracec.distributed.objects import (P2POp, all_gather_object,  # noqa: E402
                                        batch_isend_irecv, broadcast_object_list,
                                        gather_object, get_node_local_rank,
                                        is_backend_available, is_ucc_available,
                                        is_xccl_available, monitored_barrier,
                                        recv_object_list, scatter_object_list,
                                        send_object_list)

__all__ += ["all_gather_single", "reduce_scatter_single", "all_to_all", "gather", "get_global_rank", "get_group_rank", "reduce",
            "reduce_scatter", "reduce_scatter_tensor", "scatter", "P2POp",
            "all_gather_object", "batch_isend_irecv", "broadcast_object_list", "gather_object",
            "get_node_local_rank", "is_backend_available", "is_ucc_available",
            "is_xccl_available", "monitored_barrier", "recv_object_list",
            "scatter_object_list", "send_object_list"]
