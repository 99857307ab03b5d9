"""``torch.distributed.checkpoint`` (DCP): tracec has no distributed
checkpointing (``tracec.save`` / ``tracec.load`` write and read whole state
dicts).  Its names exist for libraries that import them; using them
raises ``NotImplementedError``."""
from __future__ import annotations

__all__ = ["save", "load"]


def _missing(what: str):
    raise NotImplementedError(f"{what}: tracec.distributed has no distributed checkpointing "
                              "(torch.distributed.checkpoint); use torch.save / torch.load")


def save(state_dict, *args, **kwargs):
    _missing("torch.distributed.checkpoint.save")


def load(state_dict, *args, **kwargs):
    _missing("torch.distributed.checkpoint.load")
