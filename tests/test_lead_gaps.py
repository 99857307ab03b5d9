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


def _patch_embed_losses(lib):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.proj = nn.Conv2d(3, 16, 8, 8)
            s.pos = nn.Parameter(lib.randn(1, 16, 16) * 0.02)
            s.drop = nn.Dropout(0.3)
            s.tok = nn.Linear(16, 16)
            s.head = nn.Linear(16, 5)

        def forward(s, x):
            x = s.proj(x).flatten(2).transpose(1, 2)     # timm's PatchEmbed: a transposed layout
            x = s.drop(x + s.pos)                         # its pos_drop over that layout
            x = x + s.drop(s.tok(x))
            return s.head(x.mean(1))
    m = Net()
    opt = lib.optim.AdamW(m.parameters(), lr=1e-2)
    x, y = lib.randn(4, 3, 32, 32), lib.randint(0, 5, (4,))
    out = []
    for _ in range(3):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def test_dropout_after_a_patch_embedding_draws_pytorchs_mask():
    """A seeded ViT-style training loop prints PyTorch's losses: the sum of
    a transposed patch embedding and a positional table keeps the
    embedding's layout (TensorIterator's rule), so the dropout mask drawn
    over it in memory order is PyTorch's (it was row-major: other masks,
    other losses from the first step)."""
    ours, theirs = _patch_embed_losses(tracec), _patch_embed_losses(torch)
    assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-6)
