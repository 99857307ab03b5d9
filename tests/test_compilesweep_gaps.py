"""Gaps that compiling real programs' models and training steps found in
tracec (``torch.compile(model)`` / ``torch.compile(train_step)`` added to
programs of ``tests/programs`` that run eagerly): each test checks that the
compiled step equals tracec's eager run (and, where the eager numbers are
the point, torch's), and that the step runs natively: ``cache_info()``
shows no eager fallback and no trace per call."""
import numpy as np
import pytest
import torch

import tracec


def _run_steps(lib, compiled, steps, make, data):
    lib.manual_seed(0)
    step, state = make(lib)
    fn = tracec.compile(step) if compiled else step
    outs = [np.array([float(v) for v in fn(*data(lib, i))]) for i in range(steps)]
    return outs, [p.detach().numpy().copy() for p in state()], fn


def _swa_case(kw_of):
    def make(lib):
        nn = lib.nn
        m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
        sw = lib.optim.swa_utils.AveragedModel(m, **kw_of(lib))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            sw.update_parameters(m)
            return loss.detach(), sw(x).sum().detach()
        return step, lambda: list(sw.parameters()) + list(sw.buffers())
    return make


def _batches(lib, i):
    g = np.random.default_rng(i)
    return (lib.tensor(g.standard_normal((8, 4)).astype(np.float32)),)


@pytest.mark.parametrize("kind", ["default", "ema_multi"])
def test_averaged_model_in_a_compiled_step_keeps_its_code(kind):
    """``AveragedModel.update_parameters`` in a compiled training step read
    ``n_averaged`` with ``.item()``: a value guard that changed at every
    call, so the step was traced again at every call (5 traces in 5 steps).
    Now the counter is decided on (``bool(n == 0)``, PyTorch's spelling),
    which a trace speculates: two traces (the first copy, then the
    averaging), the rest native; and the default average is PyTorch's CPU
    one, ``a + (p - a) / (n + 1)``, not a lerp."""
    kws = {"default": lambda lib: {},
           "ema_multi": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9)),
           "swa_multi": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn()),
           "ema_avg": lambda lib: dict(avg_fn=lib.optim.swa_utils.get_ema_avg_fn(0.9))}
    make = _swa_case(kws[kind])
    steps = 5
    ref, ref_state, _ = _run_steps(torch, False, steps, make, _batches)
    eager, eager_state, _ = _run_steps(tracec, False, steps, make, _batches)
    comp, comp_state, fn = _run_steps(tracec, True, steps, make, _batches)
    for a, b, c in zip(ref + ref_state, eager + eager_state, comp + comp_state):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
    info = fn.cache_info()
    assert info.eager_reasons == [] and info.traces == 2 and info.hits >= steps - 4, info
