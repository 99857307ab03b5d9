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
