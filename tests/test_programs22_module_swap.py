"""``torch.utils.swap_tensors``, ``torch.__future__``'s conversion switches
as ``nn.Module._apply`` reads them, and ``Module.call_super_init`` /
``Module.__init__``'s argument errors, checked against torch (all were
missing: swap_tensors and torch.__future__ raised AttributeError,
Module(foo=1) gave another message, call_super_init was ignored)."""
import pytest
import torch

import tracec


def _d(dtype):
    return str(dtype).split(".")[-1]


def _swap(lib):
    a, b = lib.zeros(2), lib.ones(3, dtype=lib.float64)
    a.tag = "a"
    lib.utils.swap_tensors(a, b)
    p, t = lib.nn.Parameter(lib.ones(2)), lib.zeros(2)
    lib.utils.swap_tensors(p, t)
    return (a.tolist(), _d(a.dtype), hasattr(a, "tag"), getattr(b, "tag", None), b.tolist(),
            type(p).__name__, p.requires_grad, type(t).__name__, t.requires_grad, t.tolist())


def _swap_module(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 2)
    w = m.weight
    m(lib.ones(1, 2)).sum().backward()
    g = w.grad
    lib.__future__.set_swap_module_params_on_conversion(True)
    try:
        m.double()
        before = (m.weight is w, _d(w.dtype), w.grad is g, _d(g.dtype), type(w).__name__)
        m.zero_grad()
        m(lib.ones(1, 2, dtype=lib.float64)).sum().backward()
        return before + (w.grad.tolist(), lib.__future__.get_swap_module_params_on_conversion())
    finally:
        lib.__future__.set_swap_module_params_on_conversion(False)


def _overwrite_module(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 2)
    m(lib.ones(1, 2)).sum().backward()
    w = m.weight
    lib.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        m.double()
        out = (m.weight is w, _d(m.weight.dtype), _d(w.dtype), type(m.weight).__name__,
               _d(m.weight.grad.dtype), m.weight.requires_grad,
               [n for n, _ in m.named_parameters()])
    finally:
        lib.__future__.set_overwrite_module_params_on_conversion(False)
    w = m.weight
    m.float()
    return out + (m.weight is w, lib.__future__.get_overwrite_module_params_on_conversion())


def _init_args(lib):
    out = []
    for args, kwargs in (((), {"foo": 1}), ((3,), {})):
        try:
            lib.nn.Module(*args, **kwargs)
        except TypeError as e:
            out.append(str(e))

    class Mixin:
        def __init__(self, *args, **kwargs):
            self.mixin_args = (args, kwargs)

    class Cooperative(lib.nn.Module, Mixin):
        call_super_init = True

    m = Cooperative(1, k=2)
    return out + [m.mixin_args, m.training, lib.nn.Module.call_super_init]


@pytest.mark.parametrize("case", [_swap, _swap_module, _overwrite_module, _init_args],
                         ids=lambda f: f.__name__)
def test_module_swap_matches_torch(case):
    assert case(tracec) == case(torch)
