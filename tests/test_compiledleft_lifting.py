"""Number attributes of a module set between compiled calls (a dVAE's
Gumbel-softmax temperature annealed by the training loop:
``model.temperature = max(0.5, t * decay)``) are lifted as an optimizer's
learning rate is: the retrace that finds one changed reads it as an input,
so one trace serves every later value.  Before, every call retraced until
``max_traces`` and then ran eagerly.  A lifted attribute the trace uses as a
plain number (a loop count) specializes on it instead (each value its own
trace), never a stale value."""
import contextlib

import numpy as np
import pytest
import torch

import tracec
from tracec import torch_rng


def _dvae(lib, gumbel):
    nn, F = lib.nn, lib.nn.functional

    class DVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(8, 6)
            self.dec = nn.Linear(6, 8)
            self.temperature = 1.0

        def forward(self, x):
            logits = self.enc(x)
            if gumbel:
                z = F.gumbel_softmax(logits, tau=self.temperature, hard=False)
            else:
                z = F.softmax(logits / self.temperature, dim=-1)
            return self.dec(z), z
    lib.manual_seed(0)
    m = DVAE()
    opt = lib.optim.Adam(m.parameters(), lr=1e-2)

    def step(x):
        opt.zero_grad()
        rec, z = m(x)
        loss = F.mse_loss(rec, x) + 0.01 * (z * (z + 1e-8).log()).sum(-1).mean()
        loss.backward()
        opt.step()
        return loss
    return m, step


def _train(lib, compiled, gumbel, steps=8):
    m, step = _dvae(lib, gumbel)
    fn = tracec.compile(step) if compiled else step
    g = np.random.default_rng(3)
    t, losses = 1.0, []
    # (the Gumbel noise from the stream compiled code draws from, eager too:
    # the initial weights are PyTorch's all the same)
    with torch_rng.counter_draws() if lib is tracec else contextlib.nullcontext():
        for _ in range(steps):
            x = lib.tensor(g.standard_normal((4, 8)).astype(np.float32))
            t = max(0.5, t * 0.9)
            m.temperature = t
            losses.append(float(fn(x).detach()))
    return np.array(losses), [p.detach().numpy().copy() for p in m.parameters()], fn


@pytest.mark.parametrize("gumbel", [False, True])
def test_annealed_temperature_attribute_is_lifted(gumbel):
    le, pe, _ = _train(tracec, False, gumbel)
    lc, pc, fn = _train(tracec, True, gumbel)
    np.testing.assert_allclose(lc, le, rtol=1e-5, atol=1e-6)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    info = fn.cache_info()
    assert info.traces == 2, info.reasons
    assert info.lifted[-1] == ["DVAE.temperature"]
    assert not info.eager_reasons
    if not gumbel:
        lt, pt, _ = _train(torch, False, gumbel)
        np.testing.assert_allclose(le, lt, rtol=1e-5, atol=1e-6)
        for a, b in zip(pe, pt):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _repeat_model(lib):
    nn = lib.nn

    class Repeat(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.n = 1
            self.scale = 1.0

        def forward(self, x):
            for _ in range(self.n):        # a plain number: specialized
                x = self.lin(x)
            return x * self.scale          # a tensor operand: lifted
    lib.manual_seed(0)
    return Repeat()


def test_module_number_used_as_a_loop_count_specializes():
    m = _repeat_model(tracec)
    fn = tracec.compile(lambda x: m(x).sum())
    x = tracec.ones(2, 3)
    plan = [(1, 1.0), (2, 1.0), (2, 0.5), (3, 0.25), (2, 2.0), (3, 0.25), (1, 4.0)]
    for n, s in plan:
        m.n, m.scale = n, s
        got = float(fn(x))
        with tracec.no_grad():
            want = float(m(x).sum())
        assert got == pytest.approx(want, rel=1e-6), (n, s)
    info = fn.cache_info()
    assert info.traces <= 6, info.reasons


def test_module_attribute_changed_by_the_loop_as_an_int_step_counter():
    """An int attribute set between calls and used as a tensor operand
    (a KL warm-up weight computed from ``self.step``) is lifted too."""
    nn = tracec.nn
    tracec.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)
            self.step = 0

        def forward(self, x):
            return self.lin(x).sum() * min(1.0, self.step / 4)
    m = M()
    fn = tracec.compile(lambda x: m(x))
    x = tracec.ones(2, 3)
    for i in range(7):
        m.step = i
        with tracec.no_grad():
            want = float(m(x))
        assert float(fn(x)) == pytest.approx(want, rel=1e-6, abs=1e-7), i
    assert fn.cache_info().traces <= 3, fn.cache_info().reasons


global_step = 0
cfg = {"kl_weight": 0.0}


class _HP:
    beta = 0.0


hp = _HP()


