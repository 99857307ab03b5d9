"""``torch.distributed.checkpoint.hf_storage``: see
``tracec.distributed.checkpoint``."""
from __future__ import annotations

from tracec.distributed.checkpoint import _missing

__all__ = ["HuggingFaceStorageReader", "HuggingFaceStorageWriter"]


class HuggingFaceStorageReader:
    def __new__(cls, *args, **kwargs):
        _missing("torch.distributed.checkpoint.HuggingFaceStorageReader")


class HuggingFaceStorageWriter:
    def __new__(cls, *args, **kwargs):
        _missing("torch.distributed.checkpoint.HuggingFaceStorageWriter")
