"""Gaps that the packages of ``tests/programs/misclibs`` (snntorch, ...)
found in tracec, each checked against torch without the packages:

- ``torch._C.Value`` (TorchScript's IR value class) exists, cannot be
  constructed, and is named ``torch.Value`` (snntorch's losses import it).
"""
import pytest
import torch

import tracec


def test_torch_C_Value_exists_and_has_no_constructor():
    for lib in (torch, tracec):
        cls = lib._C.Value
        assert (cls.__module__, cls.__qualname__) == ("torch", "Value")
        with pytest.raises(TypeError, match="No constructor defined"):
            cls()
