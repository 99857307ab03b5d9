"""Creation functions called without a size, checked against torch 2.13 in
the same process: PyTorch raises (``torch.zeros(())`` is its 0-d tensor,
``torch.zeros()`` is a TypeError); tracec returned a 0-d tensor."""
import pytest
import torch

import tracec

CALLS = [("zeros", {}), ("ones", {}), ("empty", {}), ("rand", {}), ("randn", {}),
         ("zeros", {"dtype": "float64"}), ("ones", {"requires_grad": True}),
         ("randn", {"dtype": "float64"}), ("rand", {"generator": None})]


def _error(lib, name, kw):
    kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kw.items()}
    with pytest.raises(TypeError) as e:
        getattr(lib, name)(**kw)
    return str(e.value)


@pytest.mark.parametrize("name,kw", CALLS)
def test_factory_without_size_raises_torchs_type_error(name, kw):
    assert _error(tracec, name, kw) == _error(torch, name, kw)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_factory_with_empty_size_is_0d(name):
    for size in ((), []):
        assert getattr(tracec, name)(size).shape == getattr(torch, name)(size).shape == ()
        assert getattr(tracec, name)(size=size).shape == ()
