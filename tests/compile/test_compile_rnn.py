"""Compiled recurrent models equal eager: a small LSTM language model's
training step (Embedding -> 2-layer LSTM -> Linear, cross entropy, SGD)
whose hidden state is passed in as two tensors and carried, detached, from
call to call; and a ``for t in range(T)`` loop over an ``LSTMCell``."""
import numpy as np
import pytest

import tracec
import tracec.nn.functional as F
from tracec import nn

V, E, H, L, T, B = 11, 6, 5, 2, 4, 3


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.rnn = nn.LSTM(E, H, L, dropout=0.2)
        self.fc = nn.Linear(H, V)

    def forward(self, tokens, h, c):
        out, (h, c) = self.rnn(self.emb(tokens), (h, c))
        return self.fc(out), h, c


def _setup():
    tracec.manual_seed(0)
    model = LM()
    opt = tracec.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

    def step(x, y, h, c):
        opt.zero_grad()
        logits, h, c = model(x, h, c)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        return loss, h.detach(), c.detach()
    return model, step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.usefixtures("counter_rng")
def test_compiled_lstm_lm_step_carrying_hidden_equals_eager(backend):
    me, se = _setup()
    mc, sc = _setup()
    sc = tracec.compile(sc, backend=backend)
    tracec.manual_seed(3)
    data = tracec.randint(0, V, (4 * T + 1, B))
    he, ce, hc, cc = (tracec.zeros(L, B, H) for _ in range(4))  # no aliasing
    for i in range(4):
        x, y = data[i * T:(i + 1) * T], data[i * T + 1:(i + 1) * T + 1]
        rng = tracec.get_rng_state()  # the same dropout masks in both runs
        le, he, ce = se(x, y, he, ce)
        tracec.set_rng_state(rng)
        lc, hc, cc = sc(x, y, hc, cc)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hc.numpy(), he.numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(cc.numpy(), ce.numpy(), rtol=1e-4, atol=1e-6)
        assert not hc.requires_grad and not cc.requires_grad
    for (n, a), (_, b) in zip(me.named_parameters(), mc.named_parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=n)
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=n)
    # the momentum buffers are made before the first traced step: its trace
    # is reused from the second call on
    assert sc.cache_info().hits == 3, sc.cache_info().reasons


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_lstm_cell_loop_equals_eager(backend):
    tracec.manual_seed(0)
    cell = nn.LSTMCell(E, H)
    head = nn.Linear(H, 1)

    def run(xs):
        h = c = tracec.zeros(B, H)
        outs = []
        for t in range(T):
            h, c = cell(xs[t], (h, c))
            outs.append(head(h))
        loss = tracec.stack(outs).pow(2).mean()
        loss.backward()
        return loss, h, c

    def grads():
        g = [p.grad.numpy().copy() for p in (*cell.parameters(), *head.parameters())]
        for p in (*cell.parameters(), *head.parameters()):
            p.grad = None
        return g
    comp = tracec.compile(run, backend=backend)
    for seed in (1, 2):
        tracec.manual_seed(seed)
        xs = tracec.randn(T, B, E)
        want = run(xs)
        g_want = grads()
        got = comp(xs)
        g_got = grads()
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
        for a, b in zip(g_got, g_want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert comp.cache_info().hits >= 1


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_compiled_nn_rnn_step_with_hidden_tuple_equals_eager(backend, cell):
    """The public word_language_model's step: ``hidden`` passed as the tuple
    ``(h, c)`` (a tensor for GRU) and returned repackaged (the issue-8 bug:
    the tuple's tensors were read from the first call)."""
    def setup():
        tracec.manual_seed(0)
        emb, rnn, fc = nn.Embedding(V, E), getattr(nn, cell)(E, H, L), nn.Linear(H, V)
        params = [*emb.parameters(), *rnn.parameters(), *fc.parameters()]
        opt = tracec.optim.SGD(params, lr=0.5)

        def step(x, y, hidden):
            hidden = (tuple(h.detach() for h in hidden) if isinstance(hidden, tuple)
                      else hidden.detach())
            opt.zero_grad()
            out, hidden = rnn(emb(x), hidden)
            loss = F.cross_entropy(fc(out).reshape(-1, V), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss, hidden
        return params, step
    pe, se = setup()
    pc, sc = setup()
    sc = tracec.compile(sc, backend=backend)
    tracec.manual_seed(3)
    data = tracec.randint(0, V, (4 * T + 1, B))
    zero = (lambda: (tracec.zeros(L, B, H), tracec.zeros(L, B, H))) if cell == "LSTM" \
        else (lambda: tracec.zeros(L, B, H))
    he, hc = zero(), zero()
    for i in range(4):
        x, y = data[i * T:(i + 1) * T], data[i * T + 1:(i + 1) * T + 1]
        le, he = se(x, y, he)
        lc, hc = sc(x, y, hc)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5, atol=1e-6)
        assert type(hc) is type(he)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)
    # the returned hidden state requires grad (as eagerly): the second call's
    # argument differs from the first call's zeros, then the trace is reused
    info = sc.cache_info()
    assert info.traces == 2 and info.hits == 2, info.reasons


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_returned_hidden_requires_grad_as_eagerly(backend):
    """After a backward inside the step, the returned hidden state requires
    grad (its graph consumed), at every call as eagerly; was: True, False,
    True, ... and a retrace every other call."""
    def setup():
        tracec.manual_seed(0)
        rnn, fc = nn.LSTM(E, H), nn.Linear(H, 1)
        opt = tracec.optim.SGD([*rnn.parameters(), *fc.parameters()], lr=0.1)

        def step(x, hidden):
            hidden = tuple(h.detach() for h in hidden)
            opt.zero_grad()
            out, hidden = rnn(x, hidden)
            fc(out).pow(2).mean().backward()
            opt.step()
            return hidden
        return step
    se, sc = setup(), tracec.compile(setup(), backend=backend)
    he = hc = (tracec.zeros(1, B, H), tracec.zeros(1, B, H))
    x = tracec.randn(T, B, E)
    for _ in range(5):
        he, hc = se(x, he), sc(x, hc)
        assert [h.requires_grad for h in hc] == [h.requires_grad for h in he] == [True, True]
        assert hc[0].grad_fn.name() == he[0].grad_fn.name()
        np.testing.assert_allclose(hc[0].detach().numpy(), he[0].detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        he[0].sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        hc[0].sum().backward()
    assert sc.cache_info().traces == 2, sc.cache_info().reasons
