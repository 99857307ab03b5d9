"""Eager fast paths of composites and primitives in training steps of
convolutional nets: hardtanh / ReLU6 (tracec/nn/_basic.py ``_hardtanh_direct``),
batch norm in training (tracec/nn/_batch_norm_eager.py), the logistic
primitive's impl; against the primitives' bits and against PyTorch 2.13."""
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


# --- batch norm in training mode (tracec/nn/_batch_norm_eager.py) ----------------------------

BN_SHAPES = [(16, 5), (4, 6, 9), (3, 4, 5, 7), (2, 3, 4, 3, 5), (2, 1, 3)]


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_train_matches_pytorch(shape, dtype, affine):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    c = shape[1]
    w = rng.standard_normal(c).astype(dtype)
    b = rng.standard_normal(c).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    rm = rng.standard_normal(c).astype(dtype)
    rv = rng.random(c).astype(dtype) + 0.5
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    res = []
    for lib in (torch, tracec):
        tx = lib.tensor(x, requires_grad=True)
        tw, tb = (lib.tensor(v, requires_grad=True) for v in (w, b))
        trm, trv = lib.tensor(rm), lib.tensor(rv)
        y = lib.nn.functional.batch_norm(tx, trm, trv, tw if affine else None,
                                         tb if affine else None, training=True,
                                         momentum=0.3, eps=1e-3)
        assert y.grad_fn.name() == "NativeBatchNormBackward0"
        y.backward(lib.tensor(g))
        res.append([y.detach().numpy(), tx.grad.numpy(), trm.numpy(), trv.numpy()]
                   + ([tw.grad.numpy(), tb.grad.numpy()] if affine else []))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs", [(4, 6, 5, 3), (1, 3, 7), (5, 4), (3, 2, 1, 4)])
def test_batch_norm_train_eager_is_the_composites_bits(affine, dtype, xs, monkeypatch):
    """The NumPy forward and backward are the composite's primitives and
    VJPs in the tape's order: value, batch statistics and every gradient
    bit for bit (the native backward, for large tensors, is not: off)."""
    from tracec.nn import _batch_norm_eager as bn
    monkeypatch.setattr(bn.NATIVE, "makers", [])
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(xs) * 2 + 0.5).astype(dtype)
    c = xs[1]
    w, b = rng.standard_normal((2, c)).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    axes = (0,) + tuple(range(2, len(xs)))
    shape = (1, c) + (1,) * (len(xs) - 2)
    outs = []
    for eager in (True, False):
        tx = tracec.tensor(x, requires_grad=True)
        tw, tb = (tracec.tensor(v, requires_grad=True) for v in (w, b))
        if eager:
            y, mean, var = bn.apply_train(tx, tw if affine else None, tb if affine else None,
                                          axes, shape, 1e-5)
        else:
            y, mean, var = bn.normalize_prims(tx, axes, shape, 1e-5)
            y = bn._affine_prims(y, tw if affine else None, tb if affine else None, shape)
        y.backward(tracec.tensor(g))
        outs.append([y.detach().numpy(), mean.detach().numpy(), var.detach().numpy(),
                     tx.grad.numpy()] + ([tw.grad.numpy(), tb.grad.numpy()] if affine else []))
    for got, want in zip(*outs):
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_batch_norm_train_double_backward_matches_pytorch():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 3, 4))
    w, b = rng.standard_normal((2, 3))
    res = []
    for lib in (torch, tracec):
        tx = lib.tensor(x, requires_grad=True)
        tw, tb = (lib.tensor(v, requires_grad=True) for v in (w, b))
        y = lib.nn.functional.batch_norm(tx, None, None, tw, tb, training=True)
        (gx,) = lib.autograd.grad((y * y * y).sum(), tx, create_graph=True)
        gx.square().sum().backward()
        res.append([gx.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()])
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


# --- sigmoid (the logistic primitive's impl: SiLU, swish, sigmoid) ---------------------------

