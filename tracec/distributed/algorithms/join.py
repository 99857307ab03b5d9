"""``torch.distributed.algorithms.join``: the context manager that lets
ranks with fewer inputs than others finish (``Join``), and the interface
its participants implement (``Joinable``, ``JoinHook``).

tracec runs the single-process case, where every rank is this one and no
rank can run out early: ``Join`` checks its participants and runs their
hooks' ``post_hook`` on exit as PyTorch's does.  With more than one process
an enabled ``Join`` raises ``NotImplementedError`` (shadowing the
collectives of ranks that ran out is not built), never a hang."""
from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["Join", "Joinable", "JoinHook"]


class JoinHook:
    """What a joined rank runs: ``main_hook`` per iteration it shadows,
    ``post_hook(is_last_joiner)`` once all have joined."""

    def main_hook(self) -> None:
        pass

    def post_hook(self, is_last_joiner: bool) -> None:
        pass


class Joinable(ABC):
    """A participant in ``Join`` (DistributedDataParallel, ZeroRedundancyOptimizer)."""

    def __init__(self):
        super().__init__()
        self._join_config = None

    @abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        ...

    @property
    @abstractmethod
    def join_device(self):
        ...

    @property
    @abstractmethod
    def join_process_group(self):
        ...


class Join:
    """``with Join([model, optimizer]):`` around a training loop."""

    def __init__(self, joinables, enable: bool = True, throw_on_early_termination: bool = False,
                 **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination

    def __enter__(self):
        if self._enable:
            from tracec import distributed as dist
            if dist.is_initialized() and dist.get_world_size() > 1:
                raise NotImplementedError(
                    "Join with more than one process is not supported by tracec")
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if not self._enable or exc_type is not None:
            return False
        for hook in self._join_hooks:
            hook.post_hook(True)
        return False

    @staticmethod
    def notify_join_context(joinable):
        """Called by a joinable before its per-iteration collectives: the
        all-reduce PyTorch uses to count the ranks still running, here none."""
        return None