def _warmup_step(lib, m, opt):
    def step(x):
        opt.zero_grad()
        warm = min(1.0, global_step / 5)
        loss = (m(x).pow(2).mean() * warm + cfg["kl_weight"] * m.weight.abs().sum()
                + hp.beta * m.bias.pow(2).sum())
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def test_globals_the_loop_advances_are_lifted():
    """A ``global_step`` the loop advances, a config dict's weight and a
    global object's attribute, read by the step (a KL warm-up): the
    retrace that finds them changed lifts them (was: a trace per call).
    The warm-up's ``min`` is a decision: one more trace where it flips."""
    def run(lib, compiled):
        lib.manual_seed(0)
        m = lib.nn.Linear(4, 1)
        opt = lib.optim.SGD(m.parameters(), lr=0.01)
        fn = _warmup_step(lib, m, opt)
        fn = tracec.compile(fn) if compiled else fn
        out = []
        for i in range(10):
            global global_step
            global_step = i
            cfg["kl_weight"] = i * 0.01
            hp.beta = i * 0.1
            out.append(float(fn(lib.ones(2, 4) * (1 + i / 10))))
        return np.array(out), m.weight.detach().numpy().copy(), fn
    lt, wt, _ = run(torch, False)
    le, we, _ = run(tracec, False)
    lc, wc, fn = run(tracec, True)
    np.testing.assert_allclose(le, lt, rtol=1e-5)
    np.testing.assert_allclose(we, wt, rtol=1e-5)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    np.testing.assert_allclose(wc, we, rtol=1e-5)
    info = fn.cache_info()
    assert info.traces == 3, info.reasons
    assert sorted(info.lifted[1]) == ["cfg['kl_weight']", "global_step", "hp.beta"]


n_blocks = 1


def test_a_global_used_as_a_loop_count_specializes():
    tracec.manual_seed(0)
    lin = tracec.nn.Linear(3, 3)

    def f(x):
        for _ in range(n_blocks):
            x = lin(x)
        return x.sum()
    fn = tracec.compile(f)
    x = tracec.ones(2, 3)
    global n_blocks
    for n in (1, 2, 3, 2, 1, 3):
        n_blocks = n
        with tracec.no_grad():
            want = float(f(x))
        assert float(fn(x)) == pytest.approx(want, rel=1e-6)
    assert fn.cache_info().traces <= 4, fn.cache_info().reasons


def test_attributes_a_trace_cannot_use_as_traced_numbers_specialize():
    """A module's ``k`` (``topk(self.k)``), ``eps`` and ``alpha`` changed
    between calls: the lifted retrace cannot record ``topk`` of a traced
    number, so it finishes eagerly and the function specializes on them
    (a trace per value, as before lifting): never a TraceError, never
    eager from then on."""
    nn, F = tracec.nn, tracec.nn.functional
    tracec.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.eps, self.k, self.alpha = 1e-5, 2, 0.2

        def forward(self, x):
            h = F.leaky_relu(self.lin(x), self.alpha)
            h = F.layer_norm(h, (4,), eps=self.eps)
            return h.topk(self.k, dim=-1).values.sum()
    m = M()
    fn = tracec.compile(lambda x: m(x))
    for i in range(6):
        m.eps, m.alpha, m.k = 1e-5 * (i + 1), 0.1 * (i + 1), 1 + i % 3
        x = tracec.ones(2, 4) * (i + 1)
        with tracec.no_grad():
            want = float(m(x))
        assert float(fn(x).detach()) == pytest.approx(want, rel=1e-5)
    info = fn.cache_info()
    assert not info.eager_reasons and info.eager_signatures == 0
    assert info.traces <= 6


entropy_coef = 0.01


def test_everything_a_policy_step_changes_each_call_is_lifted():
    """A policy-gradient step with NumPy observations, a clip range passed
    as a number, the policy's temperature annealed and a global entropy
    coefficient decayed by the loop: each number is lifted by the retrace
    that first finds it changed (also with NumPy array arguments, whose
    stand-ins had kept a lifted number referenced, so the argument was
    refused and specialized), and later calls reuse the last trace."""
    nn = tracec.nn

    class P(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)
            self.temperature = 1.0

        def forward(self, x):
            return tracec.log_softmax(self.lin(x) / self.temperature, -1)

    def make():
        tracec.manual_seed(0)
        p = P()
        opt = tracec.optim.Adam(p.parameters(), lr=1e-2)

        def step(obs, act, adv, clip):
            logp = p(tracec.from_numpy(obs.astype(np.float32)))
            lp = logp.gather(1, tracec.as_tensor(act).long()[:, None]).squeeze(1)
            ent = -(logp.exp() * logp).sum(-1).mean()
            loss = -(lp * tracec.tensor(adv, dtype=tracec.float32)).mean() * clip \
                - entropy_coef * ent
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach()
        return p, step
    global entropy_coef
    runs = []
    for compiled in (False, True):
        p, step = make()
        fn = tracec.compile(step) if compiled else step
        g = np.random.default_rng(0)
        out = []
        for i in range(8):
            entropy_coef = 0.01 * 0.9 ** i
            p.temperature = max(0.5, 0.9 ** i)
            out.append(float(fn(g.standard_normal((5, 4)), g.integers(0, 3, 5),
                                g.standard_normal(5), 0.2 + 0.01 * i)))
        runs.append(np.array(out))
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5, atol=1e-6)
    info = fn.cache_info()
    assert info.traces == 4 and info.hits == 4, info.reasons
    assert sorted(info.lifted[-1]) == ["P.temperature", "argument clip", "entropy_coef"]
