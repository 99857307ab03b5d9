"""Eager activations as native kernels (tracec/fused_eager.py, eager_kernels.py).

Each activation large enough for the kernels is checked three ways: against
its NumPy path (the same composite, special values included: the kernels
must not change a value beyond float rounding), against PyTorch 2.13 on
ordinary values (outputs, input gradients, grad_fn names), and through a
double backward.  The rules of when the kernels run (size, warm-up, a
recorder, the switch, a failed build) are checked with a spying provider.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracec
from tracec import fused_eager

torch = pytest.importorskip("torch")

N = fused_eager.MIN_NUMEL + 37          # odd: the kernels' vector tails run

CASES = {
    "gelu": lambda L, x: L.nn.functional.gelu(x),
    "gelu_tanh": lambda L, x: L.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda L, x: L.nn.functional.silu(x),
    "sigmoid": lambda L, x: L.sigmoid(x),
    "erf": lambda L, x: L.erf(x),
    "relu": lambda L, x: L.relu(x),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.2),
    "elu": lambda L, x: L.nn.functional.elu(x, 0.7),
    "softplus": lambda L, x: L.nn.functional.softplus(x, 2.0, 5.0),
    "logsigmoid": lambda L, x: L.nn.functional.logsigmoid(x),
    "mish": lambda L, x: L.nn.functional.mish(x),
    "hardswish": lambda L, x: L.nn.functional.hardswish(x),
    "hardsigmoid": lambda L, x: L.nn.functional.hardsigmoid(x),
}
#: the dtypes each case is compiled for (float64 for a few: each pair of
#: kernels is two compiles on a fresh cache)
DTYPES = {name: ("float32",) for name in CASES}
DTYPES.update(gelu=("float32", "float64"), silu=("float32", "float64"),
              softplus=("float32", "float64"))


@pytest.fixture
def kernels_on(monkeypatch):
    monkeypatch.setattr(fused_eager, "WARMUP_NUMEL", 0)
    monkeypatch.delenv("TRACEC_EAGER_KERNELS", raising=False)


def _inputs(dtype, specials=True):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(N) * 4).astype(dtype)
    if specials:
        x[:10] = [0.0, -0.0, np.nan, np.inf, -np.inf, -3.0, 3.0, 20.0, -20.0, 1e-30]
    g = rng.standard_normal(N).astype(dtype)
    return x, g


def _run(fn, x, g, monkeypatch, on: bool):
    monkeypatch.setenv("TRACEC_EAGER_KERNELS", "1" if on else "0")
    t = tracec.from_numpy(x.copy()).requires_grad_()
    y = fn(tracec, t)
    y.backward(tracec.from_numpy(g))
    return y, t.grad.numpy()


CASE_DTYPES = [(n, d) for n in CASES for d in DTYPES[n]]


@pytest.mark.parametrize("name,dtype", CASE_DTYPES)
def test_kernels_equal_the_numpy_path(name, dtype, kernels_on, monkeypatch):
    fn = CASES[name]
    x, g = _inputs(dtype)
    calls = []
    real = fused_eager.PROVIDERS[0]
    monkeypatch.setattr(fused_eager, "PROVIDERS",
                        [lambda *a: calls.append(a[0]) or real(*a)])
    y, gx = _run(fn, x, g, monkeypatch, on=True)
    assert calls, "the kernels did not run"
    y0, gx0 = _run(fn, x, g, monkeypatch, on=False)
    assert type(y.grad_fn).__name__ == type(y0.grad_fn).__name__
    # (float32 atol: gelu_tanh's gradient below -4 cancels two terms of 1e-4:
    # NumPy's path gives -2.5e-6 where PyTorch and the kernel give 0, truth -5e-7)
    tol = dict(rtol=2e-6, atol=5e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(y.detach().numpy(), y0.detach().numpy(), equal_nan=True, **tol)
    np.testing.assert_allclose(gx, gx0, equal_nan=True, **tol)
    # the signs of zeros too (relu(-0.0) is -0.0, leaky_relu's x * slope)
    zeros = y0.detach().numpy() == 0
    assert (np.signbit(y.detach().numpy()[zeros]) == np.signbit(y0.detach().numpy()[zeros])).all()


@pytest.mark.parametrize("name,dtype", CASE_DTYPES)
def test_kernels_match_pytorch(name, dtype, kernels_on, monkeypatch):
    fn = CASES[name]
    x, g = _inputs(dtype, specials=False)
    y, gx = _run(fn, x, g, monkeypatch, on=True)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    ty = fn(torch, tx)
    ty.backward(torch.from_numpy(g))
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(gx, tx.grad.numpy(), **tol)


def test_double_backward_differentiates_the_primitives(kernels_on, monkeypatch):
    x, g = _inputs("float64", specials=False)
    results = []
    for on in (True, False):
        monkeypatch.setenv("TRACEC_EAGER_KERNELS", "1" if on else "0")
        t = tracec.from_numpy(x.copy()).requires_grad_()
        y = tracec.nn.functional.silu(t)
        (gx,) = tracec.autograd.grad(y, t, tracec.from_numpy(g), create_graph=True)
        (ggx,) = tracec.autograd.grad(gx.sum(), t)
        results.append((gx.detach().numpy(), ggx.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-13)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12, atol=1e-14)


def test_saved_input_modified_in_place_is_refused(kernels_on):
    t = tracec.from_numpy(_inputs("float32")[0]).requires_grad_()
    x = t * 1.0
    y = tracec.nn.functional.gelu(x)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_in_place_and_non_contiguous_calls(kernels_on):
    x, _ = _inputs("float32", specials=False)
    t = tracec.from_numpy(x.copy())
    tracec.nn.functional.leaky_relu(t, 0.1, inplace=True)
    np.testing.assert_allclose(t.numpy(), np.where(x > 0, x, x * np.float32(0.1)), rtol=1e-6)
    m = tracec.from_numpy(np.stack([x, -x], 1))      # a column: not C-contiguous
    y = tracec.nn.functional.relu(m[:, 1])
    np.testing.assert_array_equal(y.numpy(), np.maximum(-x, 0))


class _Spy:
    def __init__(self, real):
        self.real, self.keys = real, []

    def __call__(self, key, composite, dtype, ranks, examples):
        self.keys.append(key)
        return self.real(key, composite, dtype, ranks, examples)


@pytest.fixture
def spy(monkeypatch):
    s = _Spy(fused_eager.PROVIDERS[0])
    monkeypatch.setattr(fused_eager, "PROVIDERS", [s])
    monkeypatch.delenv("TRACEC_EAGER_KERNELS", raising=False)
    return s


def test_when_the_kernels_run(spy, monkeypatch):
    f = tracec.nn.functional.gelu
    big = tracec.randn(N)
    monkeypatch.setattr(fused_eager, "WARMUP_NUMEL", 2 * N)
    monkeypatch.setattr(fused_eager, "_SEEN", {})
    f(big), f(big)
    assert spy.keys == []                  # the warm-up: NumPy until 2N elements seen
    f(big)
    assert spy.keys == [("gelu", "none")]
    spy.keys.clear()
    f(tracec.randn(fused_eager.MIN_NUMEL - 1))              # small
    f(big.double().float().to(tracec.float16))              # not float32/64
    monkeypatch.setenv("TRACEC_EAGER_KERNELS", "0")
    f(big)                                                  # switched off
    monkeypatch.delenv("TRACEC_EAGER_KERNELS")
    step = tracec.compile(lambda v: f(v) * 2.0, backend="interp")
    np.testing.assert_allclose(step(big).numpy(), (f(big) * 2.0).numpy(), rtol=1e-5, atol=1e-6)
    assert spy.keys == [("gelu", "none")]   # only the eager call after the trace


def test_parameters_key_the_kernels(spy, monkeypatch):
    monkeypatch.setattr(fused_eager, "WARMUP_NUMEL", 0)
    x = tracec.from_numpy(_inputs("float32", specials=False)[0])
    a = tracec.nn.functional.leaky_relu(x, 0.0)
    b = tracec.nn.functional.leaky_relu(x, -0.0)
    assert spy.keys == [("leaky_relu", "float:0.0"), ("leaky_relu", "float:-0.0")]
    neg = x.numpy() < 0
    # x * 0.0 is -0.0 below 0, x * -0.0 is +0.0
    assert np.signbit(a.numpy()[neg]).all() and not np.signbit(b.numpy()[neg]).any()


def test_a_failed_build_warns_and_runs_numpy(monkeypatch):
    from tracec import eager_kernels

    def broken(*a, **k):
        raise RuntimeError("no LLVM today")
    monkeypatch.setattr(eager_kernels, "_compile", broken)
    monkeypatch.setattr(eager_kernels, "_made", {})
    monkeypatch.setattr(fused_eager, "WARMUP_NUMEL", 0)
    monkeypatch.delenv("TRACEC_EAGER_KERNELS", raising=False)
    x = tracec.from_numpy(_inputs("float32", specials=False)[0])
    with pytest.warns(RuntimeWarning, match="no native eager kernel.*no LLVM today"):
        y = tracec.nn.functional.hardsigmoid(x)
    np.testing.assert_allclose(y.numpy(), np.clip(x.numpy() / 6 + 0.5, 0, 1), rtol=1e-6)
    with warnings.catch_warnings():          # remembered: no second warning, no retry
        warnings.simplefilter("error")
        tracec.nn.functional.hardsigmoid(x)


def _three_ways(run, arrays, monkeypatch):
    """``run(L, tensors) -> y`` with the kernels, with NumPy and in PyTorch:
    ``[(spy's keys, grad_fn name, y, grads...)]``; ``y`` is backpropagated
    with a fixed cotangent."""
    spy = _Spy(fused_eager.PROVIDERS[0])
    monkeypatch.setattr(fused_eager, "PROVIDERS", [spy])
    results = []
    for L, on in ((tracec, "1"), (tracec, "0"), (torch, None)):
        if on is not None:
            monkeypatch.setenv("TRACEC_EAGER_KERNELS", on)
        ts = [L.from_numpy(a.copy()).requires_grad_() for a in arrays]
        y = run(L, ts)
        g = np.sin(np.arange(y.numel())).astype(arrays[0].dtype).reshape(tuple(y.shape))
        y.backward(L.from_numpy(g))
        results.append((list(spy.keys), type(y.grad_fn).__name__, y.detach().numpy(),
                        *[t.grad.numpy() if t.grad is not None else None for t in ts]))
    return results


def _agree(results, name, **tol):
    keys = results[0][0]
    assert keys and keys[0][0] == name, keys          # the kernels ran
    for other in results[1:]:
        assert results[0][1] == other[1]
        for got, want in zip(results[0][2:], other[2:]):
            assert (got is None) == (want is None)
            if got is not None:
                np.testing.assert_allclose(got, want, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype,affine", [("float32", (True, True)), ("float32", (True, False)),
                                          ("float32", (False, False)), ("float64", (True, True))])
def test_layer_norm_kernels(dtype, affine, kernels_on, monkeypatch):
    rng = np.random.default_rng(1)
    n = 96
    x = (rng.standard_normal((3, N // n + 1, n)) * 3 + 1).astype(dtype)
    w, b = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    has_w, has_b = affine
    results = _three_ways(lambda L, ts: L.nn.functional.layer_norm(
        ts[0], (n,), ts[1] if has_w else None, ts[2] if has_b else None, eps=1e-4),
        (x, w, b), monkeypatch)
    assert results[0][1] == "NativeLayerNormBackward0"
    _agree(results, "layer_norm",
           **(dict(rtol=1e-5, atol=2e-5) if dtype == "float32" else dict(rtol=1e-11, atol=1e-11)))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_kernels_over_the_last_axis(name, kernels_on, monkeypatch):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((N // 100 + 1, 100)) * 5).astype(np.float32)
    x[0, :3] = [np.inf, -np.inf, np.nan]
    x[1, :] = -np.inf                      # a row of -inf: NaN, as PyTorch gives
    results = _three_ways(lambda L, ts: getattr(L, name)(ts[0], -1), (x,), monkeypatch)
    # (log_softmax's gradient g - softmax * sum(g) sums 100 terms: 1e-6 of |sum|)
    _agree(results, name, rtol=1e-5, atol=1e-5)
    assert np.array_equal(np.isnan(results[0][2]), np.isnan(results[2][2]))


@pytest.mark.parametrize("shape,k,div", [((8, 70, 12, 12), 2, None), ((70, 16, 9, 6), 3, None),
                                         ((260, 10, 8), 2, 3), ((9, 70, 13, 8), (3, 2), None)])
def test_avg_pool2d_kernels(shape, k, div, kernels_on, monkeypatch):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    results = _three_ways(lambda L, ts: L.nn.functional.avg_pool2d(ts[0], k, divisor_override=div),
                          (x,), monkeypatch)
    _agree(results, "avg_pool2d", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,run", [
    ("sum", lambda L, x: x.sum()), ("mean", lambda L, x: x.mean()),
    ("mean", lambda L, x: x.mean(-1)), ("sum", lambda L, x: x.sum(-1, keepdim=True)),
    ("mean", lambda L, x: L.mean(x, 2, True)), ("sum", lambda L, x: x.sum((0, 1, 2))),
    ("mean", lambda L, x: x.mean((1, 2))), ("sum", lambda L, x: x.sum((0, 1, 2), keepdim=True)),
    ("mean", lambda L, x: L.nn.functional.adaptive_avg_pool2d(x, 1)),
    ("norm2", lambda L, x: x.norm()), ("norm2", lambda L, x: L.linalg.vector_norm(x, dim=-1)),
    ("norm2", lambda L, x: L.nn.functional.normalize(x, dim=-1))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reduction_kernels(name, run, dtype, kernels_on, monkeypatch):
    x = np.random.default_rng(4).standard_normal((3, N // 100 + 1, 100)).astype(dtype)
    results = _three_ways(lambda L, ts: run(L, ts[0]), (x,), monkeypatch)
    _agree(results, name, **(dict(rtol=2e-5, atol=2e-4) if dtype == "float32"
                             else dict(rtol=1e-12, atol=1e-12)))
