"""``nn.Sequential * n`` / ``n * Sequential`` / ``*=`` as PyTorch: the
same module objects repeated, PyTorch's TypeError / ValueError for a bad
factor (tracec had no multiplication)."""
import pytest
import torch

import tracec


def _run(lib):
    nn = lib.nn
    a, b = nn.Linear(2, 2), nn.ReLU()
    s = nn.Sequential(a, b)
    out = []
    for r in (s * 3, 2 * s):
        out.append(([type(m).__name__ for m in r], list(r._modules), r[2] is a, len(s)))
    s2 = nn.Sequential(a, b)
    s2 *= 2
    out.append(([type(m).__name__ for m in s2], s2[3] is b))
    for bad in (0, 1.5):
        with pytest.raises((TypeError, ValueError)) as e:
            s * bad
        out.append((type(e.value).__name__, str(e.value).replace("tracec", "torch")))
    return out


def test_sequential_multiplication_matches_torch():
    assert _run(tracec) == _run(torch)
