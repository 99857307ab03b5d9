"""float16 / bfloat16 nll_loss and cross_entropy reduced as PyTorch's CPU
kernel (its cascade sum in the half dtype: values and the total weight the
gradient divides by), and an ignored target's unreduced loss +0.0, checked
against torch 2.13 in the same process."""
import numpy as np
import pytest
import torch

import tracec

CASES = [((300, 10), (300,)), ((5000, 3), (5000,)), ((2, 5, 9, 11), (2, 9, 11)),
         ((3, 4, 70), (3, 70)), ((10,), ())]
OPTIONS = [{}, {"weight": True}, {"ignore_index": 1}, {"weight": True, "ignore_index": 1},
           {"label_smoothing": 0.1, "ignore_index": 1},
           {"weight": True, "label_smoothing": 0.3, "ignore_index": 1}]


def _inputs(shape, tshape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    c = shape[1] if len(shape) > 1 else shape[0]
    t = rng.integers(0, c, tshape)
    if t.ndim:
        flat = t.reshape(-1)
        flat[::7] = 1           # ignored targets, some at multiples of 16
        flat[16::16] = 1
    w = rng.random(c).astype(np.float32)
    return x, t, w


def _run(lib, fn, x, t, w, dtype, reduction, opts):
    d = getattr(lib, dtype)
    xx = lib.tensor(x).to(d).requires_grad_()
    kw = dict(opts)
    if kw.pop("weight", False):
        kw["weight"] = lib.tensor(w).to(d)
    out = getattr(lib.nn.functional, fn)(xx, lib.tensor(t), reduction=reduction, **kw)
    out.backward()
    return np.float32(out.float().item()), np.array(xx.grad.float().tolist(), np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_half_nll_and_cross_entropy_reduce_as_torch(dtype, case):
    shape, tshape = CASES[case]
    x, t, w = _inputs(shape, tshape, dtype, case)
    big = shape[0] > 1000          # (past 4096 elements: the cascade's fourth level)
    for reduction in ("mean",) if big else ("mean", "sum"):
        for opts in OPTIONS[3:5] if big else OPTIONS:
            for fn in ("nll_loss", "cross_entropy"):
                if fn == "nll_loss" and "label_smoothing" in opts:
                    continue
                got = _run(tracec, fn, x, t, w, dtype, reduction, opts)
                want = _run(torch, fn, x, t, w, dtype, reduction, opts)
                what = (fn, reduction, opts)
                assert got[0] == want[0] or (np.isnan(got[0]) and np.isnan(want[0])), what
                if fn == "nll_loss":        # -(g / total_weight) * w, as PyTorch's backward
                    np.testing.assert_array_equal(got[1], want[1], err_msg=str(what))
                else:                       # (log_softmax's backward: its own rounding)
                    np.testing.assert_allclose(got[1], want[1], rtol=1e-2, atol=1e-3,
                                               err_msg=str(what))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_ignored_target_unreduced_loss_is_positive_zero(dtype):
    x = np.array([[1.0, -2.0, 3.0], [0.5, 2.0, -1.0], [-3.0, 1.0, 2.0]], np.float32)
    t = np.array([0, 1, 1])
    for fn in ("nll_loss", "cross_entropy"):
        for kw in ({}, {"weight": True}):
            outs = []
            for lib in (tracec, torch):
                d = getattr(lib, dtype)
                k = {"weight": lib.tensor([0.5, 2.0, 1.0]).to(d)} if kw else {}
                out = getattr(lib.nn.functional, fn)(lib.tensor(x).to(d), lib.tensor(t),
                                                      ignore_index=1, reduction="none", **k)
                outs.append(np.signbit(np.array(out.float().tolist())))
            np.testing.assert_array_equal(*outs)
