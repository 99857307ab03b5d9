"""An in-place write through a view of state whose length is symbolic
(a KV cache: ``cache[:B].narrow(0, 0, B)[:, :T].mul_(0.5).add_(h)``) keeps
the size symbolic: the write's mask was a NumPy array of the view's shape,
which needed T as a number, so every new T retraced. One trace serves every
T now, each call equal to PyTorch's."""
import numpy as np
import pytest
import torch

import tracec


def _run(T_, compiled, backend="cpu"):
    cache = T_.zeros(4, 10, 3)
    w = T_.tensor(np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3), requires_grad=True)

    def step(x):
        b, t = x.shape[0], x.shape[1]
        h = (x @ w).tanh()
        with T_.no_grad():
            cache[:b].narrow(0, 0, b)[:, :t].mul_(0.5).add_(h.detach())
        loss = (h * cache[:b, :t]).sum()
        loss.backward()
        return loss
    g = tracec.compile(step, backend=backend) if compiled else step
    out = []
    for t in (3, 8, 4, 5):
        w.grad = None
        x = T_.tensor(np.random.default_rng(t).standard_normal((2, t, 3)).astype(np.float32))
        if compiled:
            tracec.mark_dynamic(x, 1)
        out.append((g(x).item(), w.grad.numpy().copy(), cache.numpy().copy()))
    return out, (g.cache_info() if compiled else None)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_write_through_a_symbolic_view_of_state_is_one_trace(backend):
    want, _ = _run(torch, False)
    got, info = _run(tracec, True, backend)
    for (a, ga, ca), (b, gb, cb) in zip(want, got):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-5)
        np.testing.assert_allclose(gb, ga, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(cb, ca, rtol=1e-5, atol=1e-5)
    assert info.traces == 1, (info.reasons, info.size_notes)
