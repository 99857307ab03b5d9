"""Compiled training steps of nn models equal eager over 10 steps: an MLP
with SGD momentum, the same with Adam, a small CNN (conv, batch norm, max
pool, dropout), and a model with Embedding, LayerNorm and GELU."""
import numpy as np
import pytest

import tracec
from tracec import nn
import tracec.nn.functional as F


class TokenModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 16)
        self.out = nn.Linear(16, 5)

    def forward(self, tokens):
        h = self.norm(self.emb(tokens))            # [B, T, 8]
        h = F.gelu(self.fc(h)).mean(dim=1)         # [B, 16]
        return self.out(h)


def _model(kind):
    tracec.manual_seed(0)
    if kind in ("mlp_sgd", "mlp_adam"):
        return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
                             nn.Linear(4 * 4 * 4, 3))
    return TokenModel()


def _data(kind):
    tracec.manual_seed(7)
    if kind.startswith("mlp"):
        return tracec.randn(8, 12), tracec.randint(0, 4, (8,))
    if kind == "cnn":
        return tracec.randn(6, 1, 8, 8), tracec.randint(0, 3, (6,))
    return tracec.randint(0, 20, (4, 6)), tracec.randint(0, 5, (4,))


def _setup(kind):
    model = _model(kind)
    opt = (tracec.optim.Adam(model.parameters(), lr=1e-2) if kind in ("mlp_adam", "tokens")
           else tracec.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, opt, step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("kind", ["mlp_sgd", "mlp_adam", "cnn", "tokens"])
@pytest.mark.usefixtures("counter_rng")
def test_compiled_model_training_equals_eager(kind, backend):
    me, oe, se = _setup(kind)
    mc, oc, sc = _setup(kind)
    sc = tracec.compile(sc, backend=backend)
    x, y = _data(kind)
    held = [p for p in mc.parameters()] + [b for b in mc.buffers()]
    tracec.manual_seed(11)
    for _ in range(10):
        rng = tracec.get_rng_state()  # both runs draw the same dropout masks
        le = se(x, y)
        tracec.set_rng_state(rng)
        lc = sc(x, y)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5, atol=1e-6)
    for (n, a), (_, b) in zip(me.named_parameters(), mc.named_parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=n)
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=n)
    for (n, a), (_, b) in zip(me.named_buffers(), mc.named_buffers()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
    for pa, pb in zip(me.parameters(), mc.parameters()):
        for k in oe.state[pa]:
            va, vb = oe.state[pa][k], oc.state[pb][k]
            np.testing.assert_allclose(np.asarray(vb.numpy() if hasattr(vb, "numpy") else vb),
                                       np.asarray(va.numpy() if hasattr(va, "numpy") else va),
                                       rtol=1e-4, atol=1e-6, err_msg=k)
    now = [p for p in mc.parameters()] + [b for b in mc.buffers()]
    assert all(a is b for a, b in zip(held, now))
    assert sc.cache_info().hits >= 8, sc.cache_info().reasons


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_switching_train_and_eval_retraces_and_matches_eager(backend):
    """A module's train/eval flag steers dropout and batch norm: a trace made
    in one mode is never reused in the other."""
    from tracec import nn
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.Linear(8, 2))
    fwd = tracec.compile(tracec.no_grad()(lambda x: model(x)), backend=backend)
    x = tracec.randn(16, 4)
    model.train()
    fwd(x)
    fwd(x)
    model.eval()
    with tracec.no_grad():
        want = model(x).numpy()
    for _ in range(2):
        np.testing.assert_allclose(fwd(x).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    info = fwd.cache_info()
    assert info.traces == 2 and "mode_and_tensors" in info.reasons[1], info.reasons
    model.train()
    fwd(x)
    assert fwd.cache_info().traces == 2   # the training trace is still there
