"""The cpu backend's output pool (tracec/backends/cpu/output_pool.py) never
hands out memory something can still reach: a held output, a view of it,
a tensor made from it, a tensor saved for backward.  Freed outputs are
reused (the point of the pool), and results equal eager."""
import gc

import numpy as np
import pytest

import tracec
from tracec.backends.cpu import output_pool

N = 400_000          # 1.6 MB of float32: above output_pool.MIN_BYTES
assert N * 4 >= output_pool.MIN_BYTES


def _collect():
    """Collect the young generations: the objects these tests make and drop.
    (A full collection walks every object the test process holds, about a
    second per call in a worker that has run hundreds of tests.)"""
    gc.collect(1)


def _reused():
    return output_pool.stats()["reused"]


def test_pool_keeps_blocks_while_views_live_and_reuses_them_after():
    output_pool.clear()
    a = output_pool.empty((N,), np.float32)
    assert output_pool.fresh(a) and not output_pool.fresh(a[1:])
    a[:] = 7.0
    v = a[10:20]
    addr = a.ctypes.data
    del a
    _collect()
    b = output_pool.empty((N,), np.float32)        # the block is still reachable via v
    assert b.ctypes.data != addr and not np.shares_memory(b, v)
    b[:] = 1.0
    assert (v == 7.0).all()
    del v
    before = _reused()
    c = output_pool.empty((N,), np.float32)
    assert c.ctypes.data == addr and _reused() == before + 1
    assert not np.shares_memory(b, c)


def test_small_outputs_are_plain_arrays():
    a = output_pool.empty((10,), np.float32)
    assert a.flags.owndata and not output_pool.fresh(a)


@pytest.fixture(scope="module")
def comp():
    return tracec.compile(lambda x, w: tracec.relu(x * w + 1.0) * tracec.sigmoid(x),
                          backend="cpu")


def _args(k):
    x = tracec.full((N,), float(k) - 1.5)
    w = tracec.full((N,), 2.0)
    return x, w


def _eager(k):
    x, w = _args(k)
    return (tracec.relu(x * w + 1.0) * tracec.sigmoid(x)).numpy()


def test_held_outputs_views_and_derived_tensors_keep_their_values(comp):
    comp(*_args(0))
    held, views, derived, wants = [], [], [], []
    for k in range(6):
        y = comp(*_args(k))
        np.testing.assert_allclose(y.numpy(), _eager(k), rtol=1e-6)
        assert output_pool.fresh(y._data)     # the output came from the pool
        wants.append(_eager(k))
        if k % 3 == 0:
            held.append(y)                   # the output itself
        elif k % 3 == 1:
            views.append((k, y[5:]))         # a view of it (the output is dropped)
        else:
            derived.append((k, y.view(-1, 100)))
        del y
        _collect()
    for y, k in zip(held, (0, 3)):
        np.testing.assert_allclose(y.numpy(), wants[k], rtol=1e-6)
    for k, v in views:
        np.testing.assert_allclose(v.numpy(), wants[k][5:], rtol=1e-6)
    for k, d in derived:
        np.testing.assert_allclose(d.numpy().ravel(), wants[k], rtol=1e-6)
    arrays = [t._data for t in held] + [v._data for _, v in views] + [d._data for _, d in derived]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)


def test_dropped_outputs_are_reused(comp):
    comp(*_args(0))
    before = _reused()
    for k in range(4):
        comp(*_args(k))
        _collect()
    assert _reused() >= before + 3


def test_tensor_saved_for_backward_is_not_overwritten(comp):
    comp(*_args(0))
    w = tracec.ones(N, requires_grad=True)
    with tracec.no_grad():
        y = comp(*_args(3))
    loss = (y * w).sum()                     # saves y for backward
    want = y.numpy().copy()
    del y
    _collect()
    for k in range(3):                       # fresh outputs meanwhile
        comp(*_args(k))
        _collect()
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-6)


def test_an_owner_freed_while_the_pool_is_locked_does_not_deadlock():
    """A garbage collection inside the pool's locked section can free an
    output (its owner's ``__del__`` takes the lock again)."""
    import threading

    def scenario():
        a = output_pool.empty((N,), np.float32)
        with output_pool._lock:
            del a          # the owner dies here, on the thread holding the lock
    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the pool deadlocked"


def test_a_held_grad_keeps_its_values_and_a_dropped_one_is_reused_in_place():
    w = tracec.zeros(N, requires_grad=True)

    def step(x):
        w.grad = None
        (w * x).sum().backward()
    comp = tracec.compile(step, backend="cpu")
    for k in range(3):
        comp(tracec.full((N,), float(k)))
    held = w.grad
    comp(tracec.full((N,), 5.0))        # the old .grad is held: a new one, from the pool
    assert held.numpy()[0] == 2.0 and w.grad.numpy()[0] == 5.0
    assert not np.shares_memory(held._data, w.grad._data)
    assert output_pool.fresh(w.grad._data)
    del held
    _collect()
    addr = w.grad._data.ctypes.data
    comp(tracec.full((N,), 6.0))        # nothing else holds the old .grad: computed into it
    assert w.grad._data.ctypes.data == addr and w.grad.numpy()[-1] == 6.0
