"""``Adafactor`` and ``Muon`` against PyTorch 2.13: trajectories over 10
steps, state, argument checks, and a compiled step equal to eager."""
from __future__ import annotations

import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


def _run(lib, name, kw, shapes, steps=10):
    rng = np.random.default_rng(0)
    ps = [lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
          for s in shapes]
    opt = getattr(lib.optim, name)(ps, **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = sum(((p - 0.3) ** 2 * (j + 1)).sum() + p.sin().sum() for j, p in enumerate(ps))
        loss.backward()
        opt.step()
    return [p.detach().numpy() for p in ps], opt


@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1}, {"maximize": True, "lr": 0.1},
                                {"eps": (1e-30, 1e-2), "d": 1.5, "beta2_decay": -0.5}])
def test_adafactor_trajectory_matches_torch(kw):
    shapes = [(4, 5), (3,), (2, 3, 4)]
    ours, opt = _run(tracec, "Adafactor", kw, shapes)
    theirs, topt = _run(torch, "Adafactor", kw, shapes)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)
    for p, tp in zip(opt.param_groups[0]["params"], topt.param_groups[0]["params"]):
        assert sorted(opt.state[p]) == sorted(topt.state[tp])
        for k, v in opt.state[p].items():
            np.testing.assert_allclose(v.numpy(), topt.state[tp][k].numpy(), rtol=1e-5,
                                       atol=1e-7)


@pytest.mark.parametrize("kw", [{}, {"nesterov": False, "lr": 0.02},
                                {"adjust_lr_fn": "match_rms_adamw", "weight_decay": 0.0}])
def test_muon_trajectory_matches_torch_to_bfloat16_precision(kw):
    shapes = [(6, 4), (3, 5)]
    ours, _ = _run(tracec, "Muon", kw, shapes)
    theirs, _ = _run(torch, "Muon", kw, shapes)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=2e-3)


@pytest.mark.parametrize("name,kw,msg", [
    ("Adafactor", {"beta2_decay": 0.5}, "beta2_decay should be <= 0"),
    ("Adafactor", {"d": 0.5}, "Clipping threshold d"),
    ("Adafactor", {"eps": (-1.0, 1e-3)}, "epsilon1"),
    ("Muon", {"adjust_lr_fn": "other"}, "not supported"),
    ("Muon", {"momentum": -1.0}, "momentum should be >= 0"),
])
def test_bad_arguments_raise_like_torch(name, kw, msg):
    for lib in (tracec, torch):
        p = lib.zeros(2, 2, requires_grad=True)
        with pytest.raises(ValueError, match=msg):
            getattr(lib.optim, name)([p], **kw)


def test_muon_refuses_non_matrices():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        tracec.optim.Muon([tracec.zeros(3, requires_grad=True)])


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_compiled_step_equals_eager(name):
    def make():
        tracec.manual_seed(0)
        model = tracec.nn.Linear(6, 4, bias=False)
        return model, getattr(tracec.optim, name)(model.parameters(), lr=0.05)

    x, y = tracec.randn(8, 6), tracec.randn(8, 4)

    def step(model, opt):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    m1, o1 = make()
    eager = [step(m1, o1).item() for _ in range(5)]
    m2, o2 = make()
    compiled = tracec.compile(lambda: step(m2, o2))
    got = [compiled().item() for _ in range(5)]
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m2.weight.detach().numpy(), m1.weight.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    info = compiled.cache_info()
    assert info.traces == 1 and info.hits == 4, info
