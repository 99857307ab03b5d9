"""Optimizer-style in-place updates, as found by ``fuzz_optim_updates.py``:
eager and compiled equal PyTorch's parameters and grads.

PyTorch's foreach SGD with Nesterov momentum (no weight decay, no maximize)
adds ``momentum * buf`` to the gradients in place: ``p.grad`` after
``step()`` is the Nesterov direction, which a later ``backward()`` without
``zero_grad`` accumulates onto.  tracec's SGD left ``p.grad`` unchanged
(seed 4 of the fuzzer)."""
import numpy as np
import pytest
import torch

import tracec
from fuzz_optim_updates import run_one


def _run(lib, compiled, **kw):
    w = lib.tensor(np.array([[0.5, -1.0], [2.0, 0.3]], np.float32), requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True, **kw)

    def step(x):
        (w * x).pow(2).sum().backward()
        opt.step()
    f = tracec.compile(step, backend="cpu") if compiled else step
    out = []
    for k in range(3):     # no zero_grad: the grads accumulate
        f(lib.tensor(np.full((2, 2), k + 1.0, np.float32)))
        out += [w.detach().numpy().copy(), w.grad.numpy().copy()]
    return out


@pytest.mark.parametrize("kw", [{"foreach": True}, {"foreach": False},
                                {"foreach": True, "weight_decay": 0.1},
                                {"foreach": True, "maximize": True}])
@pytest.mark.parametrize("compiled", [False, True])
def test_nesterov_sgd_grads_as_torch(kw, compiled):
    want = _run(torch, False, **kw)
    got = _run(tracec, compiled, **kw)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", [4])
def test_fuzz_seeds(seed):
    bad, case = run_one(seed)
    assert not bad, (bad, case)
