"""Large eager draws run on several threads (``ops.random.in_parallel``):
the bits are the same for any thread count (each element depends only on
its index), no thread is left behind, and a forked child (a DataLoader
worker) draws too."""
import threading
import multiprocessing as mp

import numpy as np
import pytest

import tracec
from tracec.ops import random as R


# About the counter-based stream compiled code draws from: eager draws use
# it too here (by default they follow PyTorch's, tests/test_torch_rng.py).
pytestmark = pytest.mark.usefixtures("counter_rng")


N = R.PARALLEL_MIN + 12345


def _draws(monkeypatch, threads):
    monkeypatch.setenv("TRACEC_NUM_THREADS", str(threads))
    tracec.manual_seed(3)
    out = [tracec.randn(N), tracec.rand(N), tracec.rand(N, dtype=tracec.float64),
           tracec.randn(N, dtype=tracec.float64), tracec.empty(N).uniform_(-2, 3),
           tracec.empty(N).normal_(1.0, 2.0)]
    return [t.numpy().copy() for t in out]


def test_large_draws_are_the_same_bits_on_any_number_of_threads(monkeypatch):
    one = _draws(monkeypatch, 1)
    for k in (2, 3, 7):
        for a, b in zip(one, _draws(monkeypatch, k)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def _child(q):
    q.put(float(tracec.randn(N).sum()))


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_draws_after_the_parent_used_threads(monkeypatch):
    monkeypatch.setenv("TRACEC_NUM_THREADS", "2")
    tracec.randn(N)
    assert not [t for t in threading.enumerate() if t.name == "tracec-rng"]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert np.isfinite(q.get(timeout=5))
