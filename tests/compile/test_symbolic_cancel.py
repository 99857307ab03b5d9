"""An equality a symbolic trace needs between two products of sizes
(``reshape(B*T, 4)`` of ``x @ w`` needs ``4*B*T == B*T*N``) specializes
only the sizes left once the common factors are divided out (``N == 4``):
the batch and sequence sizes stay symbolic, so one trace serves them all.
Before, B, T and N were all specialized and every new (B, T) retraced."""
import numpy as np
import pytest
import torch

import tracec

W = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
SIZES = [(3, 2), (3, 5), (4, 2), (5, 6), (2, 3)]


def _f(x, w):
    b, t = x.shape[0], x.shape[1]
    h = (x @ w).reshape(b * t, 4).unflatten(0, (b, t)).tanh()
    return h.sum(1) * (h.shape[0] * h.shape[1])


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_common_factors_cancel_and_sizes_stay_symbolic(backend):
    g = tracec.compile(_f, backend=backend, dynamic=True)
    for b, t in SIZES:
        x = np.random.default_rng(b * 10 + t).standard_normal((b, t, 4)).astype(np.float32)
        got = g(tracec.tensor(x), tracec.tensor(W)).numpy()
        want = _f(torch.tensor(x), torch.tensor(W)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    info = g.cache_info()
    assert info.traces == 1, info.reasons
    assert set(info.symbolic[0].values()) >= {"B: dynamic=True", "T: dynamic=True"}, info.symbolic
    assert any(n.startswith("N specialized to 4") for n in info.size_notes), info.size_notes
