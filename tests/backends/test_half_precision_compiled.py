"""float16/bfloat16 on the CPU backend compute as eager does: matmuls and
sums accumulate in float32 and round once (they used to round at every
step, or never), and a full bfloat16 reduction is 0-d (it was [1])."""
from __future__ import annotations

import numpy as np
import pytest

import tracec

HALF = [tracec.float16, tracec.bfloat16]


def _ulp(values: np.ndarray, d) -> np.ndarray:
    bits = 11 if d is tracec.float16 else 8
    return np.exp2(np.floor(np.log2(np.maximum(np.abs(values), 1e-3))) - (bits - 1))


def _check(fn, *args, ulps=1):
    f = tracec.compile(fn)
    f(*args)
    got = f(*args)
    want = fn(*args)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype is want.dtype
    g, w = got.float().numpy().astype(np.float64), want.float().numpy().astype(np.float64)
    # float32 sums in another order may round to the neighbouring value.
    assert (np.abs(g - w) <= ulps * _ulp(w, want.dtype) + 1e-12).all(), np.abs(g - w).max()


@pytest.mark.parametrize("d", HALF, ids=str)
@pytest.mark.parametrize("layout", ["nt", "tn", "nn", "batched"])
def test_matmul_rounds_once(d, layout):
    tracec.manual_seed(0)
    g = tracec.randn(24, 200).to(d)
    fns = {"nt": lambda g: g.matmul(g.T), "tn": lambda g: g.T.matmul(g[:, :30]),
           "nn": lambda g: g.matmul(g.T.contiguous()),
           "batched": lambda g: g.view(2, 12, 200).matmul(g.view(2, 12, 200).transpose(1, 2))}
    _check(fns[layout], g)


@pytest.mark.parametrize("d", HALF, ids=str)
@pytest.mark.parametrize("case", ["sum0", "mean0", "sum1", "sum02", "sum0_keep", "all"])
def test_sums_round_once(d, case):
    tracec.manual_seed(1)
    g = tracec.randn(40, 300).to(d)
    h = tracec.randn(4, 30, 50).to(d)
    fns = {"sum0": (lambda g: g.sum(0), g), "mean0": (lambda g: g.mean(0), g),
           "sum1": (lambda g: g.sum(1), g), "sum02": (lambda h: h.sum((0, 2)), h),
           "sum0_keep": (lambda h: h.sum(0, keepdim=True) * 2, h), "all": (lambda g: g.sum(), g)}
    fn, arg = fns[case]
    _check(fn, arg)


@pytest.mark.parametrize("d", HALF, ids=str)
def test_full_reductions_are_zero_dimensional(d):
    x = tracec.ones(4, 6).to(d)
    for r in (x.sum(), x.mean(), x.norm(), x.amax(), tracec.tensor(2.5, dtype=d) * 2):
        assert r.shape == ()
