"""NumPy array arguments of a compiled function are keyed by shape, dtype
and contents (``tracec.pytree``), not by identity.  Before, an array past
the guards' small-array limit (4096 elements) that the loop changed in
place was reused with the values the trace had read (WRONG numbers: the
compiled step kept returning the first call's sums), and a fresh array of
the same values at every call retraced at every call."""
import numpy as np
import pytest
import torch

import tracec


def _f(lib):
    def f(a, x):
        return (lib.from_numpy(a).float() * x).sum() + lib.tensor(a).sum()
    return f


def test_large_array_changed_in_place_is_not_stale():
    a = np.zeros(5000, dtype=np.float64)
    fn = tracec.compile(_f(tracec))
    x = tracec.ones(5000)
    xt = torch.ones(5000)
    for i in range(4):
        a[:] = i
        want = float(_f(torch)(a, xt))
        assert float(fn(a, x)) == pytest.approx(want), i
    assert fn.cache_info().traces == 4


def test_fresh_arrays_of_equal_values_reuse_the_trace():
    fn = tracec.compile(_f(tracec))
    x = tracec.ones(6)
    for _ in range(4):
        a = np.arange(6, dtype=np.float32).reshape(6)
        assert float(fn(a, x)) == pytest.approx(30.0)
    assert fn.cache_info().traces == 1, fn.cache_info().reasons


def test_changed_values_retrace_and_say_why():
    fn = tracec.compile(_f(tracec))
    x = tracec.ones(3)
    for i in range(3):
        a = np.full(3, float(i))
        assert float(fn(a, x)) == pytest.approx(6.0 * i)
    info = fn.cache_info()
    assert info.traces == 3
    assert "NumPy array argument's values changed" in info.reasons[1]


def test_array_in_a_container_argument_and_shape_change():
    def step(batch, w):
        obs = tracec.as_tensor(batch["obs"], dtype=tracec.float32)
        return (obs @ w).sum()
    fn = tracec.compile(step)
    w = tracec.ones(4, 2)
    for n in (3, 3, 5):
        obs = np.random.default_rng(n).standard_normal((n, 4))
        want = float((torch.as_tensor(obs, dtype=torch.float32) @ torch.ones(4, 2)).sum())
        assert float(fn({"obs": obs}, w)) == pytest.approx(want, rel=1e-5)
    assert fn.cache_info().traces == 2


def test_array_written_in_place_by_the_call_runs_eagerly():
    """A call that writes into its array argument (through from_numpy's
    shared memory) changes it as eager does, every call."""
    def f(a, x):
        tracec.from_numpy(a).add_(1.0)
        return x * 2
    fn = tracec.compile(f, fallback="eager")
    x = tracec.ones(2)
    for _ in range(3):
        a = np.zeros(3)
        with pytest.warns(UserWarning) if _ == 0 else _nowarn():
            fn(a, x)
        assert a.tolist() == [1.0, 1.0, 1.0]


class _nowarn:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
