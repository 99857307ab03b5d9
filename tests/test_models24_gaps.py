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


def test_isinstance_of_a_legacy_tensor_type_checks_dtype_and_device():
    # pytorch-AdaIN's _calc_feat_flatten_mean_std asserts
    # isinstance(feat, torch.FloatTensor). tracec's FloatTensor was Tensor
    # itself, so a float64 tensor passed; and LongTensor & co. were plain
    # functions, so isinstance() with them raised TypeError. In PyTorch they
    # are torch.tensortype instances: a CPU tensor of exactly that dtype.
    x = torch.ones(2, 3)
    assert isinstance(x, torch.FloatTensor)
    assert isinstance(torch.nn.Parameter(x), torch.FloatTensor)
    assert not isinstance(x.double(), torch.FloatTensor)
    assert isinstance(x.double(), torch.DoubleTensor)
    assert isinstance(x.long(), torch.LongTensor) and not isinstance(x, torch.LongTensor)
    assert not isinstance(x.to("meta"), torch.FloatTensor)
    assert not isinstance([1.0], torch.FloatTensor)
    assert not issubclass(torch.FloatTensor, torch.Tensor)
    assert torch.FloatTensor.dtype is torch.float32 and torch.LongTensor.__name__ == "LongTensor"


def test_legacy_float_tensor_constructor_is_float32_whatever_the_default_dtype():
    # torch.FloatTensor(2) is float32 even under set_default_dtype(float64)
    # (torch.Tensor(2) follows the default); tracec's FloatTensor was Tensor.
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.FloatTensor(2).dtype is torch.float32
        assert torch.FloatTensor([1, 2]).dtype is torch.float32
        assert torch.Tensor(2).dtype is torch.float64
    finally:
        torch.set_default_dtype(old)
    assert torch.ones(2).double().type(torch.FloatTensor).dtype is torch.float32
    assert torch.FloatTensor(2, 3).tolist() == [[0.0] * 3] * 2
