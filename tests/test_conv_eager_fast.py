"""The eager convolutions' native paths against PyTorch: values, input and
weight (and bias) gradients, and that each path is taken.

- depthwise convolution (one input and one output channel per group, 1-d
  and 2-d) by the backend's ``depthwise_kernels`` (``_conv_depthwise_eager.
  native_forward`` / ``native_backward``)
"""
import os

import numpy as np
import pytest

import tracec
from tracec.nn import _conv_depthwise_eager as _dw

torch = pytest.importorskip("torch")


@pytest.fixture
def native(monkeypatch):
    """The native kernels from the first call (no warm-up), counted."""
    monkeypatch.setattr(_dw.NATIVE, "warmup", 0)
    monkeypatch.delenv("TRACEC_EAGER_KERNELS", raising=False)
    calls = {"forward": 0, "backward": 0}
    for name in calls:
        real = getattr(_dw, f"native_{name}")

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(_dw, f"native_{name}", counted)
    kernels = _dw.native_kernels(np.zeros((1, 1, 4), np.float32),
                                 np.zeros((1, 1, 3), np.float32))
    if kernels is None:
        pytest.skip("no native depthwise kernels here (no LLVM)")
    return calls


CASES = [  # input shape, kernel, conv keyword arguments
    ((2, 3, 9, 11), (3, 3), {"padding": 1}),
    ((3, 5, 10, 7), (3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
    ((2, 4, 16, 16), (3, 3), {"stride": 2, "padding": 1}),
    ((2, 4, 8, 9), (2, 2), {"padding": "same"}),            # asymmetric padding
    ((1, 6, 7, 7), (5, 5), {"padding": 2, "dilation": 1}),
    ((2, 3, 6, 5), (3, 3), {}),                               # no padding
    ((2, 4, 20), (5,), {"padding": 2}),
    ((3, 8, 33), (3,), {"stride": 2, "padding": 1, "dilation": 2}),
    ((2, 4, 17), (4,), {"padding": "same", "dilation": 3}),
]


def _run(lib, xs, k, kw, dtype, bias, channels_last, seed):
    rng = np.random.default_rng(seed)
    c = xs[1]
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((c, 1) + k).astype(dtype)
    b = rng.standard_normal(c).astype(dtype)
    xt = lib.tensor(x)
    if channels_last:
        xt = xt.to(memory_format=lib.channels_last)
    xt.requires_grad_()
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True) if bias else None
    fn = lib.nn.functional.conv1d if len(k) == 1 else lib.nn.functional.conv2d
    y = fn(xt, wt, bt, groups=c, **kw)
    g = rng.standard_normal(tuple(y.shape)).astype(dtype)
    # a non-contiguous output gradient (the transpose of a contiguous one)
    gt = lib.tensor(np.ascontiguousarray(np.swapaxes(g, 0, 1))).transpose(0, 1)
    y.backward(gt)
    return y, [xt.grad, wt.grad] + ([bt.grad] if bias else [])


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_native_depthwise_matches_pytorch(native, case, dtype, bias):
    xs, k, kw = CASES[case]
    got, ggot = _run(tracec, xs, k, kw, dtype, bias, False, case)
    want, gwant = _run(torch, xs, k, kw, dtype, bias, False, case)
    assert native == {"forward": 1, "backward": 1}
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
    for a, b in zip(ggot, gwant):
        assert a.dtype == got.dtype
        np.testing.assert_allclose(a.numpy(), b.numpy(), **tol)


def test_native_depthwise_channels_last_input(native):
    xs, k, kw = (2, 6, 9, 8), (3, 3), {"padding": 1, "stride": 2}
    got, ggot = _run(tracec, xs, k, kw, np.float32, True, True, 7)
    want, gwant = _run(torch, xs, k, kw, np.float32, True, True, 7)
    assert native["forward"] == 1
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    for a, b in zip(ggot, gwant):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_native_depthwise_module_with_reflect_padding(native):
    # Conv2d(padding_mode='reflect') pads first, then a valid convolution
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 10, 10)).astype(np.float32)
    outs = []
    for lib in (tracec, torch):
        lib.manual_seed(0)
        m = lib.nn.Conv2d(4, 4, 3, padding=1, groups=4, padding_mode="reflect")
        with lib.no_grad():
            m.weight.copy_(lib.tensor(np.linspace(-1, 1, 36, dtype=np.float32)
                                      .reshape(4, 1, 3, 3)))
            m.bias.zero_()
        xt = lib.tensor(x, requires_grad=True)
        y = m(xt)
        (y * y).sum().backward()
        outs.append([y.detach().numpy(), xt.grad.numpy(), m.weight.grad.numpy()])
    assert native["forward"] == 1
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def test_native_depthwise_weight_grad_reads_the_input_at_backward(native):
    # PyTorch's weight gradient reads the saved input as it is at backward
    # time: a write through ``.data`` after the convolution changes it
    grads = []
    for lib in (tracec, torch):
        x = lib.tensor(np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6) / 50)
        w = lib.tensor(np.ones((3, 1, 3, 3), np.float32), requires_grad=True)
        y = lib.nn.functional.conv2d(x, w, padding=1, groups=3)
        x.data[:, :, :2] = 0.0
        y.sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_native_depthwise_path_is_taken_and_can_be_turned_off(native, monkeypatch):
    x = tracec.randn(2, 4, 9, 9, requires_grad=True)
    w = tracec.randn(4, 1, 3, 3, requires_grad=True)
    y = tracec.nn.functional.conv2d(x, w, padding=1, groups=4)
    ctx = getattr(y.grad_fn, "ctx", y.grad_fn)
    assert ctx.native is not None
    y.sum().backward()
    assert native == {"forward": 1, "backward": 1}
    monkeypatch.setenv("TRACEC_EAGER_KERNELS", "0")
    y = tracec.nn.functional.conv2d(x, w, padding=1, groups=4)
    assert getattr(y.grad_fn, "ctx", y.grad_fn).native is None
    assert native["forward"] == 1


