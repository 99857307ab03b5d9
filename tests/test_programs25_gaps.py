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


# --- torch.ao.quantization's observers and FakeQuantize ---------------------

XS = [R.randn(4, 3, 2).astype(np.float32) * (i + 1) + 0.3 for i in range(3)]


def _observe(lib, make, steps=XS):
    """An observer / fake-quantizer fed ``steps``: its qparams after each,
    the fake-quantized values and input gradients, its state dict."""
    warnings_off = __import__("warnings").catch_warnings()
    with warnings_off:
        __import__("warnings").simplefilter("ignore")
        m = make(lib)
        rows = []
        for a in steps:
            x = lib.tensor(a, requires_grad=True)
            y = m(x)
            if y.requires_grad:
                (y * lib.arange(24.).view(4, 3, 2)).sum().backward()
            scale, zp = m.calculate_qparams()
            rows.append((scale.tolist(), zp.tolist(), str(zp.dtype).split(".")[-1], y.detach().numpy(),
                         None if x.grad is None else x.grad.numpy()))
        state = {k: v.tolist() for k, v in m.state_dict().items()}
    return rows, state


OBSERVERS = {
    "minmax": lambda L: L.ao.quantization.MinMaxObserver(),
    "minmax-sym-qint8": lambda L: L.ao.quantization.MinMaxObserver(dtype=L.qint8,
                                                                  qscheme=L.per_tensor_symmetric),
    "minmax-sym-quint8-range": lambda L: L.ao.quantization.MinMaxObserver(
        dtype=L.quint8, qscheme=L.per_tensor_symmetric, quant_min=0, quant_max=15),
    "moving": lambda L: L.ao.quantization.MovingAverageMinMaxObserver(averaging_constant=0.3),
    "moving-reduce": lambda L: L.ao.quantization.MovingAverageMinMaxObserver(reduce_range=True),
    "per-channel-axis1": lambda L: L.ao.quantization.PerChannelMinMaxObserver(
        ch_axis=1, dtype=L.qint8, qscheme=L.per_channel_symmetric),
    "per-channel-affine": lambda L: L.ao.quantization.PerChannelMinMaxObserver(ch_axis=2),
    "moving-per-channel": lambda L: L.ao.quantization.MovingAveragePerChannelMinMaxObserver(
        averaging_constant=0.5, ch_axis=0),
    "default_fake_quant": lambda L: L.ao.quantization.default_fake_quant(),
    "default_weight_fake_quant": lambda L: L.ao.quantization.default_weight_fake_quant(),
    "default_per_channel_weight_fake_quant":
        lambda L: L.ao.quantization.default_per_channel_weight_fake_quant(),
    "fake_quant-custom": lambda L: L.ao.quantization.FakeQuantize(
        observer=L.ao.quantization.MovingAverageMinMaxObserver.with_args(averaging_constant=0.5),
        quant_min=-8, quant_max=7, dtype=L.qint8),
}


@pytest.mark.parametrize("name", list(OBSERVERS))
def test_observer_matches_torch(name):
    (rows_t, state_t), (rows_c, state_c) = (_observe(lib, OBSERVERS[name]) for lib in (torch, tracec))
    assert state_c == state_t
    for (st, zt, dt_t, yt, gt), (sc, zc, dt_c, yc, gc) in zip(rows_t, rows_c):
        assert (sc, zc, dt_c) == (st, zt, dt_t)
        assert np.array_equal(yc, yt)
        assert (gc is None) == (gt is None) and (gt is None or np.array_equal(gc, gt))


def test_fake_quantize_switches_and_state_dict():
    """disable_observer freezes the qparams, disable_fake_quant passes the
    input through, and a per-channel FakeQuantize's state loads into a fresh
    one (its empty min/max and one-element scale take the saved shapes)."""
    out = []
    for L in (torch, tracec):
        fq = L.ao.quantization.default_per_channel_weight_fake_quant()
        fq(L.tensor(XS[0]))
        fq.apply(L.ao.quantization.disable_observer)
        y = fq(L.tensor(XS[1]))
        fresh = L.ao.quantization.default_per_channel_weight_fake_quant()
        fresh.load_state_dict(fq.state_dict())
        fresh.apply(L.ao.quantization.disable_fake_quant)
        out.append((fq.scale.tolist(), y.numpy(), fresh.scale.tolist(), fresh.zero_point.tolist(),
                    fresh.activation_post_process.min_val.tolist(),
                    L.equal(fresh(L.tensor(XS[2])), L.tensor(XS[2])),
                    fresh.fake_quant_enabled.tolist(), fresh.observer_enabled.tolist()))
    (a, ya, *ra), (b, yb, *rb) = out
    assert a == b and np.array_equal(ya, yb) and ra == rb


