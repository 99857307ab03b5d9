"""Gradients at degenerate inputs against PyTorch 2.13: a constant or zero
row, equal rows, a zero base, an all-ignored batch, ties.  Each of these gave
NaN (or a different split) where PyTorch gives a finite gradient, and a NaN
gradient poisons every parameter at the next optimizer step.  Eager, and
compiled on interp and cpu."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

DATA = {
    "zeros": np.zeros((2, 4), np.float32),
    "const": np.full((2, 4), 3.0, np.float32),
    "ties": np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32),
    "withzero": np.array([[1, 0, 3, 2], [0, 0, 2, 5]], np.float32),
}

CASES = {
    "std": lambda L, x: x.std(),
    "std_dim": lambda L, x: x.std(1).sum(),
    "std_mean": lambda L, x: L.std_mean(x, 1)[0].sum(),
    "std_keepdim": lambda L, x: (x / (x.std(-1, keepdim=True) + 1e-6)).sum(),
    "norm": lambda L, x: x.norm(dim=1).sum(),
    "pdist": lambda L, x: L.nn.functional.pdist(x).sum(),
    "pdist_p3": lambda L, x: L.nn.functional.pdist(x, p=3).sum(),
    "normalize": lambda L, x: (L.nn.functional.normalize(x, dim=1) * L.arange(4.0)).sum(),
    "pow0": lambda L, x: (x ** 0).sum(),
    "pow_tensor": lambda L, x: L.pow(x, x).sum(),
    "pow_zero_exponent": lambda L, x: L.pow(x, x * 0).sum(),
    "nll_all_ignored": lambda L, x: L.nn.functional.nll_loss(x, L.tensor([-100, -100])),
    "ce_all_ignored": lambda L, x: L.nn.functional.cross_entropy(x, L.tensor([-100, -100])),
    "ce_smooth_ignored": lambda L, x: L.nn.functional.cross_entropy(
        x, L.tensor([-100, -100]), label_smoothing=0.1),
    "ce_some_ignored": lambda L, x: L.nn.functional.cross_entropy(x, L.tensor([-100, 2])),
    "fmax": lambda L, x: L.fmax(x, L.ones_like(x) * 2).sum(),
    "fmin": lambda L, x: L.fmin(x, x.flip(1)).sum(),
    "maximum": lambda L, x: L.maximum(x, x.flip(1)).sum(),
}


def _compare(got, want, rtol=1e-5):
    if want is None:
        assert got is None
        return
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6, equal_nan=True)


def _tracec_run(f, data, mode):
    """f(tracec, x) and x's gradient, eagerly or from the compiled step's
    second call (the first traces)."""
    cv = tracec.tensor(data, requires_grad=True)
    if mode == "eager":
        cl = f(tracec, cv)
        cl.backward()
        return cl, cv.grad

    def step(v):
        r = f(tracec, v)
        r.backward()
        return r.detach()
    cf = tracec.compile(step, backend=mode)
    for _ in range(2):
        cv.grad = None
        cl = cf(cv)
    return cl, cv.grad


@pytest.mark.parametrize("mode", ["eager", "interp", "cpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_degenerate_gradients_match_pytorch(case, mode):
    f = CASES[case]
    for name, data in DATA.items():
        tv = torch.tensor(data, requires_grad=True)
        tl = f(torch, tv)
        tl.backward()
        cl, g = _tracec_run(f, data, mode)
        _compare(cl.detach().numpy(), tl.detach().numpy())
        tg = tv.grad
        assert g is not None, (case, name)
        if not np.isnan(tg.numpy()).any():
            assert np.isfinite(g.numpy()).all(), (case, name, g)
        _compare(g.numpy(), tg.numpy(), rtol=1e-4)


def test_median_of_infinities():
    x = np.array([[-np.inf, -np.inf, 1, 2], [-np.inf] * 4], np.float32)
    c = tracec.tensor(x, requires_grad=True)
    assert c.median().item() == torch.tensor(x).median().item() == -np.inf


LOSSES = {
    # a saturated sigmoid: PyTorch's BCE backward divides by max(x (1 - x), 1e-12)
    "bce_saturated": lambda L, x: L.nn.functional.binary_cross_entropy(
        L.sigmoid(x * 40), (x > 0).float()),
    "bce_weight": lambda L, x: L.nn.functional.binary_cross_entropy(
        L.sigmoid(x * 40), L.ones_like(x), weight=L.arange(4.0)),
    "BCELoss_sum": lambda L, x: L.nn.BCELoss(reduction="sum")(L.sigmoid(x * 40),
                                                              L.zeros_like(x)),
    # margins met exactly: PyTorch's kernels count z > 0 only
    "multi_margin": lambda L, x: L.nn.functional.multi_margin_loss(x, L.tensor([0, 3])),
    "multilabel_margin": lambda L, x: L.nn.functional.multilabel_margin_loss(
        x, L.tensor([[1, 2, -1, 0], [3, -1, 0, 0]])),
    # logsigmoid's gradient at 0 is 0.5
    "multilabel_soft_margin": lambda L, x: L.nn.functional.multilabel_soft_margin_loss(
        x * 0, (x > 1).float()),
}
LOSS_DATA = np.array([[-0.9, 1.0, 2.0, 0.0], [3.0, 2.0, 2.0, -0.8]], np.float32)


@pytest.mark.parametrize("mode", ["eager", "cpu"])
@pytest.mark.parametrize("case", sorted(LOSSES))
def test_loss_gradients_match_pytorch(case, mode):
    f = LOSSES[case]
    tv = torch.tensor(LOSS_DATA, requires_grad=True)
    tl = f(torch, tv)
    tl.backward()
    cl, g = _tracec_run(f, LOSS_DATA, mode)
    _compare(cl.detach().numpy(), tl.detach().numpy())
    _compare(g.numpy(), tv.grad.numpy(), rtol=1e-4)


def test_bce_target_gradient():
    """The input's gradient is PyTorch's formula; the target's still comes
    from the loss (soft targets from another network)."""
    x = np.array([0.2, 0.7, 1e-9, 0.999], np.float32)
    y = np.array([0.1, 0.9, 0.5, 0.2], np.float32)
    w = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    grads = []
    for L in (torch, tracec):
        xs, ys = (L.tensor(a, requires_grad=True) for a in (x, y))
        L.nn.functional.binary_cross_entropy(xs, ys, weight=L.tensor(w)).backward()
        grads.append([v.grad.numpy() for v in (xs, ys)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-5)
