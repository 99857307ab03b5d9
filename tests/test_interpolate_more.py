"""``F.interpolate`` modes bicubic and area against PyTorch: values and
gradients (float64 and float32), and inside ``tracec.compile``."""
import numpy as np
import pytest
import torch

import tracec

CASES = [((2, 3, 5, 7), dict(size=(9, 4))), ((1, 2, 4, 4), dict(scale_factor=2)),
         ((1, 1, 6, 5), dict(scale_factor=0.5)), ((1, 2, 3, 8), dict(size=(7, 13))),
         ((1, 1, 5, 5), dict(scale_factor=1.7, recompute_scale_factor=False))]


@pytest.mark.parametrize("mode,align", [("bicubic", False), ("bicubic", True), ("area", None)])
@pytest.mark.parametrize("k", range(len(CASES)))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch(mode, align, k, dtype):
    shape, kw = CASES[k]
    kw = dict(kw)
    if mode == "area":
        kw.pop("recompute_scale_factor", None)
    else:
        kw["align_corners"] = align
    rs = np.random.RandomState(k)
    a, g = rs.randn(*shape).astype(dtype), None
    xt, xc = torch.tensor(a, requires_grad=True), tracec.tensor(a, requires_grad=True)
    yt = torch.nn.functional.interpolate(xt, mode=mode, **kw)
    yc = tracec.nn.functional.interpolate(xc, mode=mode, **kw)
    g = rs.randn(*yt.shape).astype(dtype)
    yt.backward(torch.tensor(g))
    yc.backward(tracec.tensor(g))
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(yc.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)


def test_bicubic_compiles_like_eager():
    x = tracec.randn(2, 3, 6, 6)
    f = lambda t: tracec.nn.functional.interpolate(t, scale_factor=2, mode="bicubic")  # noqa: E731
    c = tracec.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)


def test_bicubic_needs_4d():
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D"):
        tracec.nn.functional.interpolate(tracec.randn(1, 2, 5), scale_factor=2, mode="bicubic")


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [{"size": (6, 5)}, {"size": (30, 7)}, {"scale_factor": 0.5},
                                {"scale_factor": (0.3, 2.0)},
                                {"scale_factor": 0.37, "recompute_scale_factor": True}])
def test_antialias_matches_pytorch_with_gradient(mode, kw):
    import torch
    x = np.random.default_rng(0).standard_normal((2, 3, 17, 13)).astype(np.float32)
    g = None
    tx = torch.tensor(x, requires_grad=True)
    t = torch.nn.functional.interpolate(tx, mode=mode, antialias=True, **kw)
    g = np.random.default_rng(1).standard_normal(tuple(t.shape)).astype(np.float32)
    (t * torch.tensor(g)).sum().backward()
    cx = tracec.tensor(x, requires_grad=True)
    c = tracec.nn.functional.interpolate(cx, mode=mode, antialias=True, **kw)
    (c * tracec.tensor(g)).sum().backward()
    np.testing.assert_allclose(c.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=2e-6)
    f = tracec.compile(lambda v: tracec.nn.functional.interpolate(v, mode=mode, antialias=True,
                                                                   **kw))
    np.testing.assert_allclose(f(tracec.tensor(x)).numpy(), t.detach().numpy(), rtol=1e-5,
                               atol=2e-6)


def test_antialias_needs_a_4d_input_and_a_linear_mode():
    import torch
    for call in (lambda lib: lib.nn.functional.interpolate(lib.ones(1, 1, 4), size=2,
                                                           mode="linear", antialias=True),
                 lambda lib: lib.nn.functional.interpolate(lib.ones(1, 1, 4, 4), size=2,
                                                           mode="nearest", antialias=True)):
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value), match="Anti-alias option is restricted"):
            call(tracec)
