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
     3.0, -3.0, 1.0, 6.0, -6.0, -20.0]

CASES = {
    "relu": lambda lib: lib.nn.functional.relu,
    "torch.relu": lambda lib: lib.relu,
    "ReLU": lambda lib: lib.nn.ReLU(),
    "threshold": lambda lib: lambda v: lib.nn.functional.threshold(v, 0.5, -1.0),
    "hardshrink": lambda lib: lib.nn.functional.hardshrink,
    "softshrink": lambda lib: lib.nn.functional.softshrink,
    "hardsigmoid": lambda lib: lib.nn.functional.hardsigmoid,
    # gradient 0 at the bounds (hardtanh_backward), 1 at NaN
    "hardtanh": lambda lib: lib.nn.functional.hardtanh,
    "relu6": lambda lib: lib.nn.functional.relu6,
    "ReLU6": lambda lib: lib.nn.ReLU6(),
    "hardtanh_bounds": lambda lib: lambda v: lib.nn.functional.hardtanh(v, -3.0, 2.0),
    # -0.0 below -3, NaN at -inf; gradient 0 at -3, 1 at 3 and at NaN
    "hardswish": lambda lib: lib.nn.functional.hardswish,
    # x <= 0 takes the slope (0 included)
    "rrelu_eval": lambda lib: lambda v: lib.nn.functional.rrelu(v, training=False),
    "leaky_relu": lambda lib: lambda v: lib.nn.functional.leaky_relu(v, 0.2),
    # PyTorch's sign is 0 at NaN and +0.0 at -0.0
    "sign": lambda lib: lib.sign,
}


NAN_GRAD_VARIES = {"hardshrink", "softshrink", "hardtanh", "relu6", "ReLU6", "hardtanh_bounds"}


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
    if name in ("hardsigmoid", "hardswish"):   # x / 6 + 0.5 rounds differently in the last place
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
    elif name == "softshrink":
        # PyTorch's vectorized loop gives +0.0 at -0.0, its scalar loop -0.0
        assert np.array_equal(got, ref, equal_nan=True), (got, ref)
    else:
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), (got, ref)
    g, tg = cv.grad.numpy(), tv.grad.numpy()
    if name in NAN_GRAD_VARIES:
        # PyTorch's own gradient at NaN depends on whether the element went
        # through its vectorized or its scalar loop (0 or 1): not compared.
        keep = ~np.isnan(np.array(X))
        g, tg = g[keep], tg[keep]
    if name == "hardswish":          # x / 3 + 0.5 against autodiff's (2x + 3) / 6: an ulp
        np.testing.assert_allclose(g, tg, rtol=1e-6)
    else:
        np.testing.assert_array_equal(g, tg)


@pytest.mark.parametrize("mode", ["eager", "interp", "cpu"])
def test_zero_rows_get_pytorchs_gradients(mode):
    """normalize and cosine_similarity of an all-zero row: PyTorch's finite
    gradients (the norm's gradient at 0 is 0), where sqrt(sum(x * x)) gave
    NaN and poisoned the step."""
    data = np.array([[0.0, 0.0, 0.0], [1e-9, -2e-9, 0.0], [3.0, -4.0, 1.0]], np.float32)
    other = np.array([[1.0, 1.0, 1.0], [2.0, -1.0, 0.5], [0.0, 0.0, 0.0]], np.float32)

    def loss(lib, x, y):
        F = lib.nn.functional
        return ((F.normalize(x, dim=1) * y).sum() + F.cosine_similarity(x, y).sum()
                + F.normalize(x, p=1, dim=0).sum() * 0.5)
    tx = torch.tensor(data, requires_grad=True)
    ty = torch.tensor(other, requires_grad=True)
    tl = loss(torch, tx, ty)
    tl.backward()
    cx = tracec.tensor(data, requires_grad=True)
    cy = tracec.tensor(other, requires_grad=True)
    if mode == "eager":
        cl = loss(tracec, cx, cy)
        cl.backward()
    else:
        def step(x, y):
            v = loss(tracec, x, y)
            v.backward()
            return v.detach()
        cf = tracec.compile(step, backend=mode)
        for _ in range(2):
            cx.grad = cy.grad = None
            cl = cf(cx, cy)
    np.testing.assert_allclose(cl.item(), tl.item(), rtol=1e-6)
    for c, t in ((cx, tx), (cy, ty)):
        assert np.isfinite(c.grad.numpy()).all()
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
