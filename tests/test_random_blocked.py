"""Eager ``rand`` / ``randn`` of many elements are drawn block by block
(``ops.random._BLOCK``, ``creation._blocked_randn``): the numbers, and the
generator's state after them, must be bit for bit those of the whole-array
path, which compiled code reproduces."""
import numpy as np
import pytest

import tracec
from tracec import creation


# About the counter-based stream compiled code draws from: eager draws use
# it too here (by default they follow PyTorch's, tests/test_torch_rng.py).
pytestmark = pytest.mark.usefixtures("counter_rng")


@pytest.mark.parametrize("dtype", [tracec.float32, tracec.float64])
@pytest.mark.parametrize("shape", [(70001,), (300, 700), (1 << 16,)])
def test_blocked_randn_is_the_whole_array_draw(dtype, shape, monkeypatch):
    def draw():
        tracec.manual_seed(11)
        tracec.rand(13)
        return tracec.randn(*shape, dtype=dtype).numpy(), tracec.rand(5).numpy()
    blocked = draw()
    monkeypatch.setattr(creation, "_BLOCKED_RANDN", 1 << 60)
    whole = draw()
    assert blocked[0].dtype == whole[0].dtype and blocked[0].shape == whole[0].shape
    assert np.array_equal(blocked[0], whole[0]) and np.array_equal(blocked[1], whole[1])


def test_compiled_large_randn_and_rand_equal_eager():
    n = (1 << 16) + 3

    def f(x):
        return x + tracec.randn(n), tracec.rand(n, dtype=tracec.float64)
    comp = tracec.compile(f)
    x = tracec.zeros(n)
    comp(x)                               # the traced call
    tracec.manual_seed(5)
    got = comp(x)
    tracec.manual_seed(5)
    want = f(x)
    for g, w in zip(got, want):
        assert np.array_equal(g.numpy(), w.numpy())
