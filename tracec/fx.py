"""``tracec.fx``: the part of ``torch.fx`` that model code calls at import
time. ``torch.fx.wrap("fn")`` / ``@torch.fx.wrap`` marks a function as a
leaf for FX's symbolic tracer; tracec has no FX tracer (``tracec.compile``
records by running the code), so marking changes nothing and the function
is returned as given, as ``wrap`` returns it in PyTorch.
"""
from __future__ import annotations

__all__ = ["wrap"]


def wrap(fn_or_name):
    if not (callable(fn_or_name) or isinstance(fn_or_name, str)):
        raise AssertionError("Unsupported type for global function! Must be either a callable "
                             "or string name")
    return fn_or_name
