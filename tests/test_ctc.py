"""``nn.CTCLoss`` / ``F.ctc_loss`` against PyTorch on small cases: padded
and concatenated targets, repeated labels, a non-zero blank, empty targets,
unequal input lengths, every reduction, ``zero_infinity``, unbatched input,
float32 and float64, the gradient through ``log_softmax`` and on a leaf
``log_probs`` (PyTorch's convention), and the argument errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tracec
from nn_helpers import close, npy


def _case(seed, steps=6, batch=3, classes=5, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, batch, classes)).astype(dtype)
    return rng, x


def _run(lib, x, targets, il, tl, softmax=True, **kw):
    xt = lib.tensor(x, requires_grad=True)
    lp = xt.log_softmax(-1) if softmax else xt
    cast = lib.tensor if not isinstance(il, tuple) else (lambda v: v)
    loss = lib.nn.CTCLoss(**kw)(lp, lib.tensor(targets), cast(il), cast(tl))
    return xt, loss


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_matches_torch(reduction, layout):
    rng, x = _case(0)
    tl = [3, 2, 1]
    il = [6, 5, 4]
    padded = rng.integers(1, 5, (3, 3))
    padded[0, 1] = padded[0, 0]  # a repeated label needs a blank between
    targets = (padded if layout == "padded"
               else np.concatenate([padded[i, :n] for i, n in enumerate(tl)]))
    outs = [_run(lib, x, targets, il, tl, reduction=reduction) for lib in (tracec, torch)]
    (xa, la), (xb, lb) = outs
    close(la, lb, rtol=1e-10)
    g = np.linspace(0.5, 1.5, la.numel()).reshape(tuple(la.shape))
    la.backward(tracec.tensor(g))
    lb.backward(torch.tensor(g))
    close(xa.grad, xb.grad, rtol=1e-9, atol=1e-12)


def test_ctc_leaf_log_probs_grad_follows_torch_convention():
    rng, x = _case(1, dtype=np.float32)
    lp = npy(torch.tensor(x).log_softmax(-1))
    targets, il, tl = rng.integers(1, 5, (3, 2)), (6, 6, 3), (2, 1, 2)
    (xa, la), (xb, lb) = [_run(lib, lp, targets, il, tl, softmax=False, blank=0)
                          for lib in (tracec, torch)]
    close(la, lb, rtol=1e-5)
    la.backward()
    lb.backward()
    close(xa.grad, xb.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_impossible_and_empty_targets(zero_infinity):
    rng, x = _case(2, steps=5, classes=4)
    tl, il = [3, 4, 0], [5, 3, 2]  # sample 1 cannot fit 4 labels in 3 steps
    targets = rng.integers(0, 3, sum(tl))
    (xa, la), (xb, lb) = [_run(lib, x, targets, il, tl, blank=3, reduction="none",
                               zero_infinity=zero_infinity) for lib in (tracec, torch)]
    close(la, lb, rtol=1e-10)
    assert np.isinf(npy(la)[1]) != zero_infinity
    if zero_infinity:
        (xa2, ma), (xb2, mb) = [_run(lib, x, targets, il, tl, blank=3, zero_infinity=True)
                                for lib in (tracec, torch)]
        ma.backward()
        mb.backward()
        close(xa2.grad, xb2.grad, rtol=1e-9, atol=1e-12)


def test_ctc_unbatched():
    rng, x = _case(3, batch=1)
    for reduction in ("none", "mean"):
        a = tracec.nn.functional.ctc_loss(tracec.tensor(x[:, 0]).log_softmax(1),
                                          tracec.tensor([1, 2]), tracec.tensor(6),
                                          tracec.tensor(2), reduction=reduction)
        b = torch.nn.functional.ctc_loss(torch.tensor(x[:, 0]).log_softmax(1),
                                         torch.tensor([1, 2]), torch.tensor(6),
                                         torch.tensor(2), reduction=reduction)
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b, rtol=1e-10)


@pytest.mark.parametrize("args,kw", [
    (((6, 5), (2, 2)), {}),
    (((5, 5), (3, 2)), {}),
    (((5, 5, 5), (2, 2)), {}),
    (((5, 5), (2, 2)), {"blank": 4}),
])
def test_ctc_errors_match_torch(args, kw):
    msgs = []
    for lib in (tracec, torch):
        with pytest.raises(RuntimeError) as e:
            lib.nn.functional.ctc_loss(lib.zeros(5, 2, 4), lib.tensor([[1, 2], [1, 1]]), *args,
                                       **kw)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("reduction,zero_infinity", [("none", False), ("none", True),
                                                     ("mean", True), ("sum", False)])
def test_ctc_grad_fn_names_match_torch(reduction, zero_infinity):
    # PyTorch's CTC node is CtcLossBackward0; zero_infinity is a where() after it
    rng, x = _case(3)
    targets = np.array([[1, 1, 1, 1, 1, 1], [1, 3, 0, 0, 0, 0]])
    names = []
    for lib in (tracec, torch):
        lp = lib.tensor(x[:, :2]).log_softmax(-1).detach().requires_grad_()
        loss = lib.nn.functional.ctc_loss(lp, lib.tensor(targets), lib.tensor([6, 6]),
                                          lib.tensor([6, 2]), reduction=reduction,
                                          zero_infinity=zero_infinity)
        loss.sum().backward()
        names.append((loss.grad_fn.name(), bool(lib.isfinite(lp.grad).all())))
    assert names[0] == names[1]
