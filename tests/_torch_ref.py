"""Shared helpers for the differential tests against PyTorch.

``run_both(fn, *arrays)`` builds the same inputs in tracec and torch, runs
``fn(lib, *inputs)`` with ``lib`` the module (``tracec`` or ``torch``), and
compares outputs (values, shapes, dtypes) and, for float outputs that
require grad, the input gradients along a random cotangent.
"""
from __future__ import annotations

import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10),
       "float16": dict(rtol=2e-3, atol=2e-3), "bfloat16": dict(rtol=2e-2, atol=2e-2)}


def rnd(rng, shape, dtype="float32", *, low=-2.0, high=2.0, positive=False):
    """A random array; positive ones keep clear of 0 (log, sqrt, pow)."""
    shape = tuple(shape)
    if dtype in ("int64", "int32"):
        return rng.integers(-5, 6, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    lo = 0.5 if positive else low
    return rng.uniform(lo, high, size=shape).astype(dtype)


def dtype_name(d) -> str:
    if isinstance(d, tracec.dtype):
        return d.name
    return str(d).replace("torch.", "")


def to_np(x):
    if isinstance(x, tracec.Tensor):
        if x.dtype is tracec.bfloat16:
            return x.detach().float().numpy()
        return x.detach().numpy()
    if x.dtype == torch.bfloat16:
        x = x.float()
    return x.detach().numpy()


def flat_outputs(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(flat_outputs(o))
        return res
    return [out]


def make_inputs(arrays, grad):
    tc_in, th_in = [], []
    for a in arrays:
        if isinstance(a, np.generic):
            a = np.asarray(a)
        if not isinstance(a, np.ndarray):
            tc_in.append(a)
            th_in.append(a)
            continue
        rg = grad and a.dtype.kind == "f"
        tc_in.append(tracec.tensor(a.copy(), requires_grad=rg))
        th_in.append(torch.tensor(a.copy(), requires_grad=rg))
    return tc_in, th_in


def assert_same(a, b, tol=None, what="output"):
    """``a`` a tracec value, ``b`` the torch one."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, tracec.Tensor), f"{what}: expected a Tensor, got {type(a)}"
        assert tuple(a.shape) == tuple(b.shape), f"{what}: shape {a.shape} vs {tuple(b.shape)}"
        assert dtype_name(a.dtype) == dtype_name(b.dtype), \
            f"{what}: dtype {a.dtype} vs {b.dtype}"
        an, bn = to_np(a), to_np(b)
        if an.dtype.kind == "f":
            t = tol or TOL.get(dtype_name(a.dtype), TOL["float32"])
            np.testing.assert_allclose(an.astype(np.float64), bn.astype(np.float64),
                                       err_msg=what, equal_nan=True, **t)
        else:
            np.testing.assert_array_equal(an, bn, err_msg=what)
    else:
        assert a == b or (a != a and b != b), f"{what}: {a!r} vs {b!r}"


def run_both(fn, *arrays, tfn=None, grad=True, tol=None, seed=0):
    """Compare ``fn(tracec, *xs)`` with ``(tfn or fn)(torch, *xs)``, forward and backward."""
    tc_in, th_in = make_inputs(arrays, grad)
    out_tc = fn(tracec, *tc_in)
    out_th = (tfn or fn)(torch, *th_in)
    outs_tc, outs_th = flat_outputs(out_tc), flat_outputs(out_th)
    assert len(outs_tc) == len(outs_th)
    for i, (a, b) in enumerate(zip(outs_tc, outs_th)):
        assert_same(a, b, tol, what=f"output {i}")
    if not grad:
        return out_tc, out_th
    rng = np.random.default_rng(seed + 12345)
    tc_roots, th_roots, tc_g, th_g = [], [], [], []
    for a, b in zip(outs_tc, outs_th):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert isinstance(a, tracec.Tensor) and a.requires_grad, \
                "torch output requires grad but tracec's does not"
            g = rng.standard_normal(tuple(b.shape)).astype(to_np(a).dtype)
            tc_roots.append(a)
            th_roots.append(b)
            tc_g.append(tracec.tensor(g))
            th_g.append(torch.tensor(g))
        elif isinstance(a, tracec.Tensor):
            assert not a.requires_grad, "tracec output requires grad but torch's does not"
    if not th_roots:
        return out_tc, out_th
    tracec.autograd.backward(tc_roots, tc_g)
    torch.autograd.backward(th_roots, th_g)
    for i, (a, b) in enumerate(zip(tc_in, th_in)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            if b.grad is None or a.grad is None:
                # torch sometimes materializes zeros where tracec leaves None
                for g in (a.grad, b.grad):
                    assert g is None or not np.any(to_np(g)), f"grad of input {i}"
            else:
                assert a.grad is not None, f"input {i}: tracec has no grad"
                assert_same(a.grad, b.grad, tol, what=f"grad of input {i}")
    return out_tc, out_th
