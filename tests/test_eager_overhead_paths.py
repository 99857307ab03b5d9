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


def _grad_fn_name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)),
                                    ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)), ((3,), (2, 3, 4)),
                                    ((2, 2, 3), (2, 3, 4)), ((4, 3), "t")])
def test_matmul_values_names_and_grads_match_pytorch(shapes):
    def run(L):
        rng = np.random.default_rng(3)
        a = L.tensor(rng.standard_normal(shapes[0]).astype(np.float32), requires_grad=True)
        if shapes[1] == "t":    # a column-major right operand
            b = L.tensor(rng.standard_normal((5, 3)).astype(np.float32)).t().requires_grad_()
        else:
            b = L.tensor(rng.standard_normal(shapes[1]).astype(np.float32), requires_grad=True)
        out = a @ b
        out.sum().backward()
        return (_grad_fn_name(out), tuple(out.shape), out.detach().numpy(), a.grad.numpy(),
                b.grad.numpy(), b.grad.stride() if shapes[1] == "t" else None)
    got, want = run(tracec), run(torch)
    assert got[:2] == want[:2] and got[5] == want[5]
    for g, w in zip(got[2:5], want[2:5]):
        assert g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-6)


def test_matmul_errors_match_pytorch():
    for L in (tracec, torch):
        with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
            L.ones(3) @ L.tensor(2.0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool", "float16"])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
def test_sum_every_axis_matches_pytorch(dtype, shape):
    def run(L):
        x = L.tensor(np.random.default_rng(1).standard_normal(shape) * 4).to(getattr(L, dtype))
        y = x.sum()
        return str(y.dtype).split(".")[-1], tuple(y.shape), float(y), x
    got, want = run(tracec), run(torch)
    assert got[:2] == want[:2] and np.isclose(got[2], want[2], rtol=1e-3)
    # (the value: NumPy's reduction over every axis, in the result's dtype)
    data = got[3].numpy()
    acc = np.int64 if data.dtype == np.bool_ else (np.float32 if dtype == "float16" else data.dtype)
    ref = np.add.reduce(data, axis=tuple(range(data.ndim)), dtype=acc) if data.ndim else data
    assert repr(got[2]) == repr(float(np.asarray(ref).astype(got[3].sum().numpy().dtype)))
    x = tracec.tensor(np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)).t()
    assert tracec.sum(x).item() == float(np.add.reduce(x.numpy(), axis=(0, 1)))


def test_relu_slices_views_and_module_calls_match_pytorch():
    def run(L):
        x = L.tensor([[-1.0, -0.0, 0.0, 2.0], [float("nan"), 3.0, -4.0, 5.0]],
                     requires_grad=True)
        outs = [L.relu(x), x[1:2], x[:, 1:3], x[1], x[-1, ::2], x.view(-1), x.view(4, 2)]
        names = [_grad_fn_name(o) for o in outs]
        sum(o.sum() for o in outs[1:]).backward()
        lin = L.nn.Linear(4, 3)
        with L.no_grad():
            lin.weight.copy_(L.arange(12.0).reshape(3, 4) / 10)
            lin.bias.fill_(0.5)
        calls = []
        y1 = lin(x.detach().nan_to_num())
        h = lin.register_forward_hook(lambda m, i, o: calls.append(o.shape) or o * 2)
        y2 = lin(x.detach().nan_to_num())
        h.remove()
        y3 = lin(x.detach().nan_to_num())
        return (names, [repr(v) for o in outs for v in o.detach().reshape(-1).tolist()],
                x.grad.tolist(), y1.tolist(), y2.tolist(), y3.tolist(), [tuple(c) for c in calls])
    assert run(tracec) == run(torch)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        tracec.ones(3, 4).t().view(-1)


