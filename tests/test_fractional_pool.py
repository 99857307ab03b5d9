"""Fractional max pooling against PyTorch with the same random samples:
values, indices and input gradients; the modules' checks; fresh windows
per compiled call."""
from __future__ import annotations

import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("nsp,shape,k,kw", [
    (2, (2, 3, 9, 8), 2, dict(output_size=(4, 5))),
    (2, (3, 7, 7), 3, dict(output_ratio=(0.5, 0.5))),
    (3, (1, 2, 6, 7, 8), 2, dict(output_size=3)),
    (2, (2, 2, 5, 5), (2, 3), dict(output_size=1)),
    (2, (1, 1, 20, 13), 3, dict(output_size=(9, 6))),
])
def test_matches_torch_given_the_samples(nsp, shape, k, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    n = 1 if len(shape) == nsp + 1 else shape[0]
    u = rng.random((n, shape[-nsp - 1], nsp)).astype(np.float32)
    name = f"fractional_max_pool{nsp}d"
    a, b = tracec.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, ia = getattr(tracec.nn.functional, name)(a, k, return_indices=True,
                                                 _random_samples=tracec.tensor(u), **kw)
    yb, ib = getattr(torch.nn.functional, name)(b, k, return_indices=True,
                                                _random_samples=torch.tensor(u), **kw)
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
    np.testing.assert_array_equal(ia.numpy(), ib.numpy())
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_module_checks_and_shapes():
    m = tracec.nn.FractionalMaxPool2d(2, output_ratio=0.5)
    assert m(tracec.randn(1, 2, 8, 8)).shape == (1, 2, 4, 4) and repr(m) == "FractionalMaxPool2d()"
    assert tracec.nn.FractionalMaxPool3d(2, output_size=2)(tracec.randn(1, 1, 5, 5, 5)).shape == \
        (1, 1, 2, 2, 2)
    for kw, msg in [({}, "either an output size"), (dict(output_size=3, output_ratio=0.5),
                                                     "only one of"),
                    (dict(output_ratio=1.5), "between 0 and 1")]:
        with pytest.raises(ValueError, match=msg):
            tracec.nn.FractionalMaxPool2d(2, **kw)
    with pytest.raises(RuntimeError, match="too large relative to input"):
        tracec.nn.functional.fractional_max_pool2d(tracec.randn(1, 1, 4, 4), 3, output_size=3)


def test_compiled_calls_draw_new_windows():
    x = tracec.randn(1, 1, 16, 16)
    f = tracec.compile(lambda t: tracec.nn.functional.fractional_max_pool2d(t, 2, output_size=5))
    outs = [f(x).numpy() for _ in range(4)]
    assert not all(np.array_equal(outs[1], o) for o in outs[2:])
