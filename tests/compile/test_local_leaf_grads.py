"""Leaves a compiled call makes itself (a gradient penalty's interpolate,
``x.detach().requires_grad_()``): their ``.grad`` is no state.  Guarding it
made every later call retrace (the old tensor kept its gradient, so "its
.grad is no longer None"), and the compiled code never ran."""
from __future__ import annotations

import copy

import numpy as np

import tracec

nn = tracec.nn


def _gp_step(D):
    opt = tracec.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))

    def step(real, fake, alpha):
        opt.zero_grad()
        xi = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = D(xi)
        g = tracec.autograd.grad(out, xi, tracec.ones_like(out), create_graph=True)[0]
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(real).mean() + 10 * gp
        loss.backward()
        opt.step()
        return loss
    return step


def test_gradient_penalty_step_compiles_once_and_equals_eager():
    tracec.manual_seed(0)
    D = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    D2 = copy.deepcopy(D)
    eager, compiled = _gp_step(D), tracec.compile(_gp_step(D2))
    rng = np.random.default_rng(0)
    for b in (8, 8, 8, 5, 12, 12):
        real, fake = (tracec.from_numpy(rng.standard_normal((b, 6)).astype(np.float32))
                      for _ in range(2))
        alpha = tracec.from_numpy(rng.random((b, 1)).astype(np.float32))
        np.testing.assert_allclose(compiled(real, fake, alpha).item(),
                                   eager(real, fake, alpha).item(), rtol=1e-5)
        for p, q in zip(D.parameters(), D2.parameters()):
            np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
    info = compiled.cache_info()
    # batch 8, then one symbolic trace from batch 5 on: no retrace for .grad
    assert info.traces == 2 and "changed: float32[8, 6] -> float32[5, 6]" in info.reasons[1], info
    assert info.symbolic[1], info


def test_a_returned_local_leaf_still_gets_its_grad():
    model = nn.Linear(5, 3)

    def saliency(inp):
        x = inp.clone().requires_grad_()
        model(x).sum().backward()
        return x

    compiled = tracec.compile(saliency)
    for _ in range(3):
        inp = tracec.randn(4, 5)
        x = compiled(inp)
        assert x.grad is not None
        np.testing.assert_allclose(x.grad.numpy(),
                                   np.broadcast_to(model.weight.detach().numpy().sum(0), (4, 5)),
                                   rtol=1e-6)
