"""``torch.autograd.profiler``: the older spelling of ``torch.profiler``
(``profile(use_cuda=...)``, ``record_function``), one implementation."""
from __future__ import annotations

from tracec.profiler import EventList, FunctionEvent, FunctionEventAvg, profile, record_function  # noqa: F401

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]
