"""torch.gradient with coordinates, torch.histogram's equal-width bins and
a few errors, checked against torch 2.13 in the same process."""
import numpy as np
import pytest
import torch

import tracec


def _same(lib, fn, *arrays):
    out = fn(lib, *[lib.tensor(a) for a in arrays])
    return [np.array(t.tolist()) for t in (out if isinstance(out, tuple) else (out,))]


def _check(fn, *arrays):
    for u, v in zip(_same(tracec, fn, *arrays), _same(torch, fn, *arrays)):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("edge_order", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_with_coordinates_rounds_as_torch(edge_order, dtype):
    # PyTorch's a f[i-1] + b f[i] + c f[i+1] weights (tracec's own formula
    # rounded differently: 5.500000476837158 for 5.5)
    rng = np.random.default_rng(edge_order)
    for _ in range(4):
        f = rng.standard_normal((4, 9)).astype(dtype)
        c = np.cumsum(rng.random(9) + 0.1).astype(dtype)
        _check(lambda L, f, c: L.gradient(f, spacing=(c,), dim=1, edge_order=edge_order), f, c)
        _check(lambda L, f: L.gradient(f, spacing=0.3, edge_order=edge_order), f)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_equal_width_bins_as_torch(dtype):
    # the edges are PyTorch's linspace in the input's dtype (NumPy's float64
    # edges were one unit off), and the counts are taken against them
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = (rng.standard_normal(1000) * 3).astype(dtype)
        for kw in ({"bins": 7}, {"bins": 10, "range": (-2.0, 2.5)}, {"bins": 5, "density": True},
                   {"bins": 3, "range": (0.5, 0.5)}):
            _check(lambda L, x: L.histogram(x, **kw), x)
    _check(lambda L, x: L.histogram(x, bins=3), np.array([2.0, 2.0], dtype))
    _check(lambda L, x: L.histogram(x, bins=3), np.array([], dtype))


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value).__name__, str(e.value)


@pytest.mark.parametrize("call", [
    lambda L: L.histc(L.tensor([1, 2]), bins=3),
    lambda L: L.histogram(L.tensor([1, 2]), bins=3),
    lambda L: L.histogram(L.tensor([1.0, 2.0]), bins=L.tensor([1, 2])),
    lambda L: L.histogram(L.tensor([1.0, 5.0]), bins=2, range=(4.0, 3.0)),
    lambda L: L.histogram(L.tensor([1.0, float("nan")]), bins=2),
    lambda L: L.kthvalue(L.tensor([3.0, 1.0]), 3),
    lambda L: L.kthvalue(L.tensor([3.0, 1.0]), 0)])
def test_errors_as_torch(call):
    assert _error(lambda: call(tracec)) == _error(lambda: call(torch))
