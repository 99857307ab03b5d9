"""Gaps that lucidrains' packages (``tests/programs/lucidlibs``: vit-pytorch,
x-transformers, ...) found in tracec, each checked against torch without
the packages: softmax / log_softmax / layer_norm give contiguous results
whatever the input's strides, so a dropout mask drawn over the result
follows PyTorch's element order (vit_pytorch's CaiT mixes heads with
``einsum('b h i j, h g -> b g i j')`` before its softmax and dropout)."""
import numpy as np
import pytest
import torch

import tracec


def _permuted(lib):
    lib.manual_seed(0)
    x = lib.randn(2, 3, 4, 5)
    mix = lib.randn(3, 3)
    return lib.einsum("b h i j, h g -> b g i j", x, mix)     # strides (60, 1, 15, 3)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax1", "layer_norm"])
def test_normalizations_of_a_permuted_input_are_contiguous(op):
    outs = []
    for lib in (torch, tracec):
        y = _permuted(lib).requires_grad_()
        f = {"softmax": lambda t: t.softmax(-1), "log_softmax": lambda t: t.log_softmax(-1),
             "softmax1": lambda t: lib.nn.Softmax(dim=1)(t),
             "layer_norm": lambda t: lib.nn.functional.layer_norm(t, (5,))}[op]
        z = f(y)
        lib.manual_seed(1)
        d = lib.nn.functional.dropout(z, 0.5)          # the mask follows z's layout
        d.sum().backward()
        outs.append((z.stride(), z.is_contiguous(), d.detach().numpy(), y.grad.numpy()))
    (s0, c0, d0, g0), (s1, c1, d1, g1) = outs
    assert (s1, c1) == (s0, c0) == ((60, 20, 5, 1), True)
    np.testing.assert_allclose(d1, d0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-6)
