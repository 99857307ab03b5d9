"""Eager fast paths of composites in training steps of convolutional nets:
hardtanh / ReLU6 (tracec/nn/_basic.py ``_hardtanh_direct``) against the
primitives' values and gradients bit for bit and against PyTorch 2.13."""
import numpy as np
import pytest
import torch

import tracec
from tracec.nn import _basic


def _special(dtype, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 5).astype(dtype)
    x[:12] = [np.nan, np.inf, -np.inf, 6.0, -1.0, 1.0, -3.0, 2.0, 0.25, 5.999999, 6.000001,
              -0.999999]
    x[12] = np.array(0x7FC00123, np.uint32).view(np.float32) if dtype == np.float32 \
        else np.array(0x7FF8000000000123, np.uint64).view(np.float64)   # a NaN payload
    return x


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (-3.0, 2.0), (0.0, 6.0), (-2.5, 0.0)])
@pytest.mark.parametrize("zeros", [False, True])
def test_hardtanh_direct_is_the_primitives_bits(dtype, bounds, zeros):
    x = _special(dtype).reshape(40, 100)
    if zeros:
        x[3, :4] = [0.0, -0.0, 0.0, -0.0]     # a zero bound then takes the primitives
    g = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)
    taken = _basic._hardtanh_direct(tracec.tensor(x), *bounds) is not None
    assert taken == (not zeros or 0.0 not in bounds)
    outs = []
    for direct in (True, False):
        v = tracec.tensor(x, requires_grad=True)
        if direct:
            y = _basic._hardtanh(v, *bounds)
        else:
            lo, hi = bounds
            outside = tracec.ops.logical_or(tracec.ops.le(v, lo), tracec.ops.ge(v, hi))
            y = tracec.ops.where(outside, tracec.ops.stop_gradient(tracec.clamp(v, lo, hi)), v)
        y.backward(tracec.tensor(g))
        outs.append((y.detach().numpy(), v.grad.numpy()))
    np.testing.assert_array_equal(_bits(outs[0][0]), _bits(outs[1][0]))
    np.testing.assert_array_equal(_bits(outs[0][1]), _bits(outs[1][1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inplace", [False, True])
def test_relu6_and_hardtanh_match_pytorch(dtype, inplace):
    x = _special(dtype).reshape(2, 4, 500)
    x[np.isnan(x)] = 1.5          # PyTorch's gradient at NaN varies by its loop
    g = np.random.default_rng(2).standard_normal(x.shape).astype(dtype)
    for f in (lambda lib, v: lib.nn.functional.relu6(v, inplace=inplace),
              lambda lib, v: lib.nn.functional.hardtanh(v, -2.0, 3.5, inplace=inplace)):
        res = []
        for lib in (torch, tracec):
            v = lib.tensor(x, requires_grad=True)
            y = f(lib, v * 1.0)
            assert y.grad_fn.name() == "HardtanhBackward0" or inplace
            y.backward(lib.tensor(g))
            res.append((y.detach().numpy(), v.grad.numpy()))
        np.testing.assert_array_equal(_bits(res[1][0]), _bits(res[0][0]))
        np.testing.assert_array_equal(res[1][1], res[0][1])


def test_hardtanh_direct_double_backward():
    x = tracec.tensor([-2.0, -0.5, 0.3, 0.9, 1.7], requires_grad=True)
    y = tracec.nn.functional.hardtanh(x)
    (gx,) = tracec.autograd.grad((y * y).sum(), x, create_graph=True)
    (ggx,) = tracec.autograd.grad(gx.sum(), x)
    tx = torch.tensor([-2.0, -0.5, 0.3, 0.9, 1.7], dtype=torch.float32, requires_grad=True)
    ty = torch.nn.functional.hardtanh(tx)
    (tgx,) = torch.autograd.grad((ty * ty).sum(), tx, create_graph=True)
    (tggx,) = torch.autograd.grad(tgx.sum(), tx)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy())
    np.testing.assert_allclose(ggx.numpy(), tggx.numpy())
