"""What programs30 found missing, against PyTorch 2.13:

* a view made under ``no_grad`` of a tensor that requires grad (PyTorch's
  NO_GRAD_MODE creation meta): PyTorch gives it ``requires_grad=True``, as
  a leaf with no ``grad_fn`` whose gradient reaches neither it nor its
  base; tracec said ``requires_grad=False``, so ``loss.backward()`` of a
  loss computed from it raised "element 0 of tensors does not require
  grad" where PyTorch runs (poincare-embeddings' ``normalize`` variant
  returning ``u.view(-1, d).renorm_(...).view(u.size())`` under no_grad).
  And such a view written in place (through itself or its base) and then
  used with grad mode on is refused with PyTorch's error, which tracec did
  not raise for a write through the view itself.  The published form, a
  renorm_ under no_grad through a view of a non-leaf, keeps the non-leaf's
  graph in both."""
import numpy as np
import pytest
import torch

import tracec

W = np.random.RandomState(0).randn(4, 2).astype(np.float32)


def _flags(lib):
    w = lib.tensor(W, requires_grad=True)
    e = w * 1.0
    with lib.no_grad():
        views = [w.view(-1), w[1:], w.t(), e.view(-1, 2), e.view(-1, 2).view(8),
                 w.detach().view(-1), w * 2]
    return [(v.requires_grad, v.is_leaf, v.grad_fn is None) for v in views]


def test_no_grad_view_flags_match_torch():
    assert _flags(tracec) == _flags(torch)


def _dead_leaf_grads(lib):
    w = lib.tensor(W, requires_grad=True)
    x = lib.tensor(W[:, ::-1].copy(), requires_grad=True)
    e = w * 1.0
    with lib.no_grad():
        v = e.view(-1, 2)
    n = v.narrow(1, 0, 1)
    loss = (n * x[:, :1]).sum() + (x ** 2).sum()
    loss.backward()
    return loss, w.grad, v.grad, x.grad, n.requires_grad


def test_gradient_through_no_grad_view_stops_there():
    loss, wg, vg, xg, nr = _dead_leaf_grads(tracec)
    loss_t, wg_t, vg_t, xg_t, nr_t = _dead_leaf_grads(torch)
    assert (wg_t, vg_t, nr_t) == (None, None, True)
    assert (wg, vg, nr) == (None, None, True)
    np.testing.assert_allclose(loss.item(), loss_t.item(), rtol=1e-6)
    np.testing.assert_allclose(xg.numpy(), xg_t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("through", ["view", "base"])
def test_no_grad_view_written_then_used_with_grad_is_refused(through):
    for lib in (torch, tracec):
        w = lib.tensor(W, requires_grad=True)
        e = w * 1.0
        with lib.no_grad():
            v = e.view(-1, 2)
            (v if through == "view" else e).mul_(2)
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode and its base "
                           "or another view of its base has been modified inplace"):
            v.narrow(1, 0, 1)


def _poincare_style(lib, returns_view, backend=None):
    """EnergyFunction.forward's lookup normalised under no_grad, then the
    distances' cross-entropy; the embedding's gradient."""
    emb = lib.nn.Embedding(6, 2)
    with lib.no_grad():
        emb.weight.copy_(lib.tensor(np.linspace(-0.5, 0.5, 12, dtype=np.float32).reshape(6, 2)))
    idx = lib.tensor([[0, 1, 2, 3], [4, 5, 0, 1]])

    def normalize(u):
        if returns_view:
            return u.view(-1, 2).renorm_(2, 0, 0.3).view(u.size())
        u.view(-1, 2).renorm_(2, 0, 0.3)
        return u

    def loss_fn(idx):
        e = emb(idx)
        with lib.no_grad():
            e = normalize(e)
        o, s = e.narrow(1, 1, 3), e.narrow(1, 0, 1).expand(2, 3, 2)
        d = ((o - s) ** 2).sum(-1)
        return lib.nn.functional.cross_entropy(-d, lib.zeros(2, dtype=lib.long))

    if backend is not None:
        loss_fn = lib.compile(loss_fn, backend=backend)
    loss = loss_fn(idx)
    loss.backward()
    return loss, emb.weight.grad


@pytest.mark.parametrize("returns_view", [False, True], ids=["published", "returns_view"])
@pytest.mark.parametrize("backend", [None, "interp", "cpu"])
def test_poincare_normalize_under_no_grad_matches_torch(returns_view, backend):
    loss_t, g_t = _poincare_style(torch, returns_view)
    loss, g = _poincare_style(tracec, returns_view, backend)
    np.testing.assert_allclose(loss.item(), loss_t.item(), rtol=1e-6)
    if g_t is None:
        assert g is None
    else:
        np.testing.assert_allclose(g.numpy(), g_t.numpy(), rtol=1e-5, atol=1e-7)