def test_native_depthwise_not_for_other_convolutions(native):
    # a channel multiplier (two outputs per group), a 3-d, a dense and a
    # float16 convolution keep their paths
    for xs, ws, groups, dtype in [((2, 4, 8, 8), (8, 1, 3, 3), 4, tracec.float32),
                                  ((1, 2, 4, 5, 6), (2, 1, 3, 3, 3), 2, tracec.float32),
                                  ((2, 4, 8, 8), (4, 4, 3, 3), 1, tracec.float32),
                                  ((2, 4, 8, 8), (4, 1, 3, 3), 4, tracec.float16)]:
        x = tracec.randn(*xs, dtype=dtype)
        w = tracec.randn(*ws, dtype=dtype)
        tracec.nn.functional.conv2d(x, w, padding=1, groups=groups) if len(xs) == 4 else \
            tracec.nn.functional.conv3d(x, w, padding=1, groups=groups)
    assert native["forward"] == 0


# --- batch norm's native forward and backward -----------------------------------------

@pytest.fixture
def bn_native(monkeypatch):
    from tracec.nn import _batch_norm_eager as bn
    monkeypatch.setattr(bn.NATIVE, "warmup", 0)
    monkeypatch.setattr(bn, "NATIVE_BATCH_NORM", True)
    monkeypatch.delenv("TRACEC_EAGER_KERNELS", raising=False)
    calls = [0]
    real = bn._native_backward

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(bn, "_native_backward", counted)
    if bn._native(np.zeros((2, 2, bn.NATIVE_MIN), np.float32)) is None:
        pytest.skip("no native batch-norm kernels here (no LLVM)")
    return calls


