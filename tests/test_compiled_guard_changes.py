"""Changes made between compiled calls that the compiled function depends on,
found by ``tests/fuzz_guards.py`` to give results different from eager
ones: each test changes one thing between two calls and checks that the
compiled call equals the eager call (and that the change retraced, where a
retrace is the only way to see it)."""
import numpy as np

import tracec
from tracec import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.lin(x))


def _same(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_a_submodule_swapped_between_calls_is_called():
    # (fuzz_guards seed 1: the trace kept calling the first Linear)
    tracec.manual_seed(0)
    m = Net()

    def step(x):
        return m(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(2, 4)
    _same(f(x), step(x))
    m.lin = nn.Linear(4, 4)          # new parameters, in a new module
    _same(f(x), step(x))
    m.act = nn.ReLU()                # no parameters at all
    _same(f(x), step(x))
    assert f(x) is not None and f.cache_info().traces == 3


def test_a_submodule_of_a_sequential_replaced_by_index():
    tracec.manual_seed(1)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    f = tracec.compile(m, backend="cpu")
    x = tracec.ones(3, 4)
    _same(f(x), m(x))
    m[1] = nn.Sigmoid()
    _same(f(x), m(x))
    del m[1]
    _same(f(x), m(x))


def test_the_default_dtype_set_between_calls_retraces():
    # (fuzz_guards seed 37: randn / ones kept making float32 tensors)
    def step(x):
        return x + tracec.ones(3) * 0.5 + tracec.arange(3) * 0.25

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(3)
    _same(f(x), step(x))
    _same(f(x), step(x))             # (the fast path's matcher made)
    old = tracec.get_default_dtype()
    tracec.set_default_dtype(tracec.float64)
    try:
        y = f(x)
        assert y.dtype is tracec.float64
        _same(y, step(x))
        assert "default dtype changed" in f.cache_info().reasons[-1]
    finally:
        tracec.set_default_dtype(old)
    _same(f(x), step(x))
    assert f.cache_info().traces == 2
