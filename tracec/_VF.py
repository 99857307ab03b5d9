"""``torch._VF``: PyTorch's table of ATen functions by name
(``torch._C._VariableFunctions``), which code copied from PyTorch's own
sources calls (``_VF.lstm``, ``_VF.einsum``, ``_VF.frobenius_norm``...).
Each name resolves to tracec's function of the same name; one that tracec
lacks raises PyTorch's AttributeError."""
from __future__ import annotations

import sys

import tracec


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        value = getattr(tracec, name)
    except AttributeError:
        raise AttributeError(f"module 'torch._VF' has no attribute '{name}'") from None
    if not callable(value) or isinstance(value, type) or type(value) is type(sys):
        raise AttributeError(f"module 'torch._VF' has no attribute '{name}'")
    return value
