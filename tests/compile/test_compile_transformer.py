"""A compiled training step of a small causal transformer LM (Embedding +
learned positions + TransformerEncoder with a causal mask + Linear, AdamW)
equals eager over 3 steps, with dropout off and on (the generator state is
traced, so the compiled step draws the same masks)."""
import numpy as np
import pytest

import tracec
from tracec import nn
import tracec.nn.functional as F

V, D, H, T, B = 11, 8, 2, 5, 3


class CausalLM(nn.Module):
    def __init__(self, layers: int, dropout: float):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        layer = nn.TransformerEncoderLayer(D, H, dim_feedforward=16, dropout=dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(D, V)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T))

    def forward(self, idx):
        h = self.tok(idx) + self.pos(tracec.arange(idx.shape[1]))
        return self.head(self.encoder(h, mask=self.mask, is_causal=True))


def _setup(dropout: float):
    tracec.manual_seed(0)
    model = CausalLM(2, dropout)
    # eps well above rounding noise: the key projection's bias has an exactly
    # zero gradient (softmax ignores a per-row shift), and Adam's
    # normalisation would turn that gradient's rounding noise (different in
    # eager and compiled code) into full-size steps.
    opt = tracec.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-4)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        loss.backward()
        opt.step()
        return loss
    return model, step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("dropout", [0.0, 0.2])
@pytest.mark.usefixtures("counter_rng")
def test_compiled_causal_lm_training_equals_eager(backend, dropout):
    me, se = _setup(dropout)
    mc, sc = _setup(dropout)
    sc = tracec.compile(sc, backend=backend)
    tracec.manual_seed(3)
    x, y = tracec.randint(0, V, (B, T)), tracec.randint(0, V, (B, T))
    losses = []
    for _ in range(3):
        rng = tracec.get_rng_state()     # both runs draw the same dropout masks
        le = se(x, y)
        tracec.set_rng_state(rng)
        lc = sc(x, y)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5, atol=1e-6)
        losses.append(le.item())
    assert losses[-1] < losses[0]
    assert sc.cache_info().traces >= 1
    for (n, a), (_, b) in zip(me.named_parameters(), mc.named_parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=n)
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=n)
