"""``tracec.multiprocessing``: PyTorch's ``torch.multiprocessing`` -- Python's
``multiprocessing`` with tensors that can live in shared memory, and
``spawn``.

``Tensor.share_memory_()`` (``tracec/tensor_meta.py``) moves a tensor's storage into an anonymous shared
mapping (``mmap``, MAP_SHARED): processes started afterwards with the
``fork`` start method (Linux's default) see each other's in-place writes, as
Hogwild training (pytorch/examples mnist_hogwild) needs.  Invariant: only
a tensor that owns its storage (not a view) moves; views made from it
afterwards share the mapping.  Tensors sent to ``spawn``-ed processes are
copies (PyTorch passes shared storages by file descriptor; tracec does not),
which ``spawn``'s usual users -- one model per process, as in DDP scripts --
do not notice.
"""
from __future__ import annotations

import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403  (PyTorch re-exports it all)

from tracec import tensor_meta as _tensor_meta  # noqa: F401  (Tensor.share_memory_)

__all__ = list(getattr(_mp, "__all__", [])) + [
    "spawn", "start_processes", "ProcessContext", "ProcessRaisedException", "ProcessExitedException",
    "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies"]

_STRATEGY = ["file_descriptor"]


def get_all_sharing_strategies() -> set:
    return {"file_descriptor", "file_system"}


def get_sharing_strategy() -> str:
    return _STRATEGY[0]


def set_sharing_strategy(new_strategy: str) -> None:
    if new_strategy not in get_all_sharing_strategies():
        raise ValueError(f"invalid sharing strategy {new_strategy!r}")
    _STRATEGY[0] = new_strategy


class ProcessRaisedException(Exception):
    """A process started by ``spawn`` raised: its traceback is the message."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):
    """A process started by ``spawn`` exited with a nonzero code."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int):
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code = error_index, error_pid, exit_code


def _wrap(fn, i, args, errors):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        import traceback
        errors.put((i, traceback.format_exc()))
        raise SystemExit(1)


class ProcessContext:
    """The processes ``spawn(join=False)`` started; ``join()`` waits for
    them and raises the first failure, terminating the others."""

    def __init__(self, processes, errors):
        self.processes, self._errors = processes, errors

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None) -> bool:
        for p in self.processes:
            p.join(timeout)
        failed = [(i, p) for i, p in enumerate(self.processes) if p.exitcode not in (None, 0)]
        if not failed:
            return all(p.exitcode == 0 for p in self.processes)
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        reported = {}
        while not self._errors.empty():
            i, tb = self._errors.get()
            reported[i] = tb
        i, p = failed[0]
        if i in reported:
            raise ProcessRaisedException(
                f"\n\n-- Process {i} terminated with the following error:\n{reported[i]}", i,
                p.pid)
        raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i,
                                     p.pid, p.exitcode)


def start_processes(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn"):
    """Run ``fn(i, *args)`` in ``nprocs`` processes (PyTorch's signature)."""
    ctx = _mp.get_context(start_method)
    errors = ctx.SimpleQueue()
    procs = []
    for i in range(nprocs):
        p = ctx.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
        p.start()
        procs.append(p)
    context = ProcessContext(procs, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """``torch.multiprocessing.spawn``: ``fn(i, *args)`` for i in range(nprocs)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


def _reduce_tensor(tensor):
    """What multiprocessing's pickler (queues, spawned processes' arguments)
    does with a tensor, as PyTorch's ``reduce_tensor``: a non-leaf that
    requires grad is refused; another pickles as ``Tensor.__reduce_ex__``
    says (its values)."""
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, "
            "since autograd does not support crossing process boundaries.  "
            "If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue).")
    return tensor.__reduce_ex__(4)


def init_reductions() -> None:
    """Register ``_reduce_tensor`` with multiprocessing's ``ForkingPickler``
    for tensors and parameters (PyTorch does it when torch is imported;
    ``tracec run`` when it installs tracec as torch, else importing this)."""
    from multiprocessing.reduction import ForkingPickler

    from tracec.nn.parameter import Parameter
    from tracec.tensor import Tensor
    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, _reduce_tensor)


init_reductions()
