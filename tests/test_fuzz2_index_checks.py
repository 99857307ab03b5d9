"""Compiled calls check their own indices as eager and PyTorch do.

Eager index_select / embedding / scatter_add / index_add / index_copy /
index_fill checked the index values in Python, so a compiled call checked
only the traced call's indices; its native kernels (take, scatter_add,
index_add) count a negative index from the end, so a later call with a
negative index returned numbers where PyTorch raises.  Advanced indexing
(``x[i]``, ``x[i] = v``) wrapped negative indices once in the trace and once
more in the kernel, so ``-size - 1`` read or wrote row ``size - 1``.  The
checks are now recorded (``ops.check``; an ``INDEX_ERROR`` message fails
with IndexError, as PyTorch's index checks).  ``index_fill`` refused a
negative index eagerly, which PyTorch counts from the end, and index_add
with an ``alpha`` raised RuntimeError where PyTorch raises IndexError (seeds
100067, 100081, 100105, 100109 of ``fuzz_indexing.py``)."""
import numpy as np
import pytest
import torch

import tracec

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _setitem(m, x, i):
    y = x.clone()
    y[i] = 0.0
    return y


CASES = {
    "index_select": lambda m, x, i: x.index_select(0, i),
    "embedding": lambda m, x, i: m.nn.functional.embedding(i, x),
    "scatter_add": lambda m, x, i: m.zeros(3, 4).scatter_add(1, i.view(1, -1).expand(3, -1),
                                                             x[:, :2]),
    "index_add": lambda m, x, i: x.index_add(0, i, m.ones(2, 4)),
    "index_add_1d": lambda m, x, i: x[0].index_add(0, i, m.ones(2)),
    # (with an alpha PyTorch checks in another loop: IndexError, not RuntimeError)
    "index_add_alpha": lambda m, x, i: x.index_add(0, i, m.ones(2, 4), alpha=0.5),
    "index_copy": lambda m, x, i: x.index_copy(0, i, m.ones(2, 4)),
    "index_fill": lambda m, x, i: x.index_fill(0, i, -1.0),
    "getitem": lambda m, x, i: x[i, 1:],
    "setitem": _setitem,
}


def _outcome(fn):
    try:
        return fn().numpy()
    except IndexError:
        return IndexError
    except RuntimeError:
        return RuntimeError


@pytest.mark.parametrize("seed", [100081, 100109])
def test_fuzz_seeds(seed):
    from fuzz_indexing import run_one
    bad, case = run_one(seed)
    assert not bad, (bad, case)


@pytest.mark.parametrize("name", list(CASES))
def test_a_compiled_call_checks_its_indices(name):
    f = CASES[name]
    cf = tracec.compile(lambda x, i: f(tracec, x, i), backend="cpu")
    for idx in ([0, 2], [1, 0], [-1, 0], [2, -3], [-4, 0], [0, 3], [1, 2]):
        want = _outcome(lambda: f(torch, torch.tensor(X), torch.tensor(idx)))
        for got in (_outcome(lambda: f(tracec, tracec.tensor(X), tracec.tensor(idx))),
                    _outcome(lambda: cf(tracec.tensor(X), tracec.tensor(idx)))):
            if isinstance(want, np.ndarray):
                assert isinstance(got, np.ndarray), (idx, got)
                np.testing.assert_array_equal(got, want)
            else:   # (an IndexError is no RuntimeError in PyTorch: raised as it is)
                assert got is want, (idx, got, want)
    assert cf.cache_info().hits >= 2
