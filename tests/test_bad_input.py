"""Bad input gives a clear Python exception (the type PyTorch raises, and a
message naming what was wrong), never a crash, a hang or a silent answer."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tracec
from tracec.shape_ops import one_hot
from program_runner import python_c


def _raises(exc, pattern, fn):
    with pytest.raises(exc, match=pattern):
        fn()


# --- shapes -------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda: tracec.ones(2, 3) + tracec.ones(4),
    lambda: tracec.ones(2, 3) * tracec.ones(3, 2),
    lambda: tracec.maximum(tracec.ones(2, 3), tracec.ones(4)),
    lambda: tracec.where(tracec.ones(2, 3) > 0, tracec.ones(2, 3), tracec.ones(4)),
    lambda: tracec.ones(2, 3).add_(tracec.ones(4)),
    lambda: tracec.ones(2, 3) - tracec.ones(4, requires_grad=True),
], ids=["add", "mul", "maximum", "where", "add_", "sub_grad"])
def test_broadcast_mismatch_names_both_shapes(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    # (a two-operand mismatch's message is PyTorch's sentence, which
    # programs print; the shapes are in its note, shown in the traceback)
    msg = " ".join([str(e.value), *getattr(e.value, "__notes__", [])])
    assert "broadcast" in msg
    assert ("(2, 3)" in msg and "(4,)" in msg) or ("(2, 3)" in msg and "(3, 2)" in msg), msg


@pytest.mark.parametrize("a,b,names", [
    ((2, 3), (4, 5), ("2x3", "4x5")),
    ((2, 3), (4,), ("2x3", "4")),
    ((3,), (4,), ("3", "4")),
    ((5, 2, 3), (5, 4, 2), ("2x3", "4x2")),
    ((2, 2, 3), (3, 3, 4), ("(2, 2, 3)", "(3, 3, 4)")),
])
def test_matmul_mismatch_names_both_shapes(a, b, names):
    with pytest.raises(RuntimeError) as e:
        tracec.ones(*a) @ tracec.ones(*b)
    for n in names:
        assert n in str(e.value), str(e.value)


def test_matmul_of_0d_raises():
    _raises(RuntimeError, "at least 1D", lambda: tracec.tensor(1.0) @ tracec.ones(2))


@pytest.mark.parametrize("shape", [(4, 2), (5,), (-1, 4), (7, -1), (2, -1, -1)])
def test_reshape_to_a_wrong_size_names_the_size(shape):
    x = tracec.ones(2, 3)
    for f in (x.reshape, x.view):
        with pytest.raises(RuntimeError) as e:
            f(*shape)
        assert "6" in str(e.value) or "inferred" in str(e.value), str(e.value)


def test_other_shape_errors():
    x = tracec.ones(2, 3)
    _raises(RuntimeError, r"expanded|expand", lambda: x.expand(4, 3))
    _raises(RuntimeError, "must match except in dimension 0", lambda: tracec.cat(
        [x, tracec.ones(2, 4)]))
    _raises(RuntimeError, "equal size", lambda: tracec.stack([x, tracec.ones(2, 4)]))
    _raises(RuntimeError, "sum exactly to 3", lambda: x.split([1, 1], dim=1))
    # (a basic index: PyTorch's copy_ into the view, expand's error)
    _raises(RuntimeError, r"expanded size of the tensor \(3\) must match the existing size \(4\)",
            lambda: x.__setitem__(0, tracec.ones(4)))
    _raises(RuntimeError, "shape mismatch", lambda: x.__setitem__(tracec.tensor([0]),
                                                                  tracec.ones(4)))
    _raises(RuntimeError, "duplicate", lambda: x.permute(0, 0))
    _raises(RuntimeError, "number of dimensions|len", lambda: x.permute(0))
    _raises(RuntimeError, "start_dim", lambda: x.flatten(1, 0))
    _raises(RuntimeError, "copy_|broadcast", lambda: x.clone().copy_(tracec.ones(4)))
    _raises(RuntimeError, "Mismatch in shape", lambda: (x * tracec.ones(
        2, 3, requires_grad=True)).backward(tracec.ones(3)))
    _raises(RuntimeError, "multiple times", lambda: x.sum((0, 0)))
    _raises(RuntimeError, "chunks", lambda: x.chunk(0))


# --- dims and indices -------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: x.sum(2), lambda x: x.sum(-3), lambda x: x.mean((0, 5)),
    lambda x: x.softmax(2), lambda x: x.max(2), lambda x: x.argmax(-3),
    lambda x: x.transpose(0, 2), lambda x: x.unsqueeze(4), lambda x: x.squeeze(3),
    lambda x: tracec.cat([x, x], 2), lambda x: x.var(3), lambda x: x.logsumexp(2),
])
def test_dim_out_of_range_is_index_error(fn):
    with pytest.raises(IndexError, match="Dimension out of range"):
        fn(tracec.ones(2, 3))


@pytest.mark.parametrize("key", [3, -4, (0, 5), (slice(None), 3), [0, 3], [0, -5],
                                 "tensor", "tensor_neg", (0, [3])],
                         ids=str)
def test_out_of_range_index_raises_index_error(key):
    x = tracec.ones(3, 3)
    if key == "tensor":
        key = tracec.tensor([0, 3])
    elif key == "tensor_neg":
        key = tracec.tensor([-4])
    with pytest.raises(IndexError, match="out of bounds"):
        x[key]
    with pytest.raises(IndexError, match="out of bounds"):
        x[key] = 1.0


def test_other_index_errors():
    x = tracec.ones(3)
    _raises(IndexError, "too many indices", lambda: x[0, 0])
    # gather: a RuntimeError, as in PyTorch
    _raises(RuntimeError, "out of bounds", lambda: x.gather(0, tracec.tensor([3])))
    _raises(RuntimeError, "out of bounds", lambda: tracec.ones(2, 3).gather(
        1, tracec.tensor([[0], [-4]])))
    _raises(RuntimeError, "num_classes", lambda: one_hot(tracec.tensor([3]), 2))
    _raises(RuntimeError, "non-negative", lambda: one_hot(tracec.tensor([-1]), 2))
    _raises(RuntimeError, "out of bounds", lambda: x.scatter_add(0, tracec.tensor([5]),
                                                              tracec.ones(1)))


# --- types ---------------------------------------------------------------------------

@pytest.mark.parametrize("key", [1.0, 0.5, np.float32(1.0), "tensor_float", (0, 1.0)],
                         ids=str)
def test_float_index_raises(key):
    x = tracec.ones(3, 3)
    if key == "tensor_float":
        key = tracec.tensor([0.0, 1.0])
    with pytest.raises((IndexError, TypeError), match="indices|index"):
        x[key]
    with pytest.raises((IndexError, TypeError)):
        x[key] = 2.0


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "@", "<", "==r"])
@pytest.mark.parametrize("other", ["a", None, object(), {1: 2}], ids=["str", "None", "object",
                                                                       "dict"])
def test_non_numeric_operand_raises_type_error(op, other):
    x = tracec.ones(3)
    fns = {"+": lambda: x + other, "-": lambda: other - x, "*": lambda: x * other,
           "/": lambda: x / other, "**": lambda: x ** other, "@": lambda: x @ other,
           "<": lambda: x < other, "==r": lambda: tracec.eq(x, other)}
    if op == "*" and isinstance(other, str):
        pass  # str * tensor would try sequence repetition: still a TypeError
    with pytest.raises(TypeError):
        fns[op]()


@pytest.mark.parametrize("fn", [
    lambda: tracec.add(tracec.ones(2), "a"), lambda: tracec.exp("a"),
    lambda: tracec.matmul(tracec.ones(2), [1.0, 2.0]), lambda: tracec.where(
        tracec.ones(2) > 0, "a", 1.0), lambda: tracec.tensor("abc"),
    lambda: tracec.zeros(2.5),
    lambda: tracec.ones(2).reshape("a"),
    lambda: tracec.ones(2)["a"], lambda: tracec.ones(2).clamp("a"),
    lambda: tracec.ones(2).copy_([1.0, 2.0]),
    lambda: tracec.ones(2).sum(1.5), lambda: tracec.cat([tracec.ones(2), [1.0]]),
], ids=range(12))
def test_wrong_types_raise_type_error(fn):
    with pytest.raises(TypeError):
        fn()


def test_ragged_data_raises_value_error():
    # (PyTorch 2.13's ValueError, naming the length and dim)
    with pytest.raises(ValueError, match=r"expected sequence of length 2 at dim 1 \(got 1\)"):
        tracec.tensor([[1, 2], [3]])


def test_dtype_errors():
    _raises(RuntimeError, "bool", lambda: -tracec.tensor([True]))
    _raises(RuntimeError, "bool", lambda: tracec.tensor([True]) - tracec.tensor([False]))
    _raises(RuntimeError, "negative integer powers", lambda: tracec.tensor([2]) ** -1)
    _raises(RuntimeError, "mean", lambda: tracec.arange(3).mean())
    _raises(RuntimeError, "can't be cast", lambda: tracec.arange(3).add_(0.5))
    _raises(RuntimeError, "can't be cast", lambda: tracec.arange(3).div_(2))
    _raises(RuntimeError, "can't be cast", lambda: tracec.tensor([True]).add_(1))
    _raises(RuntimeError, "floating point", lambda: tracec.arange(3).requires_grad_())
    # As PyTorch: & | ^ are bitwise on integers and bool, refused on floats
    # (~ on integers is bitwise not: tests/test_ops_math_elementwise.py).
    _raises(RuntimeError, "not implemented for 'Float'", lambda: tracec.ones(2) & tracec.ones(2))
    _raises(TypeError, "only implemented on integer and Boolean", lambda: ~tracec.ones(2))
    _raises(RuntimeError, "not implemented for 'Float'", lambda: tracec.ones(2).bitwise_not())
    _raises(RuntimeError, "boolean tensor, but got a tensor with dtype Float",
            lambda: tracec.where(tracec.ones(2), 1.0, 0.0))   # (PyTorch: RuntimeError)
    _raises(RuntimeError, "boolean masks", lambda: tracec.ones(2).masked_fill(
        tracec.ones(2), 0.0))
    _raises(RuntimeError, "int64", lambda: tracec.ones(2).gather(0, tracec.tensor([0.0])))
    _raises(RuntimeError, "Class values|LongTensor", lambda: one_hot(tracec.ones(2)))
    _raises(RuntimeError, "element", lambda: tracec.ones(2).item())
    _raises(RuntimeError, "ambiguous", lambda: bool(tracec.ones(2)))
    _raises(RuntimeError, "step", lambda: tracec.arange(0, 5, 0))
    _raises(RuntimeError, "Dimension size must be non-negative", lambda: tracec.zeros(-1))   # (torch 2.13)
    _raises(RuntimeError, "negative dimension", lambda: tracec.ones(-1))
    _raises(RuntimeError, "does not require grad", lambda: tracec.arange(3.0).sum().backward())
    _raises((RuntimeError, TypeError), "device|dtype", lambda: tracec.ones(2).to("tpu"))
    _raises(RuntimeError, "detach", lambda: tracec.ones(2, requires_grad=True).numpy())
    assert (tracec.tensor([True, False]) ^ tracec.tensor([True, True])).tolist() == [
        False, True]


def test_cuda_is_refused_clearly_without_a_gpu():
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        tracec.ones(2).to("cuda")


# --- no crash, no hang ------------------------------------------------------------------

def test_deep_graphs_backward_without_recursion_limits():
    x = tracec.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(3000):
        y = y * 1.0001
    y.sum().backward()
    assert np.isclose(x.grad.item(), 1.0001 ** 3000, rtol=1e-3)

    class Stop(tracec.autograd.Function):  # no gradient below a deep graph
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return None

    z = tracec.tensor([1.0], requires_grad=True)
    h = z
    for _ in range(3000):
        h = h + 1
    w = tracec.tensor([2.0], requires_grad=True)
    (Stop.apply(h) * w).sum().backward()
    assert z.grad is None and w.grad.item() == 2 * 3001


def test_nothing_segfaults_or_hangs():
    """Hostile inputs in a subprocess (a crash would kill pytest itself)."""
    code = textwrap.dedent("""
        import numpy as np, tracec
        cases = [
            lambda: tracec.zeros(10 ** 13),
            lambda: tracec.arange(0, 1e300, 1e-300),
            lambda: tracec.ones(2)[10 ** 30],
            lambda: tracec.ones(2).reshape(2 ** 62, 0),
            lambda: tracec.tensor([1e308]) * 1e308,
            lambda: tracec.tensor([2 ** 62]) * 4,
            lambda: tracec.tensor(np.zeros((0, 3))).max(),
            lambda: tracec.tensor(np.zeros((0, 3))).argmax(1),
            lambda: tracec.ones(0, 3).softmax(0),
            lambda: tracec.ones(3, 0).sum(1),
            lambda: tracec.ones(0) @ tracec.ones(0),
            lambda: tracec.ones(2, 2).expand(2, 2)[0].add_(1),
            lambda: tracec.ones(2, 1).expand(2, 3).add_(1),
            lambda: tracec.tensor(np.ones((2, 2))[::-1].copy())[:, ::-1],
            lambda: tracec.ones(3)[tracec.tensor(True)],
            lambda: tracec.tensor([float("nan")]).argmax(),
            lambda: tracec.ones(2).view(-1, 0),
            lambda: tracec.full((2,), float("inf")).softmax(0),
            lambda: tracec.ones(2).split(0),
            lambda: tracec.tensor([]).max(),
            lambda: tracec.tensor([[1.0]]) @ tracec.tensor([[np.inf]]),
        ]
        for i, f in enumerate(cases):
            try:
                f()
            except Exception as e:  # any Python exception is fine
                pass
        print("survived", len(cases))
    """)
    # (a process of its own, forked from the zygote that has imported tracec)
    r = python_c(code, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "survived" in r.stdout


@pytest.mark.parametrize("expr", [
    lambda L: L.tensor([True, False]) - L.tensor([1, 2]),
    lambda L: 1 - L.tensor([True, False]),
    lambda L: L.tensor([1.0, 2.0]) - True,
    lambda L: L.rsub(L.tensor([True]), 1),
    lambda L: L.tensor([True]) - L.tensor([True]),
    lambda L: -L.tensor([True]),
])
def test_bool_subtraction_refused_as_pytorch(expr):
    """``1 - mask`` is refused with PyTorch's message (use ``~``), instead of
    computing an integer mask silently."""
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as want:
        expr(torch)
    with pytest.raises(RuntimeError) as got:
        expr(tracec)
    assert str(got.value) == str(want.value)


def test_errors_are_named_as_pytorchs_in_tracebacks_and_pickle_as_them():
    """A shape error reads ``RuntimeError`` (type name, traceback line), a
    missing checkpoint ``FileNotFoundError``, as PyTorch's; both still pickle."""
    import pickle
    import traceback

    import torch
    for run in (lambda L: L.nn.Linear(3, 2)(L.ones(4, 5)), lambda L: L.load("/nonexistent/x.pt")):
        got = []
        for L in (tracec, torch):
            try:
                run(L)
            except Exception as e:      # noqa: BLE001 - comparing what each raises
                got.append((type(e).__name__, traceback.format_exception_only(e)[-1].strip()))
                back = pickle.loads(pickle.dumps(e))
                assert type(back).__name__ == type(e).__name__ and back.args == e.args
        assert got[0] == got[1]