@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.05, momentum=0.9),
                                dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                                dict(lr=0.2, momentum=0.5, dampening=0.3, maximize=True),
                                dict(lr=1.0, momentum=1.0),
                                dict(lr=0.1, momentum=0.9, weight_decay=1, maximize=True,
                                     nesterov=True)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_sgd_steps_are_the_tensor_ops_bits_and_match_pytorch(kw, dtype):
    """SGD's NumPy step (with a momentum buffer) and its
    ``p.add_(grad, alpha=-lr)`` (in place, no intermediate tensor) give the
    bits of the op-by-op tensor path, which an op observer forces, and
    PyTorch's values and version counts."""
    from tracec.tensor import OP_OBSERVERS

    def run(L, observe=False):
        rng = np.random.default_rng(5)
        ps = [L.nn.Parameter(L.tensor(rng.standard_normal(s)).to(getattr(L, dtype)))
              for s in [(4, 3), (3,), ()]]
        opt = L.optim.SGD(ps, **kw)
        for _ in range(3):
            for p in ps:
                p.grad = L.tensor(rng.standard_normal(tuple(p.shape))).to(getattr(L, dtype))
            if observe:
                OP_OBSERVERS.append(lambda *a: None)
            try:
                opt.step()
            finally:
                if observe:
                    OP_OBSERVERS.pop()
        return [p.detach().to(L.float64).numpy() for p in ps], [p._version for p in ps]

    fast, slow, ref = run(tracec), run(tracec, True), run(torch)
    for a, b, c in zip(fast[0], slow[0], ref[0]):
        assert np.array_equal(a, b)
        assert np.allclose(a, c, rtol=1e-2 if dtype == "float16" else 1e-5, atol=1e-6)
    assert fast[1] == slow[1] == list(ref[1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_is_the_tensor_ops_bits(dtype):
    """clip_grad_norm_'s 2-norms of small gradients (their primitives'
    impls on the data) equal the op-by-op path's, which an op observer
    forces, and PyTorch's within rounding; a large gradient and a
    non-contiguous one included."""
    from tracec.tensor import OP_OBSERVERS

    def run(L, observe=False):
        rng = np.random.default_rng(7)
        shapes = [(6, 5), (5,), (), (200, 100)]
        ps = [L.nn.Parameter(L.tensor(rng.standard_normal(s)).to(getattr(L, dtype)))
              for s in shapes]
        for p in ps:
            p.grad = L.tensor(rng.standard_normal(tuple(p.shape)[::-1]) * 3).to(
                getattr(L, dtype)).T if p.ndim == 2 else L.tensor(
                rng.standard_normal(tuple(p.shape))).to(getattr(L, dtype))
        if observe:
            OP_OBSERVERS.append(lambda *a: None)
        try:
            total = L.nn.utils.clip_grad_norm_(ps, 1.0)
        finally:
            if observe:
                OP_OBSERVERS.pop()
        return total.numpy(), [p.grad.numpy() for p in ps], str(total.dtype)[-7:]

    fast, slow, ref = run(tracec), run(tracec, True), run(torch)
    assert fast[2] == slow[2] == ref[2]
    assert np.array_equal(fast[0], slow[0]) and np.allclose(fast[0], ref[0], rtol=1e-5)
    for a, b, c in zip(fast[1], slow[1], ref[1]):
        assert np.array_equal(a, b) and np.allclose(a, c, rtol=1e-5, atol=1e-7)


def test_to_own_dtype_stack_and_unsqueeze_match_pytorch():
    def run(L):
        x = L.arange(6.0).reshape(2, 3).requires_grad_()
        same = x.to(x.dtype)
        other = x.to(L.float64)
        copied = x.to(x.dtype, copy=True)
        u = [x.unsqueeze(d) for d in (0, 1, 2, -1, -3)]
        s = L.stack([x, x * 2], 1)
        (s.sum() + sum(t.sum() for t in u)).backward()
        return (same is x, other is x, copied is x, str(other.dtype)[-7:],
                [tuple(t.shape) for t in u], [type(t.grad_fn).__name__ for t in u],
                tuple(s.shape), type(s.grad_fn).__name__, s.tolist(), x.grad.tolist())
    assert run(tracec) == run(torch)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_stack_of_many_is_the_tensor_ops_result(dim, dtype):
    """stack without autograd (a collate) from the impls on the arrays:
    the values, dtype, strides and (no) grad_fn of the op path, which an
    op observer forces, and PyTorch's values."""
    from tracec.tensor import OP_OBSERVERS

    def make(L):
        rng = np.random.default_rng(2)
        xs = [L.tensor(rng.standard_normal((3, 4)) * 3).to(getattr(L, dtype)) for _ in range(5)]
        xs[1] = xs[1].t().contiguous().t()           # a transposed layout
        return xs

    def run(L, observe=False):
        xs = make(L)
        if observe:
            OP_OBSERVERS.append(lambda *a: None)
        try:
            s = L.stack(xs, dim)
        finally:
            if observe:
                OP_OBSERVERS.pop()
        return s.numpy(), s.stride(), str(s.dtype).split(".")[-1], s.grad_fn, s.requires_grad

    fast, slow, ref = run(tracec), run(tracec, True), run(torch)
    assert np.array_equal(fast[0], slow[0]) and fast[1:] == slow[1:]
    assert np.array_equal(fast[0], ref[0]) and fast[2] == ref[2]
    if dtype == "float32":      # requiring grad: the op path, with its node
        xs = make(tracec)
        xs[0].requires_grad_()
        s = tracec.stack(xs, dim)
        assert type(s.grad_fn).__name__ == "StackBackward0"
        with tracec.no_grad():
            assert tracec.stack(xs, dim).grad_fn is None


@pytest.mark.parametrize("n", [7, 40000])
def test_relu_with_grad_matches_pytorch_bits(n):
    """ReLU requiring grad, small (np.where) and large (the bit select):
    values and gradient bits (NaN, -0.0, +0.0, infinities) as PyTorch's."""
    def run(L):
        base = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1.5, 2.5], np.float32)
        x = L.tensor(np.resize(base, n), requires_grad=True)
        y = L.relu(x)
        (y * L.arange(n, dtype=L.float32)).sum().backward()
        return (y.detach().numpy().view(np.uint32).tolist(), x.grad.numpy().view(np.uint32).tolist(),
                type(y.grad_fn).__name__)
    assert run(tracec) == run(torch)
