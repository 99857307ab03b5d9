"""Gaps that the time-series packages (``tests/programs/tslibs``:
pytorch-forecasting, tsai) found in tracec, each checked against torch
without the packages: ``torch.DeviceObjType`` / ``torch.StreamObjType``
(TorchScript's types, which pytorch-forecasting's annotations name at
import time)."""
import pytest
import torch

import tracec


@pytest.mark.parametrize("name", ["DeviceObjType", "StreamObjType"])
def test_torchscript_object_types(name):
    ours, theirs = getattr(tracec, name), getattr(torch, name)
    assert (ours.__name__, ours.__module__) == (theirs.__name__, theirs.__module__)
    assert issubclass(ours, tracec.Type) and issubclass(theirs, torch.Type)
    assert str(ours.get()) == str(theirs.get()) and repr(ours.get()) == repr(theirs.get())
    assert ours.get() is ours.get()
    assert str | ours == str | ours           # usable in annotations
    for lib in (torch, tracec):
        with pytest.raises(TypeError, match="No constructor defined"):
            getattr(lib, name)()
