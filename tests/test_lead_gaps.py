"""Gaps the lead found probing tracec against torch 2.13 with short
programs (each compared with real torch, no library involved)."""
import pytest
import torch

import tracec
import tracec.nn as tn


def _shape_error(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    return str(e.value)


def test_lazy_module_state_dict_holds_the_uninitialized_parameter_itself():
    # PyTorch's LazyModuleMixin saves uninitialized parameters undetached,
    # so reading their shape raises (tracec gave a detached (0,) tensor)
    for lib in (torch, tracec):
        m = lib.nn.LazyLinear(4)
        sd = m.state_dict()
        assert isinstance(sd["weight"], lib.nn.parameter.UninitializedParameter)
        assert "uninitialized parameter" in _shape_error(lambda: sd["weight"].shape)
        assert sd["weight"] is m.weight
        kept = m.state_dict(keep_vars=True)["bias"]
        assert kept is m.bias
    m = tn.LazyLinear(3)
    m(tracec.ones(2, 5))
    sd = m.state_dict()
    assert sd["weight"].shape == (3, 5) and sd["weight"] is not m.weight
    assert not sd["weight"].requires_grad
