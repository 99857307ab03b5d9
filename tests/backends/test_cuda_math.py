"""The cuda backend's math (``mathfns64`` where NVPTX has no instruction:
float64 exp, log, tanh, sin, cos, pow, erf, and float32 sin, cos, pow through
float64) equals NumPy within a few ulp over dense samples and special
values, on the emulated launch (the same code) and on a GPU where there is
one.  Before it, Adam's bias correction (``beta ** step`` in float64)
aborted the process in LLVM's instruction selector."""
from __future__ import annotations

import numpy as np
import pytest

import tracec

BACKENDS = ["cuda-emulated", pytest.param("cuda", marks=pytest.mark.skipif(
    tracec.cuda.gpu_count() == 0, reason="no CUDA GPU (CuPy finds none)"))]

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e-300, 5e-324,
            709.0, 710.0, -745.0, -746.0, 1e10, -3.5]


def _samples(dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-10, 10, 3000), rng.uniform(-1, 1, 2000),
                        np.exp(rng.uniform(-700, 700, 2000)), _SPECIAL])
    return x.astype(dtype)


def _run(backend, fn, *arrays):
    """The compiled result (the first call records, eagerly)."""
    comp = tracec.compile(fn, backend=backend)
    ts = [tracec.tensor(a) for a in arrays]
    comp(*ts)
    got = comp(*ts).numpy()
    info = comp.cache_info()
    assert info.compiles + info.loads == 1 and info.hits == 1, info
    return got


def _ulps(got, want, dtype):
    got, want = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) | both_nan
    spacing = np.abs(np.spacing(want.astype(dtype))).astype(np.float64)
    spacing = np.where(np.isfinite(spacing) & (spacing > 0), spacing,
                       np.finfo(dtype).smallest_subnormal)
    err = np.where(same, 0.0, np.abs(got - want) / spacing)
    return np.where(np.isnan(err), np.inf, err)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,ulps", [("exp", 4), ("log", 4), ("tanh", 6), ("expm1", 8),
                                       ("log1p", 8), ("sigmoid", 6)])
def test_unary_against_numpy(backend, dtype, name, ulps):
    x = _samples(dtype)
    if name in ("log", "log1p"):
        x = np.abs(x)
    ref = (lambda a: 1 / (1 + np.exp(-a.astype(np.float64)))) if name == "sigmoid" \
        else getattr(np, name)
    with np.errstate(all="ignore"):
        want = ref(x).astype(dtype)
    got = _run(backend, lambda t: getattr(t, name)() * 1.0, x)
    err = _ulps(got, want, dtype)
    assert err.max() <= ulps, (name, x[err.argmax()], got[err.argmax()], want[err.argmax()])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_against_math_erf(backend, dtype):
    import math
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-6, 6, 4000), rng.uniform(-1, 1, 2000),
                        [0.0, -0.0, 0.999, 1.0, 1.001, 7.99, 8.0, 8.01, 30.0, -40.0,
                         np.inf, -np.inf, np.nan, 1e-300]]).astype(dtype)
    want = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(dtype)
    got = _run(backend, lambda t: t.erf() * 1.0, x)
    err = _ulps(got, want, dtype)
    assert err.max() <= 12, (x[err.argmax()], got[err.argmax()], want[err.argmax()])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_against_numpy(backend, dtype, name):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-10, 10, 4000), rng.uniform(-1e5, 1e5, 2000),
                        [0.0, -0.0, np.pi, -np.pi / 2, 1e-30, np.inf, -np.inf, np.nan]])
    x = x.astype(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
    got = _run(backend, lambda t: getattr(t, name)() * 1.0, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    # absolute: sin/cos near their zeros have no relative accuracy to give
    tol = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_against_numpy(backend, dtype):
    rng = np.random.default_rng(2)
    base = np.concatenate([rng.uniform(0, 4, 2000), rng.uniform(-4, 0, 500),
                           [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.9, 2.0, -2.0]])
    expo = np.concatenate([rng.uniform(-6, 6, 2000), rng.integers(-5, 6, 500).astype(float),
                           [0.0, 3.0, -3.0, 2.0, 0.5, np.inf, -np.inf, np.nan, 1000.0, -1.0]])
    grid_b, grid_e = np.meshgrid(base[-10:], expo[-10:])
    x = np.concatenate([base, grid_b.ravel()]).astype(dtype)
    y = np.concatenate([expo, grid_e.ravel()]).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    got = _run(backend, lambda a, b: a ** b, x, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str((x, y)))
    num = ~np.isnan(want)          # (a NaN's sign bit is no part of the result)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
    ok = np.isfinite(want)
    np.testing.assert_array_equal(got[~ok & ~np.isnan(want)], want[~ok & ~np.isnan(want)])
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_adam_step_on_cuda(backend, tmp_path, monkeypatch):
    """Adam's ``beta ** step`` is float64 math on a lifted counter."""
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))

    def make():
        tracec.manual_seed(0)
        model = tracec.nn.Linear(5, 3)
        opt = tracec.optim.Adam(model.parameters(), lr=1e-2)

        def step(x):
            opt.zero_grad()
            loss = (model(x).sin() ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return model, step
    m1, eager = make()
    m2, step = make()
    comp = tracec.compile(step, backend=backend)
    x = tracec.randn(4, 5)
    for _ in range(5):
        np.testing.assert_allclose(comp(x).item(), eager(x).item(), rtol=1e-5)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), atol=1e-5)
    assert comp.cache_info().compiles == 1