@pytest.mark.parametrize("xs", [(8, 6, 32, 32), (16, 5, 1100), (4, 3, 6, 30, 40)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_native_batch_norm_backward_matches_pytorch(bn_native, xs, dtype, affine):
    rng = np.random.default_rng(len(xs))
    x = (rng.standard_normal(xs) * 3 + 1.5).astype(dtype)
    g = rng.standard_normal(xs).astype(dtype)
    res = []
    for lib in (tracec, torch):
        cls = {3: lib.nn.BatchNorm1d, 4: lib.nn.BatchNorm2d, 5: lib.nn.BatchNorm3d}[len(xs)]
        m = cls(xs[1], affine=affine).to(getattr(lib, np.dtype(dtype).name))
        if affine:
            with lib.no_grad():
                m.weight.copy_(lib.tensor(np.linspace(0.5, 2, xs[1]).astype(dtype)))
                m.bias.copy_(lib.tensor(np.linspace(-1, 1, xs[1]).astype(dtype)))
        xt = lib.tensor(x, requires_grad=True)
        y = m(xt)
        # a non-contiguous output gradient
        y.backward(lib.tensor(np.ascontiguousarray(np.swapaxes(g, 0, 1))).transpose(0, 1))
        res.append([y.detach().numpy(), xt.grad.numpy(), m.running_mean.numpy(),
                    m.running_var.numpy()]
                   + ([m.weight.grad.numpy(), m.bias.grad.numpy()] if affine else []))
    assert bn_native[0] == 1
    for i, (a, b) in enumerate(zip(*res)):
        # (the weight's and bias's gradients: sums over 8K-30K elements)
        t = (1e-5 if i < 4 else 1e-4) if dtype == np.float32 else 1e-10
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=t, atol=t)


@pytest.mark.skipif(os.environ.get("TRACEC_NATIVE_BATCH_NORM") == "1",
                    reason="batch norm's native kernels turned on")
def test_native_batch_norm_is_off_by_default(monkeypatch):
    # (eager batch norm keeps the composite's bits unless asked: see
    # _batch_norm_eager.NATIVE_BATCH_NORM)
    from tracec.nn import _batch_norm_eager as bn
    monkeypatch.setattr(bn.NATIVE, "warmup", 0)
    assert not bn.NATIVE_BATCH_NORM
    assert bn._native(np.zeros((8, 4, 1024), np.float32)) is None


def test_native_batch_norm_backward_only_for_large_inputs(bn_native, monkeypatch):
    from tracec.nn import _batch_norm_eager as bn
    m = tracec.nn.BatchNorm2d(4)
    m(tracec.randn(2, 4, 5, 5, requires_grad=True)).sum().backward()    # below NATIVE_MIN
    assert bn_native[0] == 0
    m(tracec.randn(8, 4, 32, 32, requires_grad=True)).sum().backward()
    assert bn_native[0] == 1
    monkeypatch.setenv("TRACEC_EAGER_KERNELS", "0")
    m(tracec.randn(8, 4, 32, 32, requires_grad=True)).sum().backward()
    assert bn_native[0] == 1
    assert bn.NATIVE_MIN > 2 * 4 * 5 * 5


# --- group norm by the batch-norm kernels ------------------------------------------------

def _count_group_norm(monkeypatch) -> list:
    """``[n]``: the calls of ``GroupNormEager.forward`` from now on."""
    from tracec.nn import _batch_norm_eager as bn
    calls = [0]
    real = bn.GroupNormEager.forward

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(bn.GroupNormEager, "forward", staticmethod(counted))
    return calls


@pytest.mark.parametrize("xs,groups", [((16, 64, 64), 4), ((4, 6, 30, 40), 3), ((3, 8, 700), 8),
                                       ((2, 12, 5, 6, 70), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_native_group_norm_matches_pytorch(bn_native, monkeypatch, xs, groups, dtype, affine):
    calls = _count_group_norm(monkeypatch)
    rng = np.random.default_rng(len(xs) + groups)
    x = (rng.standard_normal(xs) * 3 + 1.5).astype(dtype)
    g = rng.standard_normal(xs).astype(dtype)
    res = []
    for lib in (tracec, torch):
        m = lib.nn.GroupNorm(groups, xs[1], affine=affine).to(getattr(lib, np.dtype(dtype).name))
        if affine:
            with lib.no_grad():
                m.weight.copy_(lib.tensor(np.linspace(0.5, 2, xs[1]).astype(dtype)))
                m.bias.copy_(lib.tensor(np.linspace(-1, 1, xs[1]).astype(dtype)))
        xt = lib.tensor(x, requires_grad=True)
        y = m(xt)
        y.backward(lib.tensor(np.ascontiguousarray(np.swapaxes(g, 0, 1))).transpose(0, 1))
        res.append([y.detach().numpy(), xt.grad.numpy()]
                   + ([m.weight.grad.numpy(), m.bias.grad.numpy()] if affine else []))
    assert calls[0] == 1
    for i, (a, b) in enumerate(zip(*res)):
        t = (1e-5 if i < 2 else 1e-4) if dtype == np.float32 else 1e-10
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=t, atol=t)


def test_native_group_norm_double_backward_matches_pytorch(bn_native):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 8, 1024)).astype(np.float64)
    res = []
    for lib in (tracec, torch):
        xt = lib.tensor(x, requires_grad=True)
        w = lib.tensor(np.linspace(0.5, 2, 8), requires_grad=True)
        y = lib.nn.functional.group_norm(xt, 2, w, None)
        (gx,) = lib.autograd.grad((y * y * y).sum(), xt, create_graph=True)
        gx.sum().backward()
        res.append([gx.detach().numpy(), xt.grad.numpy(), w.grad.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_native_group_norm_only_for_large_inputs(bn_native, monkeypatch):
    calls = _count_group_norm(monkeypatch)
    tracec.nn.functional.group_norm(tracec.randn(2, 4, 5, requires_grad=True), 2)
    assert calls[0] == 0
    y = tracec.nn.functional.group_norm(tracec.randn(16, 64, 64, requires_grad=True), 4)
    assert calls[0] == 1 and type(y.grad_fn).__name__ == "NativeGroupNormBackward0"
    monkeypatch.setenv("TRACEC_EAGER_KERNELS", "0")
    tracec.nn.functional.group_norm(tracec.randn(16, 64, 64, requires_grad=True), 4)
    assert calls[0] == 1


def test_native_depthwise_double_backward_matches_pytorch(native):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 9, 9))
    w = rng.standard_normal((4, 1, 3, 3))
    res = []
    for lib in (tracec, torch):
        xt = lib.tensor(x, requires_grad=True)
        wt = lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(xt, wt, padding=1, stride=2, groups=4)
        (gx,) = lib.autograd.grad((y * y).sum(), xt, create_graph=True)
        gx.pow(2).sum().backward()
        res.append([gx.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()])
    assert native["forward"] == 1
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
