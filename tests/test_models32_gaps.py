"""Gaps the models32 programs (tests/programs/models32) led to in tracec,
each checked against torch 2.13."""
import warnings

import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [3, 3.0])
def test_scalar_pow_specializations_round_as_torch(exponent, dtype):
    """PyTorch's CPU pow with a Python-scalar exponent of 3 is ``x * x * x``,
    not ``powf``: the same bits, and the gradient to rounding (at 0 too)."""
    x = np.random.default_rng(1).uniform(0.1, 4, 1000).astype(dtype)
    want = pt.from_numpy(x).requires_grad_()
    got = tracec.from_numpy(x.copy()).requires_grad_()
    w, g = want ** exponent, got ** exponent
    assert np.array_equal(g.detach().numpy(), w.detach().numpy())
    assert np.array_equal(tracec.pow(got, exponent).detach().numpy(), w.detach().numpy())
    assert g.grad_fn.name() == w.grad_fn.name() == "PowBackward0"
    w.sum().backward()
    g.sum().backward()
    np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-6)
    at0 = []
    for lib in (pt, tracec):
        z = lib.zeros(2, dtype=getattr(lib, dtype), requires_grad=True)
        (z ** exponent).sum().backward()
        at0.append(z.grad.tolist())
    assert at0[1] == at0[0]


@pytest.mark.parametrize("exponent,root", [(0.5, "sqrt"), (-0.5, "rsqrt")])
def test_scalar_pow_half_is_the_square_root(exponent, root):
    """``x ** 0.5`` / ``x ** -0.5`` are sqrt / rsqrt, as PyTorch's kernel
    dispatches them, values and gradients (at 0: inf / -inf)."""
    x = np.random.default_rng(1).uniform(0.0, 4, 200).astype(np.float32)
    x[0] = 0.0
    for lib in (pt, tracec):
        a = lib.from_numpy(x.copy()).requires_grad_()
        b = lib.from_numpy(x.copy()).requires_grad_()
        (a ** exponent).sum().backward()
        getattr(lib, root)(b).sum().backward()
        assert np.array_equal((a ** exponent).detach().numpy(), getattr(lib, root)(b).detach().numpy())
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def _spatial_hash(lib, coords, log2_hashmap_size):
    """HashNeRF's utils.hash, as written there."""
    primes = [1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737]
    xor_result = lib.zeros_like(coords)[..., 0]
    for i in range(coords.shape[-1]):
        xor_result ^= coords[..., i] * primes[i]
    return lib.tensor((1 << log2_hashmap_size) - 1).to(xor_result.device) & xor_result


def test_integer_bitwise_ops_compile():
    """``^ & |`` of integer tensors are primitives: HashNeRF's spatial hash
    compiles (it ran eagerly, "bitwise_xor() of integer tensors (eager
    only)") and gives PyTorch's values, int64 products wrapping as in C."""
    c = np.random.default_rng(0).integers(-50, 3000, (6, 8, 3))
    want = _spatial_hash(pt, pt.from_numpy(c), 19)
    assert np.array_equal(_spatial_hash(tracec, tracec.from_numpy(c), 19).numpy(), want.numpy())

    @tracec.compile
    def step(coords, other):
        h = _spatial_hash(tracec, coords, 19)
        return h, (h | other) ^ (other & 12345)

    o = np.random.default_rng(1).integers(-(1 << 40), 1 << 40, (6, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, mixed = step(tracec.from_numpy(c), tracec.from_numpy(o))
    ot = pt.from_numpy(o)
    assert np.array_equal(got.numpy(), want.numpy())
    assert np.array_equal(mixed.numpy(), ((want | ot) ^ (ot & 12345)).numpy())
    assert "bitwise_xor" in step.ir("trace")
    for d in ("int32", "uint8"):
        a = np.random.default_rng(2).integers(0, 120, (5,)).astype(d)
        b = np.random.default_rng(3).integers(0, 120, (5,)).astype(d)
        assert np.array_equal(tracec.compile(lambda x, y: x ^ y)(tracec.from_numpy(a), tracec.from_numpy(b)).numpy(),
                              (pt.from_numpy(a) ^ pt.from_numpy(b)).numpy())


def test_mask_then_basic_index_fill_compiles():
    """``x[mask, -1] = 0`` (HashNeRF's run_network: ``outputs_flat[~keep_mask,
    -1] = 0``) is a fill with no data-dependent shape: it compiles (it ran
    eagerly, "boolean-mask indexing on a traced tensor") and gives PyTorch's
    values and gradient."""
    x = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    keep = np.array([True, False, True, True, False, True])

    def run(lib, fn):
        xt = lib.from_numpy(x.copy()).requires_grad_()
        out = fn(xt, lib.from_numpy(keep))
        (out * lib.arange(24.0).reshape(6, 4)).sum().backward()
        return out.detach().numpy(), xt.grad.numpy()

    def fill(lib):
        def f(x, keep_mask):
            out = x * 2
            out[~keep_mask, -1] = 0
            out[keep_mask, 1:3] = lib.tensor(5.0)
            out[keep_mask, ..., 0] = -1.0
            return out
        return f

    want = run(pt, fill(pt))
    assert all(np.array_equal(a, b) for a, b in zip(run(tracec, fill(tracec)), want))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(tracec, tracec.compile(fill(tracec)))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
