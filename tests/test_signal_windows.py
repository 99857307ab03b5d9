"""``tracec.signal.windows`` against ``torch.signal.windows``: every
window, symmetric and periodic, lengths 0-8, both float dtypes, the
errors."""
import numpy as np
import pytest

import tracec
import tracec.signal.windows as ours

torch = pytest.importorskip("torch")
theirs = torch.signal.windows

_KW = {"general_cosine": {"a": [0.5, 0.3, 0.2]}, "gaussian": {"std": 1.7},
       "kaiser": {"beta": 5.0}, "general_hamming": {"alpha": 0.6}}


@pytest.mark.parametrize("name", sorted(theirs.__all__))
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_window_matches_pytorch(name, sym, dtype):
    assert name in ours.__all__
    kw = dict(_KW.get(name, {}))
    if name == "exponential" and not sym:
        kw = {"center": 1.5, "tau": 2.0}
    for M in (0, 1, 2, 5, 8):
        t = getattr(theirs, name)(M, sym=sym, dtype=getattr(torch, dtype), **kw)
        c = getattr(ours, name)(M, sym=sym, dtype=getattr(tracec, dtype), **kw)
        assert c.dtype is getattr(tracec, dtype) and tuple(c.shape) == tuple(t.shape)
        np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda w, lib: w.hann(-1),
    lambda w, lib: w.hann(4, dtype=lib.int64),
    lambda w, lib: w.gaussian(4, std=0.0),
    lambda w, lib: w.kaiser(4, beta=-1.0),
    lambda w, lib: w.exponential(4, center=1.0),
    lambda w, lib: w.exponential(4, tau=0.0),
    lambda w, lib: w.general_cosine(4, a=3),
])
def test_errors_match_pytorch(call):
    with pytest.raises(Exception) as e_theirs:
        call(theirs, torch)
    with pytest.raises(type(e_theirs.value)) as e_ours:
        call(ours, tracec)
    assert str(e_ours.value).replace("tracec.", "torch.") == str(e_theirs.value)
