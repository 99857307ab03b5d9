"""Gaps the public programs of ``tests/programs/models11`` found, each
against torch: ``Conv1d/2d/3d._conv_forward(input, weight, bias)`` as the
hook subclasses override (openai/whisper's Conv1d casts its weight to the
input's dtype there); ``EmbeddingBag``'s repr showing its sizes as their
repr, as torch does (facebookresearch/dlrm builds its tables from numpy
integers)."""
import numpy as np
import pytest
import torch

import tracec


def _cast_conv(lib, base):
    class CastConv(base):
        calls = 0

        def _conv_forward(self, x, weight, bias):
            type(self).calls += 1
            return super()._conv_forward(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))
    return CastConv


@pytest.mark.parametrize("nd,padding_mode", [(1, "zeros"), (2, "zeros"), (2, "reflect"), (3, "zeros")])
def test_conv_forward_override(nd, padding_mode):
    r = np.random.default_rng(0)
    x = r.standard_normal((2, 3) + (5,) * nd).astype(np.float32)
    wt = r.standard_normal((4, 3) + (3,) * nd).astype(np.float32)
    outs = []
    for lib in (torch, tracec):
        conv = _cast_conv(lib, getattr(lib.nn, f"Conv{nd}d"))(3, 4, 3, padding=1, padding_mode=padding_mode)
        with lib.no_grad():
            conv.weight.copy_(lib.from_numpy(wt))
            conv.bias.fill_(0.5)
        conv = conv.double()
        y = conv(lib.from_numpy(x).double())
        assert type(conv).calls == 1 and y.dtype == lib.float64
        # called with the module's weight and bias, positionally
        w = conv._conv_forward(lib.from_numpy(x).double(), conv.weight, None)
        outs.append((y.detach().numpy(), w.detach().numpy()))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-6, atol=1e-6)


def test_embedding_bag_repr_shows_sizes_as_given():
    for n in (10, np.int64(10)):
        a = repr(tracec.nn.EmbeddingBag(n, np.int32(4), mode="sum", sparse=True))
        b = repr(torch.nn.EmbeddingBag(n, np.int32(4), mode="sum", sparse=True))
        assert a == b, (a, b)
    assert repr(tracec.nn.EmbeddingBag(5, 3, max_norm=1.0, padding_idx=0)) == \
        repr(torch.nn.EmbeddingBag(5, 3, max_norm=1.0, padding_idx=0))
