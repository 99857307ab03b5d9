"""``torch.distributed.optim``: the name libraries import
(``from torch.distributed.optim import ZeroRedundancyOptimizer``: Ignite's
Checkpoint checks for one to consolidate its state).  tracec does not
shard optimizer state across ranks: constructing one raises, saying so;
wrap the optimizer itself (under DDP every rank then holds the full
state)."""
from __future__ import annotations

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer:
    """PyTorch's ZeRO-1 wrapper (optimizer state sharded over ranks): not
    available in tracec; ``isinstance`` checks against it are False."""

    def __init__(self, params, optimizer_class, *args, **kwargs):
        raise NotImplementedError(
            "torch.distributed.optim.ZeroRedundancyOptimizer: tracec does not shard optimizer "
            f"state across ranks; use {getattr(optimizer_class, '__name__', 'the optimizer')} "
            "itself (every rank then holds the full state)")
