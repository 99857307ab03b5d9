"""``torch.distributed.algorithms.join``: training on uneven inputs
across ranks.  With one process there is nothing to even out, so ``Join``
runs its block as is; shadowing the collectives of ranks that ran out of
inputs is not implemented, and ``Join`` over several processes refuses
when entered."""
from __future__ import annotations

from tracec import distributed as dist

__all__ = ["JoinHook", "Joinable", "Join"]


class JoinHook:
    """What a joined rank runs per collective (``main_hook``) and at the end
    (``post_hook``)."""

    def main_hook(self) -> None:
        pass

    def post_hook(self, is_last_joiner: bool) -> None:
        pass


class Joinable:
    """A class ``Join`` can manage (PyTorch's DDP and ZeroRedundancyOptimizer
    subclass it)."""

    def join_hook(self, **kwargs) -> JoinHook:
        raise NotImplementedError

    @property
    def join_device(self):
        raise NotImplementedError

    @property
    def join_process_group(self):
        raise NotImplementedError


class Join:
    """``with Join([model, ...], enable=True):``."""

    def __init__(self, joinables, enable: bool = True, throw_on_early_termination: bool = False,
                 **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables, self._enable = list(joinables), enable
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._throw_on_early_termination = throw_on_early_termination

    def __enter__(self):
        if self._enable and dist.is_initialized() and dist.get_world_size() > 1:
            raise NotImplementedError("torch.distributed.algorithms.Join over several processes: "
                                      "tracec.distributed does not shadow the collectives of "
                                      "ranks that ran out of inputs")
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        # every rank (this one) has joined: the hooks' post_hook, as PyTorch
        # runs them once all ranks are out of inputs
        if self._enable and exc_type is None:
            for hook in self._join_hooks:
                hook.post_hook(True)
        return False

    @staticmethod
    def notify_join_context(joinable):
        return None
