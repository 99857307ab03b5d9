"""nn layers scripts still name: SyncBatchNorm (and convert_sync_batchnorm)
outside a process group, NLLLoss2d, CrossMapLRN2d, Container — against
PyTorch.  The cross-rank SyncBatchNorm is tested under mpiexec
(tests/distributed/worker.py, case ``syncbn``)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


def test_sync_batchnorm_without_a_group_is_batchnorm():
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 5)).astype(np.float32)
    results = {}
    for lib in (torch, tracec):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4, momentum=None))
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.tensor(np.linspace(-1, 1, p.numel(), dtype=np.float32)
                                   .reshape(tuple(p.shape))))
        s = lib.nn.SyncBatchNorm.convert_sync_batchnorm(m)
        assert s[1].weight is m[1].weight
        xi = lib.tensor(x, requires_grad=True)
        y = s(xi)
        y.pow(2).sum().backward()
        results[lib.__name__] = (repr(s).replace("torch.", ""), y.detach().numpy(),
                                 xi.grad.numpy(), s[1].running_var.numpy(),
                                 s[1].weight.grad.numpy())
    ours, theirs = results["tracec"], results["torch"]
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        tracec.nn.SyncBatchNorm(3)(tracec.ones(3))


def test_nllloss2d_crossmaplrn2d_container():
    x = np.random.default_rng(1).standard_normal((2, 4, 3, 3)).astype(np.float32)
    t = np.random.default_rng(2).integers(0, 4, (2, 3, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = tracec.nn.NLLLoss2d()(tracec.tensor(x).log_softmax(1), tracec.tensor(t))
        b = torch.nn.NLLLoss2d()(torch.tensor(x).log_softmax(1), torch.tensor(t))
        c = tracec.nn.Container(act=tracec.nn.ReLU())
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        tracec.nn.NLLLoss2d()
    for size in (1, 2, 3, 5, 8):
        np.testing.assert_allclose(tracec.nn.CrossMapLRN2d(size, 0.1)(tracec.tensor(x)).numpy(),
                                   torch.nn.CrossMapLRN2d(size, 0.1)(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    # PyTorch's hand-written backward assumes symmetric windows, which its
    # forward does not use (and fails for size 1): ours is the forward's
    # true gradient.
    x64 = tracec.tensor(x.astype(np.float64), requires_grad=True)
    assert tracec.autograd.gradcheck(lambda t: tracec.nn.CrossMapLRN2d(3, 0.1)(t), (x64,))
    assert list(dict(c.named_children())) == ["act"]
