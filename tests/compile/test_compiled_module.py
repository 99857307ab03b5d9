"""``tracec.compile(module)`` returns a module (PyTorch's OptimizedModule):
modes, parameters, state dict keys (``_orig_mod.`` prefixed), attributes,
``Module.compile()`` in place; a model returning ``(logits, loss)`` trains
compiled with ``loss.backward()`` outside, equal to eager (nanoGPT's loop)."""
import numpy as np
import pytest

import tracec
from tracec import nn

F = tracec.nn.functional


class TinyLM(nn.Module):
    """nanoGPT's interface: ``forward(idx, targets)`` gives (logits, loss)."""

    def __init__(self, vocab=11, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.block = nn.Sequential(nn.Linear(dim, 16), nn.GELU(), nn.Dropout(0.1),
                                   nn.Linear(16, dim))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight          # tied, as nanoGPT
        self.vocab = vocab

    def forward(self, idx, targets=None):
        x = self.emb(idx)
        x = x + self.block(x)
        logits = self.head(self.ln(x))
        loss = None if targets is None else F.cross_entropy(
            logits.view(-1, self.vocab), targets.view(-1))
        return logits, loss


def _train(model, opt, steps=5, seed=0):
    rng = np.random.default_rng(seed)
    losses = []
    for i in range(steps):
        x = tracec.tensor(rng.integers(0, 11, (4, 6)))
        y = tracec.tensor(rng.integers(0, 11, (4, 6)))
        tracec.manual_seed(100 + i)          # the same dropout masks on both sides
        _, loss = model(x, y)
        loss.backward()
        tracec.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if i % 2 == 0:
            model.eval()
            with tracec.no_grad():
                losses.append(model(x, y)[1].item())
            model.train()
    return losses


@pytest.mark.parametrize("how", ["wrapper", "method"])
@pytest.mark.usefixtures("counter_rng")
def test_a_compiled_lm_trains_like_eager(how):
    def build():
        tracec.manual_seed(0)
        m = TinyLM()
        return m, tracec.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)
    (me, oe), (mc, oc) = build(), build()
    if how == "wrapper":
        cm = tracec.compile(mc)
    else:
        mc.compile()
        cm = mc
    eager = _train(me, oe)
    compiled = _train(cm, oc)
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    for (k, a), b in zip(me.state_dict().items(), mc.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    info = (cm if how == "wrapper" else mc.__dict__["_compiled_call_impl"]).cache_info()
    assert info.eager_signatures == 0 and info.traces >= 1 and info.hits >= 3


def test_the_wrapper_is_the_module_as_pytorch_shows_it():
    torch = pytest.importorskip("torch")
    tracec.manual_seed(0)
    m = TinyLM()
    cm = tracec.compile(m)
    ref = torch.compile(torch.nn.Linear(2, 3))
    assert isinstance(cm, nn.Module) and type(cm).__name__ == type(ref).__name__
    assert cm._orig_mod is m
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    assert list(ref.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert [p is q for p, q in zip(cm.parameters(), m.parameters())] == [True] * 7
    assert repr(cm).startswith("OptimizedModule(\n  (_orig_mod): TinyLM(")
    cm.eval()
    assert not m.training and not cm.training
    cm.train()
    assert m.training
    assert cm.vocab == 11 and cm.head is m.head          # attributes: the module's
    cm.vocab = 12                                        # set on the module, as PyTorch
    assert m.vocab == 12 and "vocab" not in cm.__dict__
    m.vocab = 11
    # state dicts round-trip with the prefix (nanoGPT strips it to load the raw model)
    sd = {k: v.clone() for k, v in cm.state_dict().items()}
    cm.load_state_dict(sd)
    m2 = TinyLM()
    m2.load_state_dict({k[len("_orig_mod."):]: v for k, v in sd.items()})
    with tracec.no_grad():
        x = tracec.tensor([[1, 2, 3]])
        m.eval(), m2.eval()
        np.testing.assert_allclose(cm(x)[0].numpy(), m2(x)[0].numpy(), rtol=1e-6)
    assert cm.cache_info().traces >= 1                   # the compiled function's own


class TinyCNN(nn.Module):
    """A loss-returning model with dropout and batch norm (state the forward
    writes) for the joint calls of compiled_backward."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(4 * 5 * 5, 3)

    def forward(self, x, y):
        h = self.drop(F.relu(self.bn(self.conv(x))))
        logits = self.fc(h.flatten(1))
        return logits, F.cross_entropy(logits, y)


def _train_scaled(model, opt, seed_on):
    """Steps whose backward is seeded at the loss (scaled, as gradient
    accumulation does) or, from step ``seed_on`` on, at the logits too."""
    rng = np.random.default_rng(1)
    out = []
    for i in range(7):
        x = tracec.tensor(rng.standard_normal((3, 2, 5, 5)).astype(np.float32))
        y = tracec.tensor(rng.integers(0, 3, 3))
        tracec.manual_seed(10 + i)
        logits, loss = model(x, y)
        if i >= seed_on:
            (loss * 0.5 + logits.pow(2).mean() * 0.1).backward()
        else:
            (loss / 4).backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


@pytest.mark.parametrize("seed_on", [99, 4])
@pytest.mark.usefixtures("counter_rng")
def test_a_compiled_model_computes_the_losss_gradients_with_its_forward(seed_on):
    """After a backward seeded at the scalar loss alone, calls run the
    forward and the loss's gradients as one compiled function (no forward
    recomputed in the backward); the backward scales them by the cotangent.
    A backward seeded otherwise (``seed_on``) gets the recomputing backward
    and joint calls stop.  Every step equals eager."""
    def build():
        tracec.manual_seed(0)
        m = TinyCNN()
        return m, tracec.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    (me, oe), (mc, oc) = build(), build()
    cm = tracec.compile(mc)
    want, got = _train_scaled(me, oe, seed_on), _train_scaled(cm, oc, seed_on)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for (k, a), b in zip(me.state_dict().items(), mc.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    plan = cm._last.backward_plan
    assert "joint_compile_s" in cm._last.timings
    assert plan.joint_off == (seed_on < 7)


def test_joint_calls_stop_when_no_backward_reads_them():
    tracec.manual_seed(0)
    m = TinyCNN()
    cm = tracec.compile(m)
    x = tracec.tensor(np.ones((3, 2, 5, 5), np.float32))
    y = tracec.tensor(np.array([0, 1, 2]))
    for _ in range(3):
        cm(x, y)[1].backward()
    plan = cm._last.backward_plan
    assert "joint_compile_s" in cm._last.timings and not plan.joint_off
    for _ in range(3):          # evaluation with grad mode on: nothing reads them
        cm(x, y)
    assert plan.joint_off
    m.zero_grad()
    cm(x, y)[1].backward()      # the recomputing backward again
    assert all(p.grad is not None for p in m.parameters())


def _against_eager(cls, loss_of, batches, seed, backend="cpu", momentum=0.0):
    """Train ``cls`` eagerly and under ``tracec.compile(model)`` side by side
    over ``batches`` (sizes), SGD, ``loss_of(model, x, y)``; every loss and
    the final state equal; returns the compiled model."""
    def build():
        tracec.manual_seed(0)
        m = cls()
        # (SGD: the conv bias before the batch norm gets a gradient that is
        # rounding noise, which Adam would turn into full-size steps)
        return m, tracec.optim.SGD(m.parameters(), lr=0.05, momentum=momentum)
    (me, oe), (mc, oc) = build(), build()
    cm = tracec.compile(mc, backend=backend)
    rng = np.random.default_rng(seed)
    for i, b in enumerate(batches):
        x = tracec.tensor(rng.standard_normal((b, 2, 5, 5)).astype(np.float32))
        y = tracec.tensor(rng.integers(0, 3, b))
        losses = []
        for m, o in ((me, oe), (cm, oc)):
            tracec.manual_seed(seed + i)
            loss = loss_of(m, x, y)
            loss.backward()
            o.step()
            o.zero_grad()
            losses.append(loss.item())
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    for (k, a), b in zip(me.state_dict().items(), mc.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    return cm


def _generic_subs(cm):
    return [s for es in cm._sym.values() for e in es for s in e.generic]


SIZES = (3, 4, 5, 4, 6, 5, 4, 3)


@pytest.mark.usefixtures("counter_rng")
def test_joint_calls_of_a_size_generic_forward_over_batch_sizes():
    cm = _against_eager(TinyCNN, lambda m, x, y: m(x, y)[1], SIZES, 7)
    subs = _generic_subs(cm)
    assert subs and any(s.backward_plan._joint for s in subs), subs


class LogitsCNN(TinyCNN):
    """Returns logits only: the loss is computed outside, as most programs do."""

    def forward(self, x):
        return self.fc(self.drop(F.relu(self.bn(self.conv(x)))).flatten(1))


def _logits_loss(m, x, y):
    logits = m(x)
    return F.cross_entropy(logits, y) + logits.pow(2).mean() * 0.01


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.usefixtures("counter_rng")
def test_a_compiled_model_saves_residuals_for_its_backward(backend):
    """compile(model) with the loss outside: each call runs the forward and
    returns what the backward reads (activations, dropout masks), and the
    backward reads them instead of recomputing the forward.  Every step
    equals eager; no recomputing backward is built."""
    cm = _against_eager(LogitsCNN, _logits_loss, (4,) * 6, 20, backend, momentum=0.9)
    e = cm._last
    assert "split_compile_s" in e.timings and not e.backward_plan._exe, e.timings


@pytest.mark.usefixtures("counter_rng")
def test_residuals_of_a_size_generic_forward_over_batch_sizes():
    cm = _against_eager(LogitsCNN, _logits_loss, SIZES, 9)
    subs = _generic_subs(cm)
    assert subs and any(s.backward_plan._split and s.backward_plan._split[
        next(iter(s.backward_plan._split))][0] for s in subs), subs
    assert all(not s.backward_plan._exe for s in subs)   # no recomputing backward


def test_residual_calls_survive_several_calls_per_backward_and_stop_without_one():
    tracec.manual_seed(0)
    m = LogitsCNN()
    cm = tracec.compile(m)
    x = tracec.tensor(np.ones((3, 2, 5, 5), np.float32))
    for _ in range(4):          # a triplet loss: three calls, one backward
        sum(cm(x * k).pow(2).mean() for k in (1.0, 2.0, 3.0)).backward()
    plan = cm._last.backward_plan
    assert plan._split and not plan.split_off and not plan._exe
    for _ in range(10):         # evaluation with grad mode on: no backward reads them
        cm(x)
    assert plan.split_off


def test_residuals_are_freed_by_a_backward_that_keeps_no_graph():
    tracec.manual_seed(0)
    cm = tracec.compile(LogitsCNN())
    x = tracec.tensor(np.ones((3, 2, 5, 5), np.float32))
    cm(x).sum().backward()        # (the first call traces, eagerly)
    for retain in (True, False):
        out = cm(x)
        saved = out.grad_fn.ctx
        assert saved.split is not None and saved.split[1]
        out.pow(2).mean().backward(retain_graph=retain)
        assert (saved.split[1] is None) == (not retain)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.pow(2).mean().backward()


@pytest.mark.usefixtures("counter_rng")
def test_a_model_the_split_cannot_handle_trains_with_the_recomputing_backward(monkeypatch):
    from tracec import compiled_backward

    def refuse(self, wrt):
        raise compiled_backward._NoSplit("refused for the test")
    monkeypatch.setattr(compiled_backward.BackwardPlan, "_partition", refuse)
    cm = _against_eager(LogitsCNN, _logits_loss, (4,) * 4, 30)
    e = cm._last
    assert "refused for the test" in e.timings["split"] and e.backward_plan._exe
