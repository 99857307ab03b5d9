"""``torch.distributed.algorithms``: ``Join`` for uneven inputs."""
from tracec.distributed.algorithms.join import Join, Joinable, JoinHook  # noqa: F401

__all__ = ["Join", "Joinable", "JoinHook"]
