"""tracec.nn.functional against PyTorch: forward values and gradients with
respect to every float input, over several configurations per op."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tracec
import tracec.nn.functional as F
from nn_helpers import close, compare_fn, pair, rnd, tol

RNG = np.random.default_rng(1234)

pytestmark = [pytest.mark.filterwarnings("ignore:Using padding='same'"),
              pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")]


# --- linear -----------------------------------------------------------------------------

@pytest.mark.parametrize("xshape", [(5, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(xshape, bias):
    rng = np.random.default_rng(0)
    arrays = [rnd(rng, *xshape), rnd(rng, 3, 4)] + ([rnd(rng, 3)] if bias else [])
    compare_fn(F.linear, TF.linear, arrays)


def test_linear_float32():
    rng = np.random.default_rng(1)
    arrays = [rnd(rng, 8, 16, dtype=np.float32), rnd(rng, 5, 16, dtype=np.float32),
              rnd(rng, 5, dtype=np.float32)]
    compare_fn(F.linear, TF.linear, arrays)


# --- convolution --------------------------------------------------------------------------

CONV2D = [
    # (N, C, H, W), (O, kh, kw), kwargs
    ((2, 3, 7, 6), (4, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3), dict(stride=2)),
    ((2, 3, 7, 6), (4, 3, 2), dict(stride=(2, 1), padding=(1, 2))),
    ((1, 2, 9, 8), (3, 3, 3), dict(padding=2, dilation=2)),
    ((2, 4, 6, 6), (6, 3, 3), dict(groups=2, padding=1)),
    ((2, 4, 6, 5), (4, 3, 3), dict(groups=4, stride=2, padding=1)),   # depthwise
    ((2, 3, 6, 7), (2, 4, 3), dict(padding="same")),
    ((1, 3, 8, 8), (2, 2, 2), dict(padding="same", dilation=(2, 3))),  # asymmetric 'same'
    ((2, 3, 5, 5), (2, 3, 3), dict(padding="valid")),
    ((2, 3, 5, 5), (2, 1, 1), {}),
    ((3, 5, 6), (2, 3, 3), dict(padding=1)),                           # unbatched
]


@pytest.mark.parametrize("xshape,wshape,kw", CONV2D)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(xshape, wshape, kw, bias):
    rng = np.random.default_rng(2)
    groups = kw.get("groups", 1)
    c = xshape[-3]
    o, kh, kw_ = wshape
    arrays = [rnd(rng, *xshape), rnd(rng, o, c // groups, kh, kw_)]
    if bias:
        arrays.append(rnd(rng, o))
    compare_fn(lambda *a: F.conv2d(*a, **kw), lambda *a: TF.conv2d(*a, **kw), arrays)


def test_conv2d_float32():
    rng = np.random.default_rng(3)
    arrays = [rnd(rng, 2, 3, 8, 8, dtype=np.float32), rnd(rng, 4, 3, 3, 3, dtype=np.float32),
              rnd(rng, 4, dtype=np.float32)]
    compare_fn(lambda *a: F.conv2d(*a, stride=2, padding=1),
               lambda *a: TF.conv2d(*a, stride=2, padding=1), arrays, scale=2)


def test_conv2d_errors():
    x = tracec.randn(1, 3, 5, 5)
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(x, tracec.randn(2, 2, 3, 3))
    with pytest.raises(RuntimeError, match="strided"):
        F.conv2d(x, tracec.randn(2, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv2d(x, tracec.randn(2, 3, 7, 7))
    with pytest.raises(RuntimeError, match="^expected scalar type Double but found Float$"):
        F.conv2d(x.double(), tracec.randn(2, 3, 3, 3))       # (torch's words)
    with pytest.raises(RuntimeError, match=r"^Input type \(double\) and bias type \(float\) "
                                           "should be the same$"):
        F.conv2d(x.double(), tracec.randn(2, 3, 3, 3), tracec.randn(2))


@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=1), dict(dilation=2, groups=2)])
def test_conv1d(kw):
    rng = np.random.default_rng(4)
    arrays = [rnd(rng, 2, 4, 11), rnd(rng, 6, 4 // kw.get("groups", 1), 3), rnd(rng, 6)]
    compare_fn(lambda *a: F.conv1d(*a, **kw), lambda *a: TF.conv1d(*a, **kw), arrays)


CONVT2D = [
    ((2, 4, 5, 4), (4, 3, 3, 3), {}),
    ((2, 4, 5, 4), (4, 3, 3, 3), dict(stride=2)),
    ((2, 4, 5, 4), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 4, 4), (4, 2, 3, 3), dict(groups=2, stride=(2, 1), dilation=2)),
    ((1, 2, 5, 4), (2, 2, 2, 2), dict(padding=2, stride=2)),  # padding beyond the kernel reach
]


@pytest.mark.parametrize("xshape,wshape,kw", CONVT2D)
def test_conv_transpose2d(xshape, wshape, kw):
    rng = np.random.default_rng(5)
    groups = kw.get("groups", 1)
    arrays = [rnd(rng, *xshape), rnd(rng, *wshape), rnd(rng, wshape[1] * groups)]
    compare_fn(lambda *a: F.conv_transpose2d(*a, **kw),
               lambda *a: TF.conv_transpose2d(*a, **kw), arrays)


def test_conv_transpose1d():
    rng = np.random.default_rng(6)
    arrays = [rnd(rng, 2, 3, 6), rnd(rng, 3, 2, 4), rnd(rng, 2)]
    kw = dict(stride=3, padding=1, output_padding=2)
    compare_fn(lambda *a: F.conv_transpose1d(*a, **kw),
               lambda *a: TF.conv_transpose1d(*a, **kw), arrays)


# --- pooling --------------------------------------------------------------------------------

MAXPOOL = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 7, 9), dict(kernel_size=3, stride=2)),
    ((2, 3, 7, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 9, 9), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=2)),
    ((2, 2, 7, 8), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((2, 2, 6, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((3, 7, 5), dict(kernel_size=2, stride=1)),                     # unbatched
]


@pytest.mark.parametrize("xshape,kw", MAXPOOL)
def test_max_pool2d(xshape, kw):
    rng = np.random.default_rng(7)
    compare_fn(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw),
               [rnd(rng, *xshape)])


@pytest.mark.parametrize("xshape,kw", MAXPOOL)
def test_max_pool2d_indices(xshape, kw):
    x = rnd(np.random.default_rng(8), *xshape)
    y1, i1 = F.max_pool2d(tracec.tensor(x), return_indices=True, **kw)
    y2, i2 = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    close(y1, y2)
    np.testing.assert_array_equal(i1.numpy(), i2.numpy())


def test_max_pool1d():
    rng = np.random.default_rng(9)
    kw = dict(kernel_size=3, stride=2, padding=1)
    compare_fn(lambda x: F.max_pool1d(x, **kw), lambda x: TF.max_pool1d(x, **kw),
               [rnd(rng, 2, 3, 10)])


def test_max_pool_pad_too_large():
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(tracec.randn(1, 1, 6, 6), 2, padding=2)


AVGPOOL = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 7, 9), dict(kernel_size=3, stride=2)),
    ((2, 3, 7, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 7, 9), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((2, 2, 7, 8), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((2, 2, 6, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 2, 6, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ((2, 2, 6, 6), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1))),
    ((2, 2, 6, 6), dict(kernel_size=3, padding=1, divisor_override=5)),
    ((3, 6, 5), dict(kernel_size=2)),                                # unbatched
]


@pytest.mark.parametrize("xshape,kw", AVGPOOL)
def test_avg_pool2d(xshape, kw):
    rng = np.random.default_rng(10)
    compare_fn(lambda x: F.avg_pool2d(x, **kw), lambda x: TF.avg_pool2d(x, **kw),
               [rnd(rng, *xshape)])


def test_avg_pool1d():
    rng = np.random.default_rng(11)
    kw = dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)
    compare_fn(lambda x: F.avg_pool1d(x, **kw), lambda x: TF.avg_pool1d(x, **kw),
               [rnd(rng, 2, 3, 10)])


@pytest.mark.parametrize("size", [(3, 2), 1, (None, 2), (7, 5), 4])
def test_adaptive_avg_pool2d(size):
    rng = np.random.default_rng(12)
    compare_fn(lambda x: F.adaptive_avg_pool2d(x, size),
               lambda x: TF.adaptive_avg_pool2d(x, size), [rnd(rng, 2, 3, 7, 5)])


# --- activations ----------------------------------------------------------------------------

ACTS = [
    (F.relu, TF.relu), (F.gelu, TF.gelu),
    (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    (F.silu, TF.silu), (F.sigmoid, TF.sigmoid), (F.tanh, TF.tanh), (F.mish, TF.mish),
    (lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    (F.elu, TF.elu), (F.softplus, TF.softplus),
    (lambda x: F.softplus(x, beta=2, threshold=3), lambda x: TF.softplus(x, beta=2, threshold=3)),
    (F.logsigmoid, TF.logsigmoid), (F.relu6, TF.relu6),
    (lambda x: F.hardtanh(x, -0.5, 0.7), lambda x: TF.hardtanh(x, -0.5, 0.7)),
    (lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1)),
    (lambda x: F.softmax(x, -1), lambda x: TF.softmax(x, -1)),
    (lambda x: F.log_softmax(x, 0), lambda x: TF.log_softmax(x, 0)),
    (lambda x: F.softmin(x, 1), lambda x: TF.softmin(x, 1)),
    (lambda x: F.normalize(x, dim=1), lambda x: TF.normalize(x, dim=1)),
    (lambda x: F.normalize(x, p=1, dim=0), lambda x: TF.normalize(x, p=1, dim=0)),
]


@pytest.mark.parametrize("i", range(len(ACTS)))
def test_activation(i):
    f, g = ACTS[i]
    compare_fn(f, g, [rnd(np.random.default_rng(13), 3, 4, 5, scale=3)])


def test_activation_inplace():
    x, y = pair(rnd(RNG, 4, 5), requires_grad=False)
    out = F.relu(x, inplace=True)
    assert out is x
    close(x, TF.relu(y))


def test_softmax_implicit_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = F.softmax(tracec.randn(2, 3))
    close(y.sum(1), np.ones(2, np.float32), atol=1e-6)


def test_one_hot_and_flatten():
    idx = tracec.tensor([[0, 2], [1, 3]])
    close(F.one_hot(idx, 4), TF.one_hot(torch.tensor([[0, 2], [1, 3]]), 4))
    assert F.flatten(tracec.zeros(2, 3, 4), 1).shape == (2, 12)


# --- dropout --------------------------------------------------------------------------------

def test_dropout_statistics_and_scaling():
    tracec.manual_seed(0)
    x = tracec.ones(200, 500, requires_grad=True)
    y = F.dropout(x, p=0.3)
    a = y.detach().numpy()
    frac_zero = (a == 0).mean()
    assert abs(frac_zero - 0.3) < 0.01
    np.testing.assert_allclose(a[a != 0], 1 / 0.7, rtol=1e-6)
    assert abs(a.mean() - 1.0) < 0.02
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), a)  # gradient is the scaled mask


def test_dropout_reproducible_and_advances_rng():
    tracec.manual_seed(5)
    a = F.dropout(tracec.ones(1000)).numpy()
    b = F.dropout(tracec.ones(1000)).numpy()
    tracec.manual_seed(5)
    a2 = F.dropout(tracec.ones(1000)).numpy()
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, b)


def test_dropout_eval_and_edge_p():
    x = tracec.randn(4, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


def test_dropout2d_zeroes_whole_channels():
    tracec.manual_seed(1)
    y = F.dropout2d(tracec.ones(8, 16, 3, 3), p=0.5).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.2 < (per_channel == 0).all(-1).mean() < 0.8


# --- normalization --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,ns", [((4, 6), (6,)), ((2, 3, 4, 5), (4, 5)), ((3, 5), 5)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, ns, affine):
    rng = np.random.default_rng(14)
    nst = (ns,) if isinstance(ns, int) else ns
    arrays = [rnd(rng, *shape)] + ([rnd(rng, *nst), rnd(rng, *nst)] if affine else [])
    compare_fn(lambda x, *wb: F.layer_norm(x, ns, *wb, eps=1e-5),
               lambda x, *wb: TF.layer_norm(x, nst, *wb, eps=1e-5), arrays)


def test_layer_norm_bad_shape():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(tracec.randn(2, 3), (4,))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_functional(shape, training):
    rng = np.random.default_rng(15)
    x, w, b = rnd(rng, *shape), rnd(rng, 3), rnd(rng, 3)
    rm, rv = rnd(rng, 3), np.abs(rnd(rng, 3)) + 0.5
    (rm1, rm2), (rv1, rv2) = pair(rm, False), pair(rv, False)
    compare_fn(lambda *a: F.batch_norm(a[0], rm1, rv1, a[1], a[2], training, 0.2, 1e-3),
               lambda *a: TF.batch_norm(a[0], rm2, rv2, a[1], a[2], training, 0.2, 1e-3),
               [x, w, b])
    close(rm1, rm2, **tol(np.float64))
    close(rv1, rv2, **tol(np.float64))


def test_batch_norm_one_value_per_channel():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(tracec.randn(1, 3), None, None, training=True)


def test_group_norm():
    rng = np.random.default_rng(16)
    compare_fn(lambda x, w, b: F.group_norm(x, 2, w, b),
               lambda x, w, b: TF.group_norm(x, 2, w, b),
               [rnd(rng, 3, 4, 5, 2), rnd(rng, 4), rnd(rng, 4)])


# --- embedding ------------------------------------------------------------------------------

@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding(padding_idx):
    rng = np.random.default_rng(17)
    idx = np.array([[0, 2, 4], [2, 1, 2]], np.int64)
    w = rnd(rng, 5, 3)
    compare_fn(lambda i, w: F.embedding(i, w, padding_idx=padding_idx),
               lambda i, w: TF.embedding(i, w, padding_idx=padding_idx), [idx, w])


def test_embedding_rejects_float_indices():
    with pytest.raises(RuntimeError, match="indices"):
        F.embedding(tracec.randn(3), tracec.randn(5, 2))


# --- padding -----------------------------------------------------------------------------------

@pytest.mark.parametrize("pad,mode,value", [
    ((1, 2), "constant", 0.0), ((1, 2, 0, 3), "constant", 1.5), ((-1, 2, 1, -1), "constant", 0.0),
    ((2, 1, 1, 2), "reflect", None), ((2, 1, 1, 2), "replicate", None),
    ((2, 1, 1, 2), "circular", None), ((0, 3, 2, 0), "reflect", None)])
def test_pad(pad, mode, value):
    rng = np.random.default_rng(18)
    kw = dict(mode=mode) if value is None else dict(mode=mode, value=value)
    compare_fn(lambda x: F.pad(x, pad, **kw), lambda x: TF.pad(x, pad, **kw),
               [rnd(rng, 2, 3, 4, 5)])


# --- attention ----------------------------------------------------------------------------------

@pytest.mark.parametrize("causal,mask", [(False, None), (True, None), (False, "bool"),
                                         (False, "float")])
def test_scaled_dot_product_attention(causal, mask):
    rng = np.random.default_rng(19)
    q, k, v = rnd(rng, 2, 3, 4, 8), rnd(rng, 2, 3, 6, 8), rnd(rng, 2, 3, 6, 5)
    if causal:
        q = rnd(rng, 2, 3, 6, 8)
    m1 = m2 = None
    if mask == "bool":
        m = rng.random((4, 6)) > 0.3
        m[:, 0] = True
        m1, m2 = tracec.tensor(m), torch.tensor(m)
    elif mask == "float":
        m = rnd(rng, 4, 6)
        m1, m2 = tracec.tensor(m), torch.tensor(m)
    compare_fn(lambda *a: F.scaled_dot_product_attention(*a, attn_mask=m1, is_causal=causal),
               lambda *a: TF.scaled_dot_product_attention(*a, attn_mask=m2, is_causal=causal),
               [q, k, v])


# --- losses ---------------------------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_losses(name, reduction):
    rng = np.random.default_rng(20)
    compare_fn(lambda x, t: getattr(F, name)(x, t, reduction=reduction),
               lambda x, t: getattr(TF, name)(x, t, reduction=reduction),
               [rnd(rng, 4, 5), rnd(rng, 4, 5)])


def test_mse_loss_weight_and_legacy_flags():
    rng = np.random.default_rng(21)
    compare_fn(lambda x, t, w: F.mse_loss(x, t, weight=w),
               lambda x, t, w: TF.mse_loss(x, t, weight=w),
               [rnd(rng, 3, 4), rnd(rng, 3, 4), np.abs(rnd(rng, 3, 4))])
    x, t = tracec.randn(3, 4), tracec.randn(3, 4)
    close(F.mse_loss(x, t, size_average=False), F.mse_loss(x, t, reduction="sum"))
    with pytest.raises(ValueError, match="not a valid value"):
        F.mse_loss(x, t, reduction="avg")


def test_mse_loss_broadcast_warns():
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(tracec.randn(3, 4), tracec.randn(4))


CE_CASES = [
    # input shape, weight?, ignore_index, label_smoothing
    ((5, 4), False, -100, 0.0),
    ((5, 4), True, -100, 0.0),
    ((5, 4), False, 2, 0.0),
    ((5, 4), True, 1, 0.0),
    ((5, 4), False, -100, 0.1),
    ((5, 4), True, 3, 0.2),
    ((2, 4, 3), False, -100, 0.0),
    ((2, 4, 3, 2), True, 0, 0.15),
    ((4,), False, -100, 0.0),
    ((4,), True, -100, 0.3),
]


@pytest.mark.parametrize("shape,weighted,ignore,ls", CE_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_class_indices(shape, weighted, ignore, ls, reduction):
    rng = np.random.default_rng(22)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = rng.integers(0, c, tshape).astype(np.int64)
    if ignore >= 0 and target.size > 1:
        target.flat[0] = ignore  # make sure an ignored entry is present
    w1 = w2 = None
    if weighted:
        w = rng.random(c) + 0.5
        w1, w2 = tracec.tensor(w), torch.tensor(w)
    kw = dict(ignore_index=ignore, label_smoothing=ls, reduction=reduction)
    compare_fn(lambda x, t: F.cross_entropy(x, t, weight=w1, **kw),
               lambda x, t: TF.cross_entropy(x, t, weight=w2, **kw),
               [rnd(rng, *shape), target])


@pytest.mark.parametrize("shape", [(5, 4), (2, 4, 3), (4,)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ls", [0.0, 0.2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probabilities(shape, weighted, ls, reduction):
    rng = np.random.default_rng(23)
    c = shape[0] if len(shape) == 1 else shape[1]
    p = rng.random(shape)
    p = p / p.sum(axis=0 if len(shape) == 1 else 1, keepdims=True)
    w1 = w2 = None
    if weighted:
        w = rng.random(c) + 0.5
        w1, w2 = tracec.tensor(w), torch.tensor(w)
    kw = dict(label_smoothing=ls, reduction=reduction)
    compare_fn(lambda x, t: F.cross_entropy(x, t, weight=w1, **kw),
               lambda x, t: TF.cross_entropy(x, t, weight=w2, **kw),
               [rnd(rng, *shape), p])


def test_cross_entropy_float32_and_all_ignored():
    rng = np.random.default_rng(24)
    t = rng.integers(0, 10, 16).astype(np.int64)
    compare_fn(F.cross_entropy, TF.cross_entropy, [rnd(rng, 16, 10, dtype=np.float32), t])
    x = tracec.randn(3, 4)
    out = F.cross_entropy(x, tracec.tensor([-100, -100, -100]))
    assert math.isnan(out.item())


def test_cross_entropy_errors():
    x = tracec.randn(3, 4)
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, tracec.tensor([0, 1]))
    with pytest.raises(IndexError):
        F.cross_entropy(x, tracec.tensor([0, 1, 7]))
    with pytest.raises(RuntimeError, match="Long"):
        F.cross_entropy(x, tracec.randn(3))


@pytest.mark.parametrize("shape,weighted,ignore", [((5, 4), False, -100), ((5, 4), True, 1),
                                                   ((2, 4, 3), True, -100), ((4,), False, -100)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(shape, weighted, ignore, reduction):
    rng = np.random.default_rng(25)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = rng.integers(0, c, tshape).astype(np.int64)
    w1 = w2 = None
    if weighted:
        w = rng.random(c) + 0.5
        w1, w2 = tracec.tensor(w), torch.tensor(w)
    kw = dict(ignore_index=ignore, reduction=reduction)
    compare_fn(lambda x, t: F.nll_loss(F.log_softmax(x, 0 if x.ndim == 1 else 1), t,
                                       weight=w1, **kw),
               lambda x, t: TF.nll_loss(TF.log_softmax(x, 0 if x.ndim == 1 else 1), t,
                                        weight=w2, **kw),
               [rnd(rng, *shape), target])


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(weighted, reduction):
    rng = np.random.default_rng(26)
    p = rng.random((4, 3)) * 0.98 + 0.01
    t = (rng.random((4, 3)) > 0.5).astype(np.float64)
    t[0, 0] = 0.3  # soft target
    arrays = [p, t] + ([rng.random((4, 3))] if weighted else [])
    compare_fn(lambda x, t, *w: F.binary_cross_entropy(x, t, *w, reduction=reduction),
               lambda x, t, *w: TF.binary_cross_entropy(x, t, *w, reduction=reduction), arrays,
               nograd=(2,))


def test_binary_cross_entropy_clamps_log():
    x = tracec.tensor([0.0, 1.0, 0.5], requires_grad=True)
    t = tracec.tensor([1.0, 0.0, 1.0])
    out = F.binary_cross_entropy(x, t, reduction="none")
    close(out, np.array([100.0, 100.0, math.log(2)], np.float32), rtol=1e-6)
    out.sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))


@pytest.mark.parametrize("weighted,pos", [(False, False), (True, False), (False, True),
                                          (True, True)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits(weighted, pos, reduction):
    rng = np.random.default_rng(27)
    x = rnd(rng, 4, 3, scale=5)
    x[0, 0] = 0.0
    x[1, 1] = 60.0
    t = (rng.random((4, 3)) > 0.5).astype(np.float64)
    w1 = w2 = pw1 = pw2 = None
    if weighted:
        w = rng.random((4, 3))
        w1, w2 = tracec.tensor(w), torch.tensor(w)
    if pos:
        pw = rng.random(3) * 3
        pw1, pw2 = tracec.tensor(pw), torch.tensor(pw)
    compare_fn(lambda x, t: F.binary_cross_entropy_with_logits(x, t, w1, pos_weight=pw1,
                                                               reduction=reduction),
               lambda x, t: TF.binary_cross_entropy_with_logits(x, t, w2, pos_weight=pw2,
                                                                reduction=reduction),
               [x, t])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    rng = np.random.default_rng(28)
    x = np.log(rng.dirichlet(np.ones(5), 4))
    t = rng.dirichlet(np.ones(5), 4)
    t[0, 0] = 0.0
    if log_target:
        t = np.log(t + 0.1)
    compare_fn(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
               lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
               [x, t], nograd=() if log_target else (1,))


INPLACE = [(lambda x, ip: F.relu(x, inplace=ip), lambda x: TF.relu(x)),
           (lambda x, ip: F.silu(x, inplace=ip), lambda x: TF.silu(x)),
           (lambda x, ip: F.elu(x, inplace=ip), lambda x: TF.elu(x)),
           (lambda x, ip: F.leaky_relu(x, 0.1, ip), lambda x: TF.leaky_relu(x, 0.1)),
           (lambda x, ip: F.hardtanh(x, inplace=ip), lambda x: TF.hardtanh(x)),
           (lambda x, ip: F.mish(x, inplace=ip), lambda x: TF.mish(x))]


@pytest.mark.parametrize("i", range(len(INPLACE)))
def test_inplace_activation_backward(i):
    """In place on a non-leaf: same object returned, same gradient as torch."""
    f, g = INPLACE[i]
    a1, a2 = pair(rnd(np.random.default_rng(i), 3, 4, scale=2))
    h1 = a1 * 1.0
    out = f(h1, True)
    assert out is h1
    (out * out).sum().backward()
    (g(a2 * 1.0) ** 2).sum().backward()
    close(a1.grad, a2.grad, **tol(np.float64))


def test_max_pool2d_ties_route_gradient_like_torch():
    """Tied maxima (zeros after a ReLU, repeated pixel values): the whole
    gradient goes to the first maximum of each window, as in PyTorch."""
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 0.0]]]])
    compare_fn(lambda t: F.max_pool2d(t, 2, stride=1), lambda t: TF.max_pool2d(t, 2, stride=1),
               [x])
    compare_fn(lambda t: F.max_pool2d(t, 3, stride=2, padding=1),
               lambda t: TF.max_pool2d(t, 3, stride=2, padding=1), [np.zeros((1, 2, 5, 5))])


def test_bilinear():
    rng = np.random.default_rng(29)
    compare_fn(F.bilinear, TF.bilinear,
               [rnd(rng, 4, 3), rnd(rng, 4, 5), rnd(rng, 2, 3, 5), rnd(rng, 2)])
