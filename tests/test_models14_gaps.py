"""What the public programs of ``tests/programs/models14`` needed, checked
against torch 2.13 (the oracle)."""
import numpy as np
import pytest
import torch

import tracec

rng = np.random.default_rng(0)


def both(a):
    a = np.asarray(a)
    return tracec.from_numpy(a.copy()), torch.from_numpy(a.copy())


def close(t, r, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(np.asarray(t.detach().numpy()), r.detach().numpy(),
                               atol=atol, rtol=rtol)


# --- indexing with numpy arrays in a tuple key (pytorch-flows' Reverse) ------------

@pytest.mark.parametrize("key", [
    lambda: (slice(None), np.array([3, 2, 1, 0])),
    lambda: (np.array([1, 0]), Ellipsis),
    lambda: (Ellipsis, np.array([2, 0])),
    lambda: (np.array([1, 0]), slice(1, 3)),
])
def test_tuple_key_with_numpy_array_like_torch(key):
    t, r = both(rng.standard_normal((3, 4)).astype(np.float32))
    close(t[key()], r[key()])
    t2, r2 = both(np.zeros((3, 4), np.float32))
    t2[key()] = 1.0
    r2[key()] = 1.0
    close(t2, r2)
