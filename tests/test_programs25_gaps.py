"""What programs25 found missing, against PyTorch 2.13:
``fake_quantize_per_tensor_affine`` (number and tensor qparams) and
``fake_quantize_per_channel_affine`` (int32 zero points added after
rounding, float ones before): values to the bit (half-to-even rounding of
``x * (1.0f / scale)``, float64 inputs with the float32 inverse scale), the
masked straight-through gradient, PyTorch's errors, and the compiled call
equal to the eager one."""
import numpy as np
import pytest
import torch

import tracec

R = np.random.RandomState(0)
# values on and around the rounding ties and the clamp edges
X = np.concatenate([np.array([0.05, 0.15, 0.25, -0.05, -0.15, 0.35, 0.45, 1.0, -1.0, 0.0],
                             np.float32), R.randn(14).astype(np.float32) * 0.4])
W = R.randn(3, 4, 2).astype(np.float32)
S = np.array([0.1, 0.2, 0.05, 0.3], np.float32)
Z = np.array([0, 1, -2, 3], np.int32)


def _both(fn, *arrays, dtype=np.float32):
    """fn's value and input gradient (weighted sum) under torch and tracec."""
    out = []
    for lib in (torch, tracec):
        x = lib.tensor(arrays[0].astype(dtype), requires_grad=True)
        y = fn(lib, x)
        wgt = lib.tensor(np.arange(y.numel(), dtype=dtype).reshape(tuple(y.shape)))
        (y * wgt).sum().backward()
        out.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("qparams", [(0.1, 0, -3, 3), (0.1, 2, 0, 5), (0.037, -1, -128, 127)])
def test_per_tensor_matches_torch(dtype, qparams):
    (a, ga, na), (b, gb, nb) = _both(lambda lib, x: lib.fake_quantize_per_tensor_affine(x, *qparams),
                                     X, dtype=dtype)
    assert a.dtype == b.dtype and np.array_equal(a, b) and np.array_equal(ga, gb)
    assert na == nb == "FakeQuantizePerTensorAffineCachemaskBackward0"


def test_per_tensor_tensor_qparams_matches_torch():
    def fn(lib, x):
        return lib.fake_quantize_per_tensor_affine(x, lib.tensor([0.1]), lib.tensor([1], dtype=lib.int32),
                                                   -3, 3)
    (a, ga, _), (b, gb, _) = _both(fn, X)
    assert np.array_equal(a, b) and np.array_equal(ga, gb)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("float_zp", [False, True])
def test_per_channel_matches_torch(dtype, float_zp):
    def fn(lib, w):
        z = lib.tensor(Z)
        z = z.float() + 0.5 if float_zp else z
        return lib.fake_quantize_per_channel_affine(w, lib.tensor(S), z, 1, -8, 7)
    (a, ga, na), (b, gb, nb) = _both(fn, W, dtype=dtype)
    assert np.array_equal(a, b) and np.array_equal(ga, gb)
    assert na == nb == "FakeQuantizePerChannelAffineCachemaskBackward0"


def _error(lib, f):
    with pytest.raises(Exception) as e:
        f(lib)
    return type(e.value).__name__, str(e.value).splitlines()[0]


@pytest.mark.parametrize("call", [
    lambda L: L.fake_quantize_per_tensor_affine(L.ones(3), 0.1, 0, 5, 3),
    lambda L: L.fake_quantize_per_tensor_affine(L.ones(3), 0.1, 10, 0, 3),
    lambda L: L.fake_quantize_per_tensor_affine(L.ones(3, dtype=L.int64), 0.1, 0, 0, 3),
    lambda L: L.fake_quantize_per_tensor_affine(L.ones(3), L.ones(2), L.zeros(2), 0, 3),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S), L.tensor(Z).long(), 1, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S).double(), L.tensor(Z), 1, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S)[None], L.tensor(Z), 1, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S), L.tensor(Z)[:2], 1, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S), L.tensor(Z), 0, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S), L.tensor(Z), 2, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S), L.tensor(Z), -1, -8, 7),
    lambda L: L.fake_quantize_per_channel_affine(L.ones(2, 4), L.tensor(S), L.tensor(Z) + 9, 1, -8, 7),
], ids=["range", "zp", "int-input", "2-elem-qparams", "long-zp", "double-scale", "2d-scale",
        "zp-size", "wrong-axis-size", "axis-out-of-range", "negative-axis", "zp-outside"])
def test_errors_match_torch(call):
    assert _error(tracec, call) == _error(torch, call)


def test_compiled_equals_eager():
    def step(w, x):
        q = tracec.fake_quantize_per_channel_affine(w, tracec.tensor(S), tracec.tensor(Z), 1, -8, 7)
        a = tracec.fake_quantize_per_tensor_affine(x, tracec.tensor([0.1]), tracec.tensor([0], dtype=tracec.int32),
                                                   -3, 3)
        loss = (q * q).sum() + (a * a.flip(0)).sum()
        loss.backward()
        return loss
    res = []
    for f in (step, tracec.compile(step)):
        w = tracec.tensor(W, requires_grad=True)
        x = tracec.tensor(X, requires_grad=True)
        loss = f(w, x)
        res.append((loss.item(), w.grad.numpy().copy(), x.grad.numpy().copy()))
    assert res[0][0] == res[1][0]
    assert np.array_equal(res[0][1], res[1][1]) and np.array_equal(res[0][2], res[1][2])
