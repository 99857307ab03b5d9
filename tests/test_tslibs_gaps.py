"""Gaps that the time-series packages (``tests/programs/tslibs``:
pytorch-forecasting, tsai) found in tracec, each checked against torch
without the packages: ``torch.DeviceObjType`` / ``torch.StreamObjType``
(TorchScript's types, which pytorch-forecasting's annotations name at
import time) and ``torch.jit.TracerWarning`` (which tsai imports), with
the filters importing torch.jit installs."""
import pytest
import torch

import tracec


@pytest.mark.parametrize("name", ["DeviceObjType", "StreamObjType"])
def test_torchscript_object_types(name):
    ours, theirs = getattr(tracec, name), getattr(torch, name)
    assert ours.__name__ == theirs.__name__
    assert issubclass(ours, tracec.Type) and issubclass(theirs, torch.Type)
    assert str(ours.get()) == str(theirs.get()) and repr(ours.get()) == repr(theirs.get())
    assert ours.get() is ours.get()
    assert str | ours == str | ours           # usable in annotations
    for lib in (torch, tracec):
        with pytest.raises(TypeError, match="No constructor defined"):
            getattr(lib, name)()


def test_tracer_warning():
    for lib in (torch, tracec):
        w = lib.jit.TracerWarning
        assert issubclass(w, Warning) and w.__name__ == "TracerWarning"
        assert "TracerWarning" not in lib.jit.__all__
    import warnings
    for lib in (torch, tracec):        # (pytest resets the filters import installed)
        with warnings.catch_warnings():
            warnings.resetwarnings()
            lib.jit.TracerWarning.ignore_lib_warnings()
            got = [(f[0], f[2] is lib.jit.TracerWarning, f[1] and f[1].pattern, f[3] and f[3].pattern)
                   for f in warnings.filters]
        assert got == [("ignore", False, "torch::jit::fuser::cuda", None),
                       ("ignore", True, None, "torch.(?!jit)")]
