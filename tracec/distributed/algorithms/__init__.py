"""``torch.distributed.algorithms``: ``join`` (uneven inputs across ranks)."""
from tracec.distributed.algorithms.join import Join, Joinable, JoinHook  # noqa: F401
