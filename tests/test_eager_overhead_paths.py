"""The eager front end's short cuts for the commonest calls (an operator
on a tensor and a tensor of its dtype or a Python number; add / sub / mul
/ div on float32 / float64 operands; reductions and movement on small
tensors) against PyTorch and against the general path they skip: values
(bits), dtypes, gradients, errors, with broadcasting, 0-d and
non-contiguous operands, other dtypes (which take the general path),
a Tensor subclass and an active TorchFunctionMode."""
from __future__ import annotations

import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

_OPS = {
    "add": lambda L, a, b: a + b, "radd": lambda L, a, b: b + a,
    "sub": lambda L, a, b: a - b, "rsub": lambda L, a, b: b - a,
    "mul": lambda L, a, b: a * b, "div": lambda L, a, b: a / b,
    "rdiv": lambda L, a, b: b / a,
    "add_fn": lambda L, a, b: L.add(a, b), "sub_fn": lambda L, a, b: L.sub(a, b),
    "mul_fn": lambda L, a, b: L.mul(a, b), "div_fn": lambda L, a, b: L.div(a, b),
    "add_alpha": lambda L, a, b: L.add(a, b, alpha=2), "sub_alpha": lambda L, a, b: L.sub(a, b, alpha=0.5),
    "eq": lambda L, a, b: a == b, "lt": lambda L, a, b: a < b,
}

_OPERANDS = [
    # (a's shape, dtype, b: "same" / shape / Python number, b's dtype)
    ((3, 4), "float32", "same", None),
    ((3, 4), "float64", (4,), "float64"),
    ((), "float32", (2, 3), "float32"),
    ((3, 4), "float32", (), "float32"),
    ((3, 4), "float32", 2, None),
    ((3, 4), "float64", -0.0, None),
    ((3, 4), "float32", True, None),
    ((3, 4), "float32", (3, 4), "float64"),     # promotes: the general path
    ((3, 4), "float16", (3, 4), "float16"),
    ((3, 4), "bfloat16", 0.1, None),
    ((3, 4), "int64", 3, None),
    ((3, 4), "int32", 2.5, None),
    ((3, 4), "bool", (3, 4), "bool"),
    ((4, 3), "float32", "transposed", None),    # non-contiguous
]


def _make(L, shape, dtype, seed, grad):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    x.reshape(-1)[::5] = 0.0
    if dtype in ("int64", "int32"):
        x = np.rint(x)
    t = L.tensor(x.astype(np.float64)).to(getattr(L, dtype))
    if dtype == "bool":
        t = t > 0
    if grad and dtype in ("float32", "float64", "float16", "bfloat16"):
        t.requires_grad_(True)
    return t


def _pair(L, case, grad):
    shape, dtype, other, odt = case
    a = _make(L, shape, dtype, 0, grad)
    if other == "same":
        b = _make(L, shape, dtype, 1, grad)
    elif other == "transposed":
        b = _make(L, shape[::-1], dtype, 1, False).t().requires_grad_(grad)
        a = _make(L, shape[::-1], dtype, 0, False).t().requires_grad_(grad)
    elif isinstance(other, tuple):
        b = _make(L, other, odt, 1, grad)
    else:
        b = other
    return a, b


def _values(L, t):
    """``t``'s values as comparable text (nan equals nan, -0.0 is not 0.0)."""
    return [repr(v) for v in t.detach().to(L.float64).numpy().ravel().tolist()]


def _run(L, name, case, grad):
    a, b = _pair(L, case, grad)
    try:
        out = _OPS[name](L, a, b)
    except Exception as e:   # noqa: BLE001 - the error is compared
        return ("error", type(e).__name__, str(e).split("\n")[0]), []
    got = [str(out.dtype).split(".")[-1], tuple(out.shape),
           _values(L, out), out.requires_grad]
    grads = []
    if out.requires_grad:
        out.sum().backward()
        for t in (a, b):
            if isinstance(t, L.Tensor) and t.requires_grad:
                grads.append(t.grad.to(L.float64).numpy())
    return got, grads


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", _OPERANDS, ids=str)
def test_binary_operators_match_pytorch(case, grad):
    for name in _OPS:
        want, want_grads = _run(torch, name, case, grad)
        got, got_grads = _run(tracec, name, case, grad)
        assert got == want, (name, case)
        assert len(got_grads) == len(want_grads)
        rtol = 1e-2 if case[1] in ("float16", "bfloat16") else 1e-6
        for g, w in zip(got_grads, want_grads):
            # (div's divisor gradient is an ulp from PyTorch's, as it was
            # before the short cuts; half types' more)
            assert g.shape == w.shape and np.allclose(g, w, rtol=rtol, equal_nan=True), name


def test_operator_result_is_the_general_paths_bits():
    """A float32 product / sum through the short cut equals the one the
    general path (promote, then the primitive) computes, bit for bit,
    with its backward node's name."""
    from tracec import functions as F
    from tracec.ops import elementwise as ew
    a = tracec.randn(5, 7, requires_grad=True)
    b = tracec.randn(7)
    for fn, prim, name in ((F.add, ew.add, "AddBackward0"), (F.mul, ew.mul, "MulBackward0"),
                           (F.sub, ew.sub, "SubBackward0"), (F.div, ew.div, "DivBackward0")):
        for other in (b, 0.1, 3):
            fast = fn(a, other)
            (x, y), _ = F.promote("op", a, other)
            slow = prim(x, y)
            assert fast.dtype is slow.dtype
            assert np.array_equal(fast.detach().numpy().view(np.uint32),
                                  slow.detach().numpy().view(np.uint32))
            assert type(fast.grad_fn).__name__ == name


def test_subclass_and_mode_see_the_operators():
    class Tagged(tracec.Tensor):
        pass

    a = tracec.randn(3).as_subclass(Tagged)
    assert type(a + tracec.ones(3)) is Tagged
    assert type(a * 2.0) is Tagged
    assert type(tracec.ones(3) - a) is Tagged

    def calls(L):
        seen = []

        class Log(L.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(getattr(func, "__name__", str(func)))
                return func(*args, **(kwargs or {}))

        x, y = L.ones(3), L.ones(3)
        with Log():
            out = [x + y, x * 2.0, x.sum(), 2.0 - x, x / 4, x.view(-1), x[1:]]
        return seen, [o.tolist() for o in out]

    assert calls(tracec) == calls(torch)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_numpy_array_operand_still_defers_to_numpy():
    x = tracec.ones(3)
    arr = np.ones(3, np.float64)
    r, w = x * arr, torch.ones(3) * arr
    assert type(r).__name__ == type(w).__name__ and str(r.dtype)[-7:] == str(w.dtype)[-7:]
