"""Gaps that peft, captum and opacus (``tests/programs/hf2libs``) found in
tracec, each checked against torch without the libraries."""
import pytest
import torch

import tracec


@pytest.mark.parametrize("spec", ["mps", "mps:0", "xpu:1", "hpu", "xla", "privateuseone"])
def test_every_torch_device_type_can_be_named(spec):
    """torch.device parses all of PyTorch's device types, whatever the build
    (peft's load_peft_weights compares with ``torch.device("mps")``); only
    cpu and meta hold tensors."""
    a, b = torch.device(spec), tracec.device(spec)
    assert (str(b), repr(b), b.type, b.index) == (str(a), repr(a), a.type, a.index)
    assert (b == tracec.device("cpu")) is False


def test_unknown_device_type_message_lists_torchs_types():
    with pytest.raises(RuntimeError) as want:
        torch.device("foo")
    with pytest.raises(RuntimeError) as got:
        tracec.device("foo")
    assert str(got.value) == str(want.value)


def test_tensor_on_a_device_this_build_lacks_is_refused():
    with pytest.raises(NotImplementedError):
        torch.empty(1, device="mps")
    with pytest.raises(NotImplementedError, match="MPS"):
        tracec.empty(1, device="mps")
