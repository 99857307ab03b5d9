"""Gaps the models24 programs (tests/programs/models24) found in tracec."""
import pytest

import tracec as torch


def test_to_accepts_none_in_the_device_forms_slots():
    # performer-pytorch: `torch.randn(shape, device=device)` wrapped as
    # `torch.from_numpy(...).to(device)` with device=None (the default of
    # gaussian_orthogonal_random_matrix). PyTorch's to(device=None,
    # dtype=None, ...) overload leaves a None slot as it is; tracec refused
    # "to(): unexpected argument None".
    t = torch.ones(2)
    assert t.to(None) is t
    assert t.to(None, None) is t
    assert t.to("cpu", None) is t
    d = t.to(None, torch.float64)
    assert d.dtype is torch.float64 and d.tolist() == [1.0, 1.0]
    assert t.to(None, torch.float64, False).dtype is torch.float64


@pytest.mark.parametrize("args", [(torch.float64, None), (torch.ones(1), None)])
def test_to_still_refuses_none_outside_the_device_form(args):
    # torch: "to() received an invalid combination of arguments"
    with pytest.raises(TypeError):
        torch.ones(2).to(*args)
