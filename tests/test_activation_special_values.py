"""Activations at NaN, signed zeros and infinities, against PyTorch 2.13:
values bit for bit and gradients, eagerly and compiled (interp, cpu).
relu(NaN) is NaN and relu(-0.0) is -0.0 in PyTorch (clamp_min), and its
gradient at NaN is the incoming one (threshold_backward): a diverging run
must show NaN as it does under torch, not have it zeroed by an activation."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

X = [float("nan"), -0.0, 0.0, -1.0, 2.0, 7.0, float("inf"), -float("inf"), 0.25, -0.5, 0.5,
     3.0, -3.0]

CASES = {
    "relu": lambda lib: lib.nn.functional.relu,
    "torch.relu": lambda lib: lib.relu,
    "ReLU": lambda lib: lib.nn.ReLU(),
    "threshold": lambda lib: lambda v: lib.nn.functional.threshold(v, 0.5, -1.0),
    "hardshrink": lambda lib: lib.nn.functional.hardshrink,
    "softshrink": lambda lib: lib.nn.functional.softshrink,
    "hardsigmoid": lambda lib: lib.nn.functional.hardsigmoid,
}


@pytest.mark.parametrize("mode", ["eager", "interp", "cpu"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_match_pytorch(name, mode):
    tv = torch.tensor(X, requires_grad=True)
    want = CASES[name](torch)(tv)
    want.backward(torch.ones(len(X)))
    f = CASES[name](tracec)
    cv = tracec.tensor(X, requires_grad=True)
    if mode == "eager":
        out = f(cv)
        out.backward(tracec.ones(len(X)))
        got = out.detach().numpy()
    else:
        def step(v):
            y = f(v)
            y.backward(tracec.ones(len(X)))
            return y.detach()
        cf = tracec.compile(step, backend=mode)
        for _ in range(2):            # the second call runs the compiled code
            cv.grad = None
            got = cf(cv).numpy()
    ref = want.detach().numpy()
    if name == "hardsigmoid":         # x / 6 + 0.5 rounds differently in the last place
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
    else:
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), (got, ref)
    np.testing.assert_array_equal(cv.grad.numpy(), tv.grad.numpy())
