"""A slice whose symbolic bound may reach the end of its dimension
(``pos_emb[:, :T]`` with T <= the context length): one trace serves every T
up to and including the full length (no ``T != 16`` guard, which made the
full context a second trace and a size ``tracec build`` libraries
refused), with values and gradients equal to PyTorch's."""
import numpy as np
import pytest
import torch

import tracec

P = np.random.default_rng(0).standard_normal((1, 16, 4)).astype(np.float32)
LENGTHS = (8, 12, 16, 5, 16, 1)


def _run(T_, wrap):
    pos = T_.tensor(P, requires_grad=True)

    def f(x):
        t = x.shape[1]
        y = x + pos[:, :t] * 2 + pos[0, -t:, :1] + pos[:, :t][:, :, 0].sum()
        y.sum().backward()
        return y
    g = wrap(f)
    out = []
    for t in LENGTHS:
        pos.grad = None
        x = T_.tensor(np.arange(2 * t * 4, dtype=np.float32).reshape(2, t, 4) / 7)
        out.append((g(x).detach().numpy(), pos.grad.numpy().copy()))
    return out, g


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_full_length_slice_is_one_trace_and_exact(backend):
    ref, _ = _run(torch, lambda f: f)
    got, g = _run(tracec, lambda f: tracec.compile(f, backend=backend, dynamic=True))
    for (ry, rg), (y, gr) in zip(ref, got):
        np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gr, rg, rtol=1e-5, atol=1e-5)
    info = g.cache_info()
    # T = 1 broadcasts where other sizes do not: its own trace, as documented
    assert info.traces == 2, info.reasons
    assert not any("!= 16" in s for s in info.size_guards), info.size_guards
