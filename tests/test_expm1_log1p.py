"""``expm1`` and ``log1p`` are primitives (``exp(x) - 1`` and ``log(1 + x)``
lose every digit for |x| under an ulp of 1), checked against PyTorch 2.13:
values and gradients at tiny, ordinary, huge and special arguments, float32
and float64, eagerly and compiled (interp, and cpu's Kahan formulas); and
the activations built on them (elu, selu, celu keep -0.0 as PyTorch's
``expm1`` does; softplus and logsigmoid)."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

X = [1e-8, -1e-8, 1e-30, -0.0, 0.0, 1e-3, -1e-3, 0.5, -0.5, 3.0, -3.0, -20.0, 20.0, 80.0,
     -80.0, 100.0, -1.0, -0.999, float("nan"), float("inf"), -float("inf"), -2.0]

FUNCS = {
    "expm1": lambda lib: lib.expm1,
    "log1p": lambda lib: lib.log1p,
    "Tensor.expm1": lambda lib: lambda v: v.expm1(),
    "Tensor.log1p": lambda lib: lambda v: v.log1p(),
    "elu": lambda lib: lib.nn.functional.elu,
    "elu_alpha": lambda lib: lambda v: lib.nn.functional.elu(v, alpha=0.3),
    "selu": lambda lib: lib.nn.functional.selu,
    "celu": lambda lib: lambda v: lib.nn.functional.celu(v, alpha=2.0),
    "softplus": lambda lib: lib.nn.functional.softplus,
    "logsigmoid": lambda lib: lib.nn.functional.logsigmoid,
}


def _run(name, mode, dtype):
    f = FUNCS[name](tracec)
    cv = tracec.tensor(X, dtype=getattr(tracec, dtype), requires_grad=True)
    if mode == "eager":
        out = f(cv)
        out.backward(tracec.ones(len(X), dtype=cv.dtype))
        return out.detach().numpy(), cv.grad.numpy()

    def step(v):
        y = f(v)
        y.backward(tracec.ones(len(X), dtype=v.dtype))
        return y.detach()
    cf = tracec.compile(step, backend=mode)
    for _ in range(2):            # the second call runs the compiled code
        cv.grad = None
        got = cf(cv).numpy()
    return got, cv.grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["eager", "interp", "cpu"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_matches_pytorch(name, mode, dtype):
    tv = torch.tensor(X, dtype=getattr(torch, dtype), requires_grad=True)
    want = FUNCS[name](torch)(tv)
    want.backward(torch.ones(len(X), dtype=tv.dtype))
    got, grad = _run(name, mode, dtype)
    ref = want.detach().numpy()
    rtol = 4e-7 if dtype == "float32" else 1e-15
    # Values: equal to a few ulps (relative, so 1e-8 -> 1e-8, never 0), the
    # same NaNs and infinities, and the sign of every zero.
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=np.finfo(dtype).tiny)  # denormals
    assert np.array_equal(np.signbit(got[got == 0]), np.signbit(ref[ref == 0])), (got, ref)
    fin = np.isfinite(tv.grad.numpy())
    # expm1's gradient is out + 1: PyTorch's rounding of that sum is an ulp of 1.
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(grad[fin], tv.grad.numpy()[fin], rtol=4 * eps, atol=eps)
    assert np.array_equal(np.isnan(grad), np.isnan(tv.grad.numpy()))


def test_small_arguments_keep_their_digits():
    # The failure this guards against: exp(1e-8) - 1 == 0 in float32.
    x = tracec.tensor([1e-8, -3e-9], dtype=tracec.float32)
    assert tracec.expm1(x).tolist() == pytest.approx([1e-8, -3e-9], rel=1e-6)
    assert tracec.log1p(x).tolist() == pytest.approx([1e-8, -3e-9], rel=1e-6)
    cf = tracec.compile(lambda v: (tracec.expm1(v), tracec.log1p(v)), backend="cpu")
    for _ in range(2):
        e, lg = cf(x)
    assert e.tolist() == pytest.approx([1e-8, -3e-9], rel=1e-6)
    assert lg.tolist() == pytest.approx([1e-8, -3e-9], rel=1e-6)


def test_complex_keeps_working():
    z = torch.tensor([1e-3 + 1j, -0.5 - 2j])
    c = tracec.tensor(z.numpy())
    np.testing.assert_allclose(tracec.expm1(c).numpy(), torch.expm1(z).numpy(), rtol=1e-6)
    np.testing.assert_allclose(tracec.log1p(c).numpy(), torch.log1p(z).numpy(), rtol=1e-6)


def test_ir_names_the_primitives():
    f = tracec.compile(lambda v: tracec.expm1(v) + tracec.log1p(v), backend="interp")
    f(tracec.ones(3))
    text = f.ir("trace")
    assert "tracec.expm1" in text and "tracec.log1p" in text
