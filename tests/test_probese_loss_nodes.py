"""The ``grad_fn`` graph of common losses as ``next_functions`` shows it,
checked against torch 2.13 in the same process: node names, edge by edge,
six levels deep (cross_entropy is NllLossBackward0 -> LogSoftmaxBackward0
-> the input's edge; with label_smoothing PyTorch's sum of MulBackward1
terms, its smoothing term's DivBackward0 -> SumBackward0 ->
MaskedFillBackward0 -> NegBackward0; class probabilities end in
DivBackward1; mean()'s node lists its input, not tracec's sum; binary
cross entropies list input and target).  Gradients are unchanged."""
import pytest
import torch

import tracec


def _chain(fn, depth=0):
    if fn is None:
        return None
    if depth == 6:
        return type(fn).__name__
    return (type(fn).__name__,
            tuple((_chain(n, depth + 1), i) for n, i in fn.next_functions))


def _inputs(L):
    x = (L.arange(12.0).reshape(3, 4) / 7).requires_grad_()
    p = L.softmax(L.arange(12.0).reshape(3, 4), 1)
    x4 = (L.arange(24.0).reshape(1, 4, 3, 2) / 9).requires_grad_()
    return x, L.tensor([0, 1, 3]), p, x4


def _w(L):
    return L.tensor([1.0, 2, 3, 4])


CASES = {
    "ce": lambda L, F, x, t, p, x4: F.cross_entropy(x, t),
    "ce sum": lambda L, F, x, t, p, x4: F.cross_entropy(x, t, reduction="sum"),
    "ce none": lambda L, F, x, t, p, x4: F.cross_entropy(x, t, reduction="none"),
    "ce weight": lambda L, F, x, t, p, x4: F.cross_entropy(x, t, weight=_w(L)),
    "ce ignore_index": lambda L, F, x, t, p, x4: F.cross_entropy(x, L.tensor([0, -100, 3])),
    "ce 2d": lambda L, F, x, t, p, x4: F.cross_entropy(x4, L.zeros(1, 3, 2, dtype=L.long)),
    "ce label_smoothing": lambda L, F, x, t, p, x4: F.cross_entropy(x, t, label_smoothing=0.1),
    "ce label_smoothing sum": lambda L, F, x, t, p, x4: F.cross_entropy(
        x, t, label_smoothing=0.1, reduction="sum"),
    "ce label_smoothing none": lambda L, F, x, t, p, x4: F.cross_entropy(
        x, t, label_smoothing=0.1, reduction="none"),
    "ce label_smoothing weight": lambda L, F, x, t, p, x4: F.cross_entropy(
        x, t, weight=_w(L), label_smoothing=0.1),
    "ce probabilities": lambda L, F, x, t, p, x4: F.cross_entropy(x, p),
    "ce probabilities smoothed": lambda L, F, x, t, p, x4: F.cross_entropy(
        x, p, label_smoothing=0.2),
    "CrossEntropyLoss": lambda L, F, x, t, p, x4: L.nn.CrossEntropyLoss()(x, t),
    "nll_loss": lambda L, F, x, t, p, x4: F.nll_loss(F.log_softmax(x, 1), t),
    "nll_loss weight": lambda L, F, x, t, p, x4: F.nll_loss(x, t, weight=_w(L)),
    "mse_loss": lambda L, F, x, t, p, x4: F.mse_loss(x, p),
    "l1_loss": lambda L, F, x, t, p, x4: F.l1_loss(x, p),
    "bce_with_logits": lambda L, F, x, t, p, x4: F.binary_cross_entropy_with_logits(x, p),
    "bce_with_logits weights": lambda L, F, x, t, p, x4: F.binary_cross_entropy_with_logits(
        x, p, weight=L.ones(4), pos_weight=L.ones(4)),
    "bce": lambda L, F, x, t, p, x4: F.binary_cross_entropy(L.sigmoid(x), p),
    "mean": lambda L, F, x, t, p, x4: (x * 2).mean(),
    "mean dim": lambda L, F, x, t, p, x4: (x * 2).mean(1, keepdim=True),
}


def _run(L, fn):
    x, t, p, x4 = _inputs(L)
    out = fn(L, L.nn.functional, x, t, p, x4)
    chain = _chain(out.grad_fn)
    out.sum().backward()
    g = x.grad if x.grad is not None else x4.grad
    return chain, g.tolist()


@pytest.mark.parametrize("name", list(CASES))
def test_loss_graph_as_torch(name):
    chain, grad = _run(tracec, CASES[name])
    want_chain, want_grad = _run(torch, CASES[name])
    assert chain == want_chain
    assert torch.allclose(torch.tensor(grad), torch.tensor(want_grad), atol=1e-6)