def _sigmoid_two_branch(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x))).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logistic_impl_is_the_two_branch_formulas_bits(dtype):
    from tracec.ops import elementwise as ew
    rng = np.random.default_rng(7)
    x = np.concatenate([np.linspace(-800, 800, 200001), rng.standard_normal(70000) * 12,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-45, -1e-45,
                         88.72, -88.72, 103.9, -103.9, 709.8, -745.2]]).astype(dtype)
    with np.errstate(all="ignore"):
        want = _sigmoid_two_branch(x)
        got = ew.logistic_p.impl(x)
        got2 = ew.logistic_p.impl(x[::7].reshape(-1, 1)[:1000])     # strided, small
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(_bits(got[keep]), _bits(want[keep]))
    np.testing.assert_array_equal(np.isnan(got), ~keep)
    np.testing.assert_array_equal(_bits(got2), _bits(want[::7][:1000].reshape(-1, 1)))
    assert ew.logistic_p.impl(np.asarray(dtype(-3.0))) == _sigmoid_two_branch(
        np.asarray(dtype(-3.0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_and_sigmoid_match_pytorch(dtype):
    x = (np.random.default_rng(8).standard_normal((4, 8, 1200)) * 6).astype(dtype)
    g = np.random.default_rng(9).standard_normal(x.shape).astype(dtype)
    tol = dict(rtol=2e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-14, atol=1e-14)
    for f in (lambda lib, v: lib.nn.functional.silu(v), lambda lib, v: lib.sigmoid(v)):
        res = []
        for lib in (torch, tracec):
            v = lib.tensor(x, requires_grad=True)
            y = f(lib, v)
            y.backward(lib.tensor(g))
            res.append((y.detach().numpy(), v.grad.numpy()))
        for got, want in zip(res[1], res[0]):
            np.testing.assert_allclose(got, want, **tol)


# --- hardswish (tracec/nn/_activation.py ``_HardswishEager``) --------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hardswish_eager_is_the_primitives_bits(dtype):
    from tracec.nn import _activation
    x = np.concatenate([_special(dtype), np.linspace(-4, 4, 2001).astype(dtype),
                        np.array([-3.0, 3.0, -0.0, 0.0, -2.9999998, 2.9999998], dtype)])
    g = np.random.default_rng(3).standard_normal(x.shape).astype(dtype)
    outs = []
    for eager in (True, False):
        v = tracec.tensor(x, requires_grad=True)
        y = _activation._HardswishEager.apply(v) if eager else _activation._hardswish_prims(v)
        y.backward(tracec.tensor(g))
        outs.append((y.detach().numpy(), v.grad.numpy()))
    np.testing.assert_array_equal(_bits(outs[0][0]), _bits(outs[1][0]))
    np.testing.assert_array_equal(_bits(outs[0][1]), _bits(outs[1][1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inplace", [False, True])
def test_hardswish_matches_pytorch(dtype, inplace):
    x = np.concatenate([np.linspace(-5, 5, 3001), [-3.0, 3.0, -0.0, 0.0, np.inf, -np.inf]])
    x = x.astype(dtype)
    g = np.random.default_rng(4).standard_normal(x.shape).astype(dtype)
    res = []
    for lib in (torch, tracec):
        v = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.hardswish(v * 1.0, inplace=inplace)
        assert y.grad_fn.name() == "HardswishBackward0" or inplace
        y.backward(lib.tensor(g))
        res.append((y.detach().numpy(), v.grad.numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.signbit(res[1][0]), np.signbit(res[0][0]))
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-6, atol=1e-7)


def test_hardswish_eager_double_backward():
    x = [-3.5, -2.0, -0.5, 0.7, 2.9, 4.0]
    res = []
    for lib in (torch, tracec):
        v = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        y = lib.nn.functional.hardswish(v)
        (gx,) = lib.autograd.grad((y * y).sum(), v, create_graph=True)
        (ggx,) = lib.autograd.grad(gx.sum(), v)
        res.append((gx.detach().numpy(), ggx.numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12)


# --- hardsigmoid (tracec/nn/_activation.py ``_HardsigmoidEager``) ----------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hardsigmoid_eager_is_the_primitives_bits(dtype):
    from tracec.nn import _activation
    x = np.concatenate([_special(dtype), np.linspace(-4, 4, 2001).astype(dtype),
                        np.array([-3.0, 3.0, -0.0, 0.0, -2.9999998, 2.9999998], dtype)])
    g = np.random.default_rng(3).standard_normal(x.shape).astype(dtype)
    outs = []
    for eager in (True, False):
        v = tracec.tensor(x, requires_grad=True)
        y = _activation._HardsigmoidEager.apply(v) if eager else \
            _activation._hardsigmoid_prims(v)
        y.backward(tracec.tensor(g))
        outs.append((y.detach().numpy(), v.grad.numpy()))
    for got, want in zip(*outs):
        np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inplace", [False, True])
def test_hardsigmoid_matches_pytorch(dtype, inplace):
    x = np.concatenate([np.linspace(-5, 5, 3001), [-3.0, 3.0, -0.0, 0.0, np.inf, -np.inf]])
    x = x.astype(dtype)
    g = np.random.default_rng(4).standard_normal(x.shape).astype(dtype)
    res = []
    for lib in (torch, tracec):
        v = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.hardsigmoid(v * 1.0, inplace=inplace)
        assert y.grad_fn.name() == "HardsigmoidBackward0" or inplace
        y.backward(lib.tensor(g))
        res.append((y.detach().numpy(), v.grad.numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("act", ["relu6", "relu", "leaky_relu", "elu", "hardtanh"])
def test_inplace_activation_rebases_onto_its_node(act):
    """An in-place activation on a tensor that requires grad takes the
    activation's node (as PyTorch rebases it), not copy_'s where(True, y,
    x): the same values and gradients as PyTorch, through a view too, and
    no CopyBackwards node."""
    x0 = np.linspace(-8, 8, 6 * 40, dtype=np.float32).reshape(6, 40)
    res = []
    for lib in (tracec, torch):
        F = lib.nn.functional
        fn = {"relu6": lambda t: F.relu6(t, inplace=True), "relu": lambda t: F.relu(t, True),
              "leaky_relu": lambda t: F.leaky_relu(t, 0.1, inplace=True),
              "elu": lambda t: F.elu(t, inplace=True),
              "hardtanh": lambda t: F.hardtanh(t, -2.0, 3.0, inplace=True)}[act]
        x = lib.tensor(x0, requires_grad=True)
        y = x * 1.5
        z = fn(y)
        v = x * 2.0
        fn(v[1:3])                                    # in place through a view
        ((z * z).sum() + (v * v).sum()).backward()
        res.append([z.detach().numpy(), v.detach().numpy(), x.grad.numpy()])
        if lib is tracec:
            assert y.grad_fn.name() != "CopyBackwards"
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
