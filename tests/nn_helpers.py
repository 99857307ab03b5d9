"""Shared helpers for the nn tests: run the same computation in tracec and
in PyTorch (the oracle) and compare outputs and gradients."""
from __future__ import annotations

import numpy as np
import torch

import tracec

TOL = {np.float32: dict(atol=2e-5, rtol=2e-5), np.float64: dict(atol=1e-10, rtol=1e-9)}


def tol(dtype, scale: float = 1.0) -> dict:
    t = TOL[np.dtype(dtype).type]
    return {k: v * scale for k, v in t.items()}


def rnd(rng, *shape, dtype=np.float64, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def pair(a, requires_grad=None):
    """The same array as a tracec tensor and a torch tensor (floats require
    grad unless told otherwise)."""
    a = np.asarray(a)
    rg = a.dtype.kind == "f" if requires_grad is None else requires_grad
    return (tracec.tensor(a.copy(), requires_grad=rg),
            torch.tensor(a.copy(), requires_grad=rg))


def npy(t) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t
    return t.detach().numpy()


def close(a, b, **kw):
    np.testing.assert_allclose(npy(a), npy(b), **kw)


def compare_fn(tc_fn, th_fn, arrays, *, seed=0, scale=1.0, grad=True, nograd=()):
    """Call both functions on the same inputs; compare outputs, then the
    gradients of every float input (but those at ``nograd`` positions) for
    a random upstream gradient."""
    rng = np.random.default_rng(seed)
    tcs, ths = zip(*[pair(a, None if grad and i not in nograd else False)
                     for i, a in enumerate(arrays)])
    y1 = tc_fn(*tcs)
    y2 = th_fn(*ths)
    dtype = next((np.asarray(a).dtype for a in arrays if np.asarray(a).dtype.kind == "f"),
                 np.float64)
    t = tol(dtype, scale)
    outs1 = y1 if isinstance(y1, tuple) else (y1,)
    outs2 = y2 if isinstance(y2, tuple) else (y2,)
    for o1, o2 in zip(outs1, outs2):
        assert tuple(o1.shape) == tuple(o2.shape), (o1.shape, o2.shape)
        close(o1, o2, **t)
    if not grad or not y2.requires_grad:
        return y1, y2
    g = rng.standard_normal(tuple(y2.shape)).astype(npy(y2).dtype)
    y1.backward(tracec.tensor(g))
    y2.backward(torch.tensor(g))
    for a, b in zip(tcs, ths):
        if b.grad is not None:
            assert a.grad is not None
            close(a.grad, b.grad, **t)
    return y1, y2


def copy_weights(tc_mod, th_mod):
    """Load torch's state into the tracec module (through load_state_dict)."""
    sd = {k: tracec.tensor(v.detach().numpy().copy()) for k, v in th_mod.state_dict().items()}
    tc_mod.load_state_dict(sd)


def compare_params_grads(tc_mod, th_mod, **t):
    n1 = dict(tc_mod.named_parameters())
    n2 = dict(th_mod.named_parameters())
    assert list(n1) == list(n2)
    for k in n2:
        if n2[k].grad is None:
            assert n1[k].grad is None, k
            continue
        assert n1[k].grad is not None, k
        close(n1[k].grad, n2[k].grad, err_msg=k, **t)


def assert_same_containers(a, b, leaf):
    """tracec-side ``a`` mirrors torch-side ``b``: the same container types
    (dicts with the same keys in order, lists and tuples of the same
    length), and ``leaf(x, y)`` checks every pair of non-containers."""
    if isinstance(b, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in b:
            assert_same_containers(a[k], b[k], leaf)
    elif isinstance(b, (list, tuple)) and not hasattr(b, "numel"):  # torch.Size is a tuple
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_containers(x, y, leaf)
    else:
        leaf(a, b)