@pytest.mark.parametrize("call", [
    lambda L: L.ao.quantization.MinMaxObserver(qscheme=L.per_channel_affine),
    lambda L: L.ao.quantization.PerChannelMinMaxObserver(qscheme=L.per_tensor_affine),
    lambda L: L.ao.quantization.MinMaxObserver(quant_min=1, quant_max=5),
    lambda L: L.ao.quantization.MinMaxObserver(dtype=L.quint8, qscheme=L.per_tensor_symmetric,
                                              reduce_range=True),
    lambda L: L.ao.quantization.FakeQuantize(quant_min=5, quant_max=2),
    lambda L: L.ao.quantization.FakeQuantize(quant_min=-5, quant_max=2),
    lambda L: L.ao.quantization.MovingAverageMinMaxObserver(qscheme=L.per_channel_affine),
    lambda L: L.ao.quantization.MovingAveragePerChannelMinMaxObserver(qscheme=L.per_tensor_affine),
], ids=["per-channel-scheme", "per-tensor-scheme", "range-without-0", "sym-quint8-reduce",
        "min-over-max", "min-out-of-bound", "moving-scheme", "moving-per-channel-scheme"])
def test_observer_errors_match_torch(call):
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        # (a qscheme's repr names the library: tracec.per_channel_affine)
        kind, msg = _error(tracec, call)
        assert (kind, msg.replace("tracec.", "torch.")) == _error(torch, call)


# --- fuse_modules / fuse_modules_qat ----------------------------------------

def _fusable(L):
    nn = L.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.relu = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()
            self.conv2, self.relu2 = nn.Conv1d(4, 4, 1), nn.ReLU()
            self.fc, self.bn1 = nn.Linear(4, 3), nn.BatchNorm1d(3)
            self.seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

        def forward(self, x):
            x = self.relu(self.bn(self.conv(x))).mean(3)
            x = self.relu2(self.conv2(x)).mean(2)
            return self.seq(self.bn1(self.fc(x)))
    L.manual_seed(0)
    return M()


FUSE_X = R.randn(2, 3, 6, 6).astype(np.float32)


@pytest.mark.parametrize("qat", [False, True])
def test_fuse_modules_matches_torch(qat):
    groups = [["conv", "bn", "relu"], ["conv2", "relu2"], ["fc", "bn1"], ["seq.0", "seq.1"]]
    res = []
    for L in (torch, tracec):
        m = _fusable(L)
        x = L.tensor(FUSE_X)
        m(x), m(x * 2)          # running statistics for the eval fold
        if not qat:
            m.eval()
        ref = m(x).detach().numpy()
        fuse = L.ao.quantization.fuse_modules_qat if qat else L.ao.quantization.fuse_modules
        f = fuse(m, groups)
        res.append((ref, f(x).detach().numpy(), [type(c).__name__ for c in f.modules()],
                    list(f.state_dict()), [c.training for c in f.modules()]))
    (r1, o1, *k1), (r2, o2, *k2) = res
    np.testing.assert_allclose(r2, r1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o2, o1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o2, r2, rtol=1e-5, atol=1e-5)     # fusion keeps the function
    assert k1 == k2


@pytest.mark.parametrize("call", [
    lambda L: L.ao.quantization.fuse_modules(_fusable(L).eval(), ["conv", "relu2", "bn"]),
    lambda L: L.ao.quantization.fuse_modules((lambda m: (m.bn.eval(), m)[1])(_fusable(L)), ["conv", "bn"]),
    lambda L: L.ao.nn.intrinsic.ConvReLU2d(L.nn.Conv2d(1, 1, 1), L.nn.Tanh()),
    lambda L: L.ao.nn.intrinsic.ConvBnReLU2d(L.nn.Conv2d(1, 1, 1), L.nn.BatchNorm1d(1), L.nn.ReLU()),
], ids=["no-fuser", "mixed-modes", "wrong-types", "wrong-types-3"])
def test_fuse_errors_match_torch(call):
    kind, msg = _error(tracec, call)
    assert (kind, msg.replace("tracec", "torch")) == _error(torch, call)


def test_fuse_moves_hooks():
    """The pre-hook moves to the fused module and, as in PyTorch, stays on
    the folded conv (a deep copy of the original) too."""
    seen = []
    for L in (torch, tracec):
        m = _fusable(L).eval()
        m.conv.register_forward_pre_hook(lambda mod, i: seen.append(("pre", type(mod).__name__)))
        m.relu.register_forward_hook(lambda mod, i, o: seen.append(("post", type(mod).__name__)))
        L.ao.quantization.fuse_modules(m, ["conv", "bn", "relu"], inplace=True)
        m(L.tensor(FUSE_X))
    assert seen[:3] == seen[3:] == [("pre", "ConvReLU2d"), ("pre", "Conv2d"), ("post", "ConvReLU2d")]


def test_float_functional_matches_torch():
    """``nn.quantized.FloatFunctional`` (the older ``torch.nn.quantized``
    name too): its operations, and its forward's error."""
    res = []
    for L in (torch, tracec):
        ff = L.nn.quantized.FloatFunctional()
        a, b = L.tensor(W[0]), L.tensor(W[1])
        res.append([r.numpy() for r in (ff.add(a, b), ff.mul(a, b), ff.add_relu(a, b), ff.add_scalar(a, 2.0),
                                        ff.mul_scalar(a, 3.0), ff.cat([a, b], dim=1), ff.matmul(a, b.T))]
                   + [_error(L, lambda L: ff(a)), type(ff.activation_post_process).__name__,
                      L.ao.nn.quantized.FloatFunctional is type(ff)])
    for x, y in zip(*res):
        if isinstance(x, np.ndarray):      # (matmul: summation order, to the ulp)
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-7)
        else:
            assert x == y
