"""A program's own optimizer (MAE's LARS, a hand-written momentum SGD)
whose learning rate changes every step: set between calls by a hand-written
schedule, or by a scheduler stepped inside the compiled step.  Before, the
first retraced every call and never compiled (its step reads ``g['lr']``
itself, and the optimizer's guard compared the number); the second failed
(``add_(alpha=lr)`` with the lifted lr).  Now the lr is lifted: one compile,
every step equal to eager."""
import math

import numpy as np
import pytest

import tracec


class MomentumSGD(tracec.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @tracec.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state[p]
                if "mu" not in st:
                    st["mu"] = tracec.zeros_like(p)
                st["mu"].mul_(g["momentum"]).add_(p.grad)
                p.add_(st["mu"], alpha=-g["lr"])


def _setup(with_scheduler):
    tracec.manual_seed(0)
    m = tracec.nn.Linear(4, 3)
    opt = MomentumSGD(m.parameters())
    sched = tracec.optim.lr_scheduler.CosineAnnealingLR(opt, 20) if with_scheduler else None

    def step(x):
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if sched is not None:
            sched.step()
        return loss
    return m, opt, step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("with_scheduler", [False, True])
def test_a_custom_optimizers_changing_lr_compiles_once_and_equals_eager(backend, with_scheduler):
    me, opte, eager = _setup(with_scheduler)
    mc, optc, step = _setup(with_scheduler)
    comp = tracec.compile(step, backend=backend)
    x = tracec.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
    for i in range(10):
        if not with_scheduler:
            for o in (opte, optc):
                for g in o.param_groups:
                    g["lr"] = 0.1 * math.cos(i / 10)
        np.testing.assert_allclose(comp(x).item(), eager(x).item(), rtol=1e-5)
        np.testing.assert_allclose(mc.weight.detach().numpy(), me.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        assert optc.param_groups[0]["lr"] == pytest.approx(opte.param_groups[0]["lr"])
    info = comp.cache_info()
    assert info.traces <= 2 and info.compiles + info.loads == 1, info.reasons
