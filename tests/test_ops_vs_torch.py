"""Every op of API.md §1, forward and backward, against PyTorch.

Each case is ``fn(lib, *inputs)`` run once with ``lib = tracec`` and once
with ``lib = torch`` on the same random data; outputs must agree in value,
shape and dtype, and input gradients along a random cotangent must agree.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tracec
from _torch_ref import assert_same, rnd, run_both, torch

F = torch.nn.functional
R = np.random.default_rng(0)


def _tc_or_torch(tc_fn, th_fn):
    return lambda lib, *a: (tc_fn if lib is tracec else th_fn)(*a)


# --- elementwise --------------------------------------------------------------

UNARY = {
    "neg": (lambda L, x: -x, {}),
    "abs": (lambda L, x: L.abs(x), {}),
    "exp": (lambda L, x: L.exp(x), {}),
    "log": (lambda L, x: L.log(x), {"positive": True}),
    "sqrt": (lambda L, x: x.sqrt(), {"positive": True}),
    "rsqrt": (lambda L, x: L.rsqrt(x), {"positive": True}),
    "sin": (lambda L, x: L.sin(x), {}),
    "cos": (lambda L, x: x.cos(), {}),
    "tanh": (lambda L, x: L.tanh(x), {}),
    "sigmoid": (lambda L, x: L.sigmoid(x), {}),
    "relu": (lambda L, x: L.relu(x), {}),
    "relu_method": (lambda L, x: x.relu(), {}),
    "gelu": (_tc_or_torch(tracec.gelu, F.gelu), {}),
    "gelu_tanh": (_tc_or_torch(lambda x: tracec.gelu(x, approximate="tanh"),
                               lambda x: F.gelu(x, approximate="tanh")), {}),
    "silu": (_tc_or_torch(tracec.silu, F.silu), {}),
    "square": (lambda L, x: L.square(x), {}),
    "reciprocal": (lambda L, x: x.reciprocal(), {"positive": True}),
    "log1p": (lambda L, x: L.log1p(x), {"positive": True}),
    "expm1": (lambda L, x: L.expm1(x), {}),
    "erf": (lambda L, x: L.erf(x), {}),
    "sign": (lambda L, x: L.sign(x), {}),
    "pos": (lambda L, x: +x, {}),
    "pow_scalar2": (lambda L, x: x ** 2, {}),
    "pow_scalar3": (lambda L, x: L.pow(x, 3), {}),
    "pow_scalar_half": (lambda L, x: x ** 0.5, {"positive": True}),
    "pow_neg": (lambda L, x: x ** -1.5, {"positive": True}),
    "rpow": (lambda L, x: 2.0 ** x, {}),
    "clamp_both": (lambda L, x: L.clamp(x, -0.5, 0.7), {}),
    "clamp_min": (lambda L, x: x.clamp(min=0.1), {}),
    "clamp_max": (lambda L, x: x.clamp(max=0.1), {}),
    "add_scalar": (lambda L, x: x + 1.5, {}),
    "rsub_scalar": (lambda L, x: 1.5 - x, {}),
    "rdiv_scalar": (lambda L, x: 2 / x, {"positive": True}),
    "mul_int_scalar": (lambda L, x: 3 * x, {}),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    fn, kw = UNARY[name]
    run_both(fn, rnd(R, (3, 4), dtype, **kw))


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "relu", "gelu", "abs", "pow_scalar3"])
def test_unary_on_views(name):
    fn, kw = UNARY[name]
    # a transposed, sliced (non-contiguous) view, and a 0-d tensor
    run_both(lambda L, x: fn(L, x.t()[1:, ::2]), rnd(R, (5, 4), **kw))
    run_both(fn, rnd(R, (), **kw))


def test_clamp_on_the_boundary_passes_gradient():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0], np.float32)
    run_both(lambda L, x: L.clamp(x, -0.5, 0.5), x)
    run_both(lambda L, x: L.relu(x), x)


BINARY = {
    "add": lambda L, a, b: a + b,
    "sub": lambda L, a, b: a - b,
    "mul": lambda L, a, b: a * b,
    "div": lambda L, a, b: a / b,
    "add_fn_alpha": lambda L, a, b: L.add(a, b, alpha=2),
    "sub_method": lambda L, a, b: a.sub(b),
    "maximum": lambda L, a, b: L.maximum(a, b),
    "minimum": lambda L, a, b: L.minimum(a, b),
    "pow": lambda L, a, b: L.abs(a) ** b,
    "where": lambda L, a, b: L.where(a > b, a, b),
    "max_binary": lambda L, a, b: L.max(a, b),
}

SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)),
               ((1,), (3, 2)), ((4, 1), (1, 5))]


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(name, shapes):
    a = rnd(R, shapes[0], "float64")
    b = rnd(R, shapes[1], "float64")
    if name == "div":
        b = np.where(np.abs(b) < 0.3, 0.7, b)
    if name == "pow":
        a = np.abs(a) + 0.5
    run_both(BINARY[name], a, b)


def test_maximum_minimum_ties_split_gradient():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 1.0, 4.0])
    run_both(lambda L, a, b: L.maximum(a, b), a, b)
    run_both(lambda L, a, b: L.minimum(a, b), a, b)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a = rnd(R, (3, 4), "int64")
    b = rnd(R, (4,), "int64")
    fn = lambda L, a, b: getattr(L, op)(a, b)  # noqa: E731
    out, _ = run_both(fn, a, b, grad=False)
    assert out.dtype is tracec.bool
    ops = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__",
           "ge": "__ge__"}
    run_both(lambda L, a, b: getattr(a, ops[op])(b), a.astype("float32"),
             b.astype("float32"))
    run_both(lambda L, a: getattr(a, ops[op])(0.5), a.astype("float32"))
    # a float tensor compared with an int tensor promotes first
    run_both(lambda L, a, b: getattr(L, op)(a, b), a.astype("float32") + 0.5, b)


def test_logical_ops():
    a = rnd(R, (3, 4), "bool")
    b = rnd(R, (4,), "bool")
    run_both(lambda L, a, b: a & b, a, b, grad=False)
    run_both(lambda L, a, b: a | b, a, b, grad=False)
    run_both(lambda L, a: ~a, a, grad=False)
    run_both(lambda L, a, b: L.logical_and(a, b), a, b, grad=False)
    run_both(lambda L, a: L.logical_not(a), rnd(R, (3,), "int64"), grad=False)


# --- dtype promotion ------------------------------------------------------------

PROMOTION = [
    ("int*2.5", lambda L, i, f, b, z: i * 2.5),
    ("int*2", lambda L, i, f, b, z: i * 2),
    ("int/int", lambda L, i, f, b, z: i / (L.abs(i) + 1)),
    ("int/2", lambda L, i, f, b, z: i / 2),
    ("int+bool", lambda L, i, f, b, z: i + b),
    ("bool+bool", lambda L, i, f, b, z: b + b),
    ("bool*bool", lambda L, i, f, b, z: b * b),
    ("bool*2", lambda L, i, f, b, z: b * 2),
    ("bool+1.5", lambda L, i, f, b, z: b + 1.5),
    ("bool+True", lambda L, i, f, b, z: b + True),
    ("float**int_tensor", lambda L, i, f, b, z: f ** L.abs(i)),
    ("int_tensor**2", lambda L, i, f, b, z: i ** 2),
    ("int**float_scalar", lambda L, i, f, b, z: L.abs(i) ** 0.5),
    ("2**int", lambda L, i, f, b, z: 2 ** L.abs(i)),
    ("float+int", lambda L, i, f, b, z: f + i),
    ("int-float", lambda L, i, f, b, z: i - f),
    ("f32*f64_0d", lambda L, i, f, b, z: f * z),
    ("int*f64_0d", lambda L, i, f, b, z: i * z),
    ("0d*0d", lambda L, i, f, b, z: z * z.float()),
    ("f32*f64", lambda L, i, f, b, z: f * f.double()),
    ("int32+int64", lambda L, i, f, b, z: i.int() + i),
    ("int32*3", lambda L, i, f, b, z: i.int() * 3),
    ("int32*2.5", lambda L, i, f, b, z: i.int() * 2.5),
    ("half+float", lambda L, i, f, b, z: f.half() + f),
    ("half*2.5", lambda L, i, f, b, z: f.half() * 2.5),
    ("int_sum", lambda L, i, f, b, z: i.sum()),
    ("int32_sum", lambda L, i, f, b, z: i.int().sum(0)),
    ("bool_sum", lambda L, i, f, b, z: b.sum()),
    ("int_abs", lambda L, i, f, b, z: L.abs(-i)),
    ("int_neg", lambda L, i, f, b, z: -i),
    ("int_exp", lambda L, i, f, b, z: L.exp(i)),
    ("int_sqrt", lambda L, i, f, b, z: L.sqrt(L.abs(i))),
    ("int_max", lambda L, i, f, b, z: i.max()),
    ("int_maximum_float", lambda L, i, f, b, z: L.maximum(i, f)),
    ("int_where_float", lambda L, i, f, b, z: L.where(b, i, f)),
    ("where_scalars", lambda L, i, f, b, z: L.where(b, 1.0, 0.0)),
    ("where_int_scalar", lambda L, i, f, b, z: L.where(b, i, 0)),
    ("int_clamp", lambda L, i, f, b, z: L.clamp(i, -1, 2)),
    ("int_clamp_float", lambda L, i, f, b, z: L.clamp(i, min=0.5)),
    ("cat_mixed", lambda L, i, f, b, z: L.cat([i, f])),
    ("int_argmax", lambda L, i, f, b, z: (i * 10 + L.arange(4)).argmax(1)),
    ("float_times_true", lambda L, i, f, b, z: f * True),
    ("int_matmul", lambda L, i, f, b, z: i @ i.t()),
    ("mean_float64", lambda L, i, f, b, z: f.double().mean()),
]


@pytest.mark.parametrize("name,fn", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_dtype_promotion(name, fn):
    i = rnd(R, (3, 4), "int64")
    f = rnd(R, (3, 4), "float32", positive=True)
    b = rnd(R, (3, 4), "bool")
    z = np.array(1.25)  # float64 0-d
    # mixed float32/float64 graphs reduce in float32: float32 tolerance
    run_both(fn, i, f, b, z, tol=dict(rtol=1e-3, atol=1e-3) if "half" in name
             else dict(rtol=1e-5, atol=1e-5))


def test_scalar_tensor_promotion_with_0d():
    # a 0-d int tensor with a Python float: the float category wins
    run_both(lambda L, z: z * 2.5, np.array(3))
    run_both(lambda L, z: z + True, np.array(3))
    run_both(lambda L, z, f: z + f, np.array(3), rnd(R, (2,), "float64"))


def test_integer_negative_power_like_torch():
    # a tensor exponent truncates (torch: [1, 2]); a Python-int one raises
    run_both(lambda L, a, b: a ** b, np.array([1, 2, -1, 0, 3]), np.array([-1, 1, -3, -1, -2]))
    assert (tracec.tensor([1, 2]) ** tracec.tensor([-1, 1])).tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="negative integer powers"):
        tracec.tensor([1, 2]) ** -1


# --- reductions -------------------------------------------------------------------

DIMS = [None, 0, 1, -1, (0, 2), (-1, 0), (0, 1, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "var", "std", "logsumexp", "amax", "amin",
                                "var_unbiased_false", "std_correction0"])
def test_reductions(op, dim, keepdim):
    x = rnd(R, (2, 3, 4), "float64")
    if dim is None and op in ("logsumexp",):
        pytest.skip("logsumexp needs dim")
    if op == "var_unbiased_false":
        def fn(L, x):
            return x.var(dim, unbiased=False, keepdim=keepdim) if dim is not None else \
                x.var(unbiased=False)
    elif op == "std_correction0":
        def fn(L, x):
            return L.std(x, dim, keepdim=keepdim, correction=0) if dim is not None else \
                L.std(x, correction=0)
    elif dim is None:
        def fn(L, x):
            return getattr(L, op)(x)
    else:
        def fn(L, x):
            return getattr(L, op)(x, dim, keepdim=keepdim)
    run_both(fn, x)


def test_reductions_float32_and_ties():
    x = rnd(R, (4, 5), "float32")
    run_both(lambda L, x: x.sum(1), x)
    run_both(lambda L, x: x.mean((0, 1), keepdim=True), x)
    t = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    run_both(lambda L, x: x.max(), t)
    run_both(lambda L, x: x.min(), t)
    run_both(lambda L, x: L.amax(x, 1), t)
    run_both(lambda L, x: L.amax(x, (0, 1)), t)
    run_both(lambda L, x: x.sum(dim=(), keepdim=False) if L is torch else x.sum(), t)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_dim_namedtuple(op, dim, keepdim):
    x = rnd(R, (3, 4, 5), "float64")
    out, ref = run_both(lambda L, x: getattr(L, op)(x, dim, keepdim=keepdim), x)
    assert out.values is out[0] and out.indices is out[1]
    assert out.indices.dtype is tracec.int64
    run_both(lambda L, x: getattr(x, op)(dim=dim, keepdim=keepdim).values, x)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(op, dim, keepdim):
    x = rnd(R, (3, 4), "float32")
    run_both(lambda L, x: getattr(L, op)(x, dim, keepdim=keepdim), x)
    run_both(lambda L, x: getattr(x, op)(), x)


def test_reductions_of_0d_and_ints():
    run_both(lambda L, x: x.sum(), np.array(2.5))
    run_both(lambda L, x: x.sum(0), np.array(2.5))
    run_both(lambda L, x: x.mean(), np.array(2.5))
    run_both(lambda L, x: x.max(), np.array(2.5))
    run_both(lambda L, x: x.sum(1, keepdim=True), rnd(R, (3, 4), "int64"))
    run_both(lambda L, x: x.argmax(), np.array(2.5))
    run_both(lambda L, x: x.sum(dtype=L.float64), rnd(R, (3, 4), "int64"))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, dim):
    x = rnd(R, (3, 4, 2), "float32") * 5
    run_both(lambda L, x: getattr(L, op)(x, dim), x)
    run_both(lambda L, x: getattr(x, op)(dim), x.astype("float64"))
    # very large and -inf logits stay finite/ exact
    big = np.array([[1000.0, 0.0, -1000.0], [-np.inf, 0.0, 1.0]], np.float32)
    run_both(lambda L, x: getattr(L, op)(x, -1), big)


def test_logsumexp_large_and_inf():
    big = np.array([[1000.0, 1000.0], [-np.inf, 0.0], [5.0, -1.0]])
    run_both(lambda L, x: L.logsumexp(x, 1), big)
    run_both(lambda L, x: L.logsumexp(x, 1, keepdim=True), big)


# --- matmul ------------------------------------------------------------------------

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
                 ((2, 1, 2, 3), (4, 3, 2)), ((3,), (5, 3, 4)), ((5, 2, 3), (3,)),
                 ((1, 3), (3, 1))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, dtype):
    a, b = rnd(R, shapes[0], dtype), rnd(R, shapes[1], dtype)
    run_both(lambda L, a, b: a @ b, a, b, tol=dict(rtol=1e-4, atol=1e-5))
    run_both(lambda L, a, b: L.matmul(a, b), a, b, tol=dict(rtol=1e-4, atol=1e-5))


def test_matmul_transposed_views_and_aliases():
    a, b = rnd(R, (4, 3)), rnd(R, (5, 4))
    run_both(lambda L, a, b: a.t() @ b.T, a, b, tol=dict(rtol=1e-4, atol=1e-5))
    run_both(lambda L, a, b: L.mm(a, b.t()[:, :4]), rnd(R, (3, 4)), b,
             tol=dict(rtol=1e-4, atol=1e-5))
    run_both(lambda L, a, b: L.bmm(a, b), rnd(R, (2, 3, 4)), rnd(R, (2, 4, 5)),
             tol=dict(rtol=1e-4, atol=1e-5))
    run_both(lambda L, a, b: L.dot(a, b), rnd(R, (4,)), rnd(R, (4,)))
    run_both(lambda L, a, b: L.outer(a, b), rnd(R, (4,)), rnd(R, (3,)))


# --- shapes ------------------------------------------------------------------------

SHAPE_OPS = {
    "reshape": lambda L, x: x.reshape(4, 6),
    "reshape_tuple": lambda L, x: x.reshape((2, -1)),
    "reshape_fn": lambda L, x: L.reshape(x, (-1,)),
    "view_-1": lambda L, x: x.view(-1),
    "view_3": lambda L, x: x.view(2, 3, 4).view(6, -1),
    "view_as": lambda L, x: x.view_as(x.reshape(4, 6)),
    "permute": lambda L, x: x.permute(2, 0, 1),
    "permute_neg": lambda L, x: L.permute(x, (-1, 0, 1)),
    "transpose": lambda L, x: x.transpose(0, 2),
    "transpose_neg": lambda L, x: L.transpose(x, -1, -2),
    "t_of_2d": lambda L, x: x.reshape(4, 6).t(),
    "T": lambda L, x: x.T if L is tracec else x.permute(2, 1, 0),
    "mT": lambda L, x: x.mT,
    "unsqueeze": lambda L, x: x.unsqueeze(1),
    "unsqueeze_neg": lambda L, x: L.unsqueeze(x, -1),
    "squeeze_all": lambda L, x: x.reshape(1, 2, 1, 12).squeeze(),
    "squeeze_dim": lambda L, x: x.reshape(1, 2, 1, 12).squeeze(2),
    "squeeze_noop": lambda L, x: x.squeeze(0),
    "squeeze_neg": lambda L, x: x.reshape(2, 12, 1).squeeze(-1),
    "squeeze_tuple": lambda L, x: x.reshape(1, 2, 1, 12).squeeze((0, 2)),
    "expand": lambda L, x: x[:, :1].expand(5, 2, 3, 4),
    "expand_-1": lambda L, x: x[:1].expand(5, -1, -1),
    "expand_as": lambda L, x: x[:1].expand_as(x),
    "broadcast_to": lambda L, x: L.broadcast_to(x[0, 0], (3, 4)),
    "flatten": lambda L, x: x.flatten(),
    "flatten_1": lambda L, x: L.flatten(x, 1),
    "flatten_01": lambda L, x: x.flatten(0, 1),
    "flatten_neg": lambda L, x: x.flatten(-2, -1),
    "unflatten": lambda L, x: x.unflatten(2, (2, 2)),
    "contiguous": lambda L, x: x.transpose(0, 1).contiguous().view(-1),
    "reshape_of_transposed": lambda L, x: x.transpose(0, 1).reshape(-1),
    "clone": lambda L, x: x.clone(),
    "unbind": lambda L, x: x.unbind(1),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_ops(name):
    run_both(SHAPE_OPS[name], rnd(R, (2, 3, 4)))


def test_views_share_memory():
    x = tracec.arange(12.0).reshape(3, 4)
    for v in (x.view(-1), x.reshape(12), x.t(), x.permute(1, 0), x[1], x[:, 1:3], x[None],
              x.unsqueeze(0), x.flatten(), x[..., 0], x.expand(2, 3, 4), x.detach(),
              x.view(2, 6).view(12)):
        assert np.shares_memory(v.numpy(), x.numpy())
    assert not np.shares_memory(x.t().reshape(-1).numpy(), x.numpy())
    assert not np.shares_memory(x.clone().numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="view"):
        x.t().view(-1)


CAT_OPS = {
    "cat0": lambda L, a, b, c: L.cat([a, b, c]),
    "cat1": lambda L, a, b, c: L.cat([a.transpose(0, 1), b.transpose(0, 1)], dim=1),
    "cat_neg": lambda L, a, b, c: L.cat((a, c), -2),
    "stack0": lambda L, a, b, c: L.stack([a, b]),
    "stack1": lambda L, a, b, c: L.stack([a, b], 1),
    "stack_neg": lambda L, a, b, c: L.stack([a, b, a], -1),
    "split_int": lambda L, a, b, c: a.split(2, dim=1),
    "split_list": lambda L, a, b, c: L.split(a, [1, 3, 1], 1),
    "split_neg": lambda L, a, b, c: a.split(1, -1),
    "chunk": lambda L, a, b, c: a.chunk(3, 1),
    "chunk_uneven": lambda L, a, b, c: L.chunk(b, 2, 0),
    "chunk_more_than_size": lambda L, a, b, c: a.chunk(7, 1),
}


@pytest.mark.parametrize("name", sorted(CAT_OPS))
def test_cat_stack_split(name):
    run_both(CAT_OPS[name], rnd(R, (3, 5, 2)), rnd(R, (3, 5, 2)), rnd(R, (3, 5, 2)))


def test_cat_different_sizes():
    run_both(lambda L, a, b: L.cat([a, b], 1), rnd(R, (3, 2)), rnd(R, (3, 4)))
    run_both(lambda L, a, b: L.cat([a, b]), rnd(R, (0, 2)), rnd(R, (3, 2)))


# --- indexing ----------------------------------------------------------------------

INDEX = {
    "int": lambda L, x: x[1],
    "neg_int": lambda L, x: x[-1, -2],
    "slice": lambda L, x: x[1:3],
    "slice_step": lambda L, x: x[::2, 1::3],
    "slice_neg": lambda L, x: x[-3:-1, :-1],
    "slice_clip": lambda L, x: x[2:100, -100:2],
    "slice_empty": lambda L, x: x[3:1],
    "ellipsis": lambda L, x: x[..., 1],
    "ellipsis_mid": lambda L, x: x[0, ..., 2],
    "none": lambda L, x: x[None, :, None, 1],
    "all_int": lambda L, x: x[1, 2, 3],
    "int_list": lambda L, x: x[[0, 2, 2]],
    "neg_int_list": lambda L, x: x[[-1, 0]],
    "int_tensor": lambda L, x: x[L.tensor([[0, 1], [3, 3]])],
    "int_tensor_dim1": lambda L, x: x[:, L.tensor([2, 0, 2])],
    "two_int_tensors": lambda L, x: x[L.tensor([0, 1, 3]), L.tensor([2, 2, 0])],
    "adv_broadcast": lambda L, x: x[L.tensor([[0], [1]]), L.tensor([1, 2, 0])],
    "adv_with_slice": lambda L, x: x[1:, L.tensor([0, 2])],
    "adv_separated": lambda L, x: x[L.tensor([0, 1]), :, L.tensor([1, 0])],
    "adv_and_int": lambda L, x: x[L.tensor([0, 1]), 1],
    "bool_mask": lambda L, x: x[x > 0],
    "bool_mask_rows": lambda L, x: x[L.tensor([True, False, True, True])],
    "bool_mask_2d": lambda L, x: x[(x > 0)[:, :, 0]],
    "bool_mask_list": lambda L, x: x[[True, False, True, False]],
    "int_then_adv": lambda L, x: x[2][L.tensor([0, 0])],
    "int_tensor_0d": lambda L, x: x[L.tensor(2)],
}


@pytest.mark.parametrize("name", sorted(INDEX))
def test_getitem(name):
    run_both(INDEX[name], rnd(R, (4, 3, 4), "float64"))


def test_getitem_int_dtype_and_bool_scalar():
    run_both(lambda L, x: x[x > 0], rnd(R, (4, 3), "int64"))
    run_both(lambda L, x: x[1:, 0], rnd(R, (4, 3), "bool"))
    run_both(lambda L, x: x[L.tensor([1, 0], dtype=L.int32)], rnd(R, (4, 3)))


def test_basic_index_is_view():
    x = tracec.zeros(3, 4)
    x[1][2] = 5.0
    x[:, 0] += 1
    ref = torch.zeros(3, 4)
    ref[1][2] = 5.0
    ref[:, 0] += 1
    assert_same(x, ref)
    adv = x[[0, 1]]
    adv[0] = 9.0  # advanced indexing copies
    assert x[0, 0].item() == 1.0


SETITEM = {
    "int": lambda L, x, v: x.__setitem__(1, 7.0),
    "slice_scalar": lambda L, x, v: x.__setitem__((slice(None), slice(1, 3)), -1.0),
    "slice_tensor": lambda L, x, v: x.__setitem__((slice(0, 2), 0), v[:2]),
    "broadcast_row": lambda L, x, v: x.__setitem__(slice(1, 3), v),
    "ellipsis": lambda L, x, v: x.__setitem__((Ellipsis, 1), 3.0),
    "step": lambda L, x, v: x.__setitem__((slice(None, None, 2),), v),
    "int_list": lambda L, x, v: x.__setitem__([0, 2], v),
    "int_tensor_pair": lambda L, x, v: x.__setitem__((L.tensor([0, 3]), L.tensor([1, 2])), 5.0),
    "bool_mask": lambda L, x, v: x.__setitem__(x > 0, 0.0),
    "bool_mask_rows": lambda L, x, v: x.__setitem__(L.tensor([True, False, False, True]), v),
    "int_value_into_float": lambda L, x, v: x.__setitem__(0, 3),
}


@pytest.mark.parametrize("name", sorted(SETITEM))
def test_setitem(name):
    def fn(L, x, v):
        x = x.clone()
        SETITEM[name](L, x, v)
        return x
    run_both(fn, rnd(R, (4, 3)), rnd(R, (3,)), grad=False)


def test_setitem_int_tensor():
    def fn(L, x):
        x = x.clone()
        x[1:3, 0] = 9
        x[x < 0] = 0
        return x
    run_both(fn, rnd(R, (4, 3), "int64"))


def test_setitem_with_grad_through_value():
    def fn(L, x, v):
        a = x * 1
        a[0] = v * 2
        a[1:, 1] = v[:2] ** 2
        return a
    run_both(fn, rnd(R, (3, 3)), rnd(R, (3,)))


ADV_SETITEM_GRAD = {
    "mask_scalar": lambda L, a, v: a.__setitem__(a > 0, 0.0),
    "mask_tensor": lambda L, a, v: a.__setitem__(a[:, 0] > 0, v * 2),
    "int_tensor_rows": lambda L, a, v: a.__setitem__(L.tensor([2, 0]), v.exp()),
    "int_pair": lambda L, a, v: a.__setitem__((L.tensor([0, 3]), L.tensor([1, 2])), v[:2]),
    "list_and_slice": lambda L, a, v: a.__setitem__(([1, 3], slice(1, None)), v[1:] * v[0]),
    "neg_index": lambda L, a, v: a.__setitem__(L.tensor([-1]), v),
    "on_a_view": lambda L, a, v: a[1:].__setitem__(L.tensor([0, 2]), v.sin()),
}


@pytest.mark.parametrize("name", sorted(ADV_SETITEM_GRAD))
def test_setitem_advanced_with_grad(name):
    def fn(L, x, v):
        a = x * 1
        ADV_SETITEM_GRAD[name](L, a, v)
        return a * a
    run_both(fn, rnd(R, (4, 3), "float64"), rnd(R, (3,), "float64"))


def test_masked_fill_and_where():
    x = rnd(R, (3, 4))
    m = rnd(R, (3, 4), "bool")
    run_both(lambda L, x, m: x.masked_fill(m, -1.0), x, m)
    run_both(lambda L, x, m: L.masked_fill(x, m[0], 0.0), x, m)
    # a fully masked row gives nan in both
    run_both(lambda L, x, m: x.masked_fill(m, float("-inf")).softmax(-1), x, m[:1])
    run_both(lambda L, x, m: x.masked_fill(m, L.tensor(2.0)), x, m)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    x = rnd(R, (4, 5), "float64")
    idx = R.integers(0, x.shape[dim], size=(4, 5))
    run_both(lambda L, x, i: L.gather(x, dim, i), x, idx)
    run_both(lambda L, x, i: x.gather(dim, i[:3, :2]), x, idx)
    # repeated indices accumulate gradient
    run_both(lambda L, x, i: x.gather(1, i), x, np.zeros((4, 3), np.int64))


def test_one_hot():
    i = np.array([[0, 2], [1, 4]])
    run_both(_tc_or_torch(tracec.shape_ops.one_hot, F.one_hot), i, grad=False)
    run_both(_tc_or_torch(lambda t: tracec.shape_ops.one_hot(t, 6),
                          lambda t: F.one_hot(t, 6)), i, grad=False)


def test_scatter_add():
    x = rnd(R, (3, 4), "float64")
    idx = R.integers(0, 3, size=(2, 4))
    src = rnd(R, (2, 4), "float64")
    run_both(lambda L, x, i, s: x.scatter_add(0, i, s), x, idx, src)


# --- in-place -----------------------------------------------------------------------

INPLACE = {
    "add_": lambda L, a, b: a.add_(b),
    "add_alpha": lambda L, a, b: a.add_(b, alpha=0.5),
    "sub_": lambda L, a, b: a.sub_(2.0),
    "mul_": lambda L, a, b: a.mul_(b),
    "div_": lambda L, a, b: a.div_(2),
    "zero_": lambda L, a, b: a.zero_(),
    "fill_": lambda L, a, b: a.fill_(3.5),
    "fill_tensor": lambda L, a, b: a.fill_(b[0, 0]),
    "copy_": lambda L, a, b: a.copy_(b),
    "copy_broadcast": lambda L, a, b: a.copy_(b[0]),
    "copy_double": lambda L, a, b: a.copy_(b.double()),
    "clamp_": lambda L, a, b: a.clamp_(-0.2, 0.3),
    "iadd": lambda L, a, b: a.__iadd__(b),
    "isub": lambda L, a, b: a.__isub__(b[0]),
    "imul": lambda L, a, b: a.__imul__(3),
    "itruediv": lambda L, a, b: a.__itruediv__(b),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace(name):
    def fn(L, x, y):
        a = x * 1.0
        b = y + 0.0
        r = INPLACE[name](L, a, b)
        assert r is a
        return a * b
    run_both(fn, rnd(R, (3, 4), positive=True), rnd(R, (3, 4), positive=True))


def test_inplace_on_view_writes_base():
    def fn(L, x):
        a = x * 1
        a[0].mul_(2)
        a.view(-1)[3:5].add_(10)
        a.t()[1] *= 3
        return a
    run_both(fn, rnd(R, (3, 4)))


def test_inplace_int_and_float_into_int():
    def fn(L, x):
        x = x.clone()
        x += 2
        x.mul_(3)
        return x
    run_both(fn, rnd(R, (3,), "int64"))
    with pytest.raises(RuntimeError):
        tracec.tensor([1, 2]).add_(0.5)
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).add_(0.5)


# --- creation and conversion ---------------------------------------------------------

CREATION = {
    "arange_int": lambda L: L.arange(5),
    "arange_start_end": lambda L: L.arange(2, 9, 3),
    "arange_float": lambda L: L.arange(0, 1, 0.1),
    "arange_float_end": lambda L: L.arange(5.0),
    "arange_neg_step": lambda L: L.arange(5, 0, -1),
    "arange_dtype": lambda L: L.arange(4, dtype=L.float64),
    "linspace": lambda L: L.linspace(0, 1, 7),
    "linspace_f64": lambda L: L.linspace(-1, 1, 5, dtype=L.float64),
    "linspace_1": lambda L: L.linspace(2, 3, 1),
    "eye": lambda L: L.eye(3),
    "eye_rect": lambda L: L.eye(2, 4),
    "eye_int": lambda L: L.eye(3, dtype=L.int64),
    "full_float": lambda L: L.full((2, 3), 1.5),
    "full_int": lambda L: L.full((2,), 7),
    "full_bool": lambda L: L.full((2,), True),
    "full_dtype": lambda L: L.full([2, 2], 2, dtype=L.float32),
    "zeros": lambda L: L.zeros(2, 3),
    "zeros_tuple": lambda L: L.zeros((2, 3), dtype=L.int64),
    "ones": lambda L: L.ones(4),
    "ones_0d": lambda L: L.ones(()),
    "empty_shape": lambda L: L.empty(2, 0).shape,
    "zeros_like": lambda L: L.zeros_like(L.ones(2, 3, dtype=L.float64)),
    "ones_like": lambda L: L.ones_like(L.arange(3)),
    "full_like": lambda L: L.full_like(L.arange(3), 2),
    "full_like_float": lambda L: L.full_like(L.ones(3), 2.5),
    "zeros_like_dtype": lambda L: L.zeros_like(L.arange(3), dtype=L.float32),
    "tensor_float": lambda L: L.tensor([1.0, 2.0]),
    "tensor_int": lambda L: L.tensor([[1, 2], [3, 4]]),
    "tensor_bool": lambda L: L.tensor([True, False]),
    "tensor_mixed": lambda L: L.tensor([1, 2.5]),
    "tensor_scalar": lambda L: L.tensor(3),
    "tensor_dtype": lambda L: L.tensor([1, 2], dtype=L.float64),
    "tensor_of_tensors": lambda L: L.tensor([L.tensor(1.0), L.tensor(2.0)]),
    "tensor_np_f64": lambda L: L.tensor(np.arange(3.0)),
    "tensor_np_i32": lambda L: L.tensor(np.arange(3, dtype=np.int32)),
    "tensor_empty": lambda L: L.tensor([]),
    "randn_shape": lambda L: (L.randn(2, 3).shape, L.randn(2, 3).dtype is L.float32,
                              L.rand(4, dtype=L.float64).dtype is L.float64,
                              L.randint(0, 5, (3,)).dtype is L.int64),
    "randn_like": lambda L: L.randn_like(L.zeros(2, dtype=L.float64)).dtype is L.float64,
}


@pytest.mark.parametrize("name", sorted(CREATION))
def test_creation(name):
    run_both(lambda L: CREATION[name](L), grad=False)


def test_creation_requires_grad_and_leaf():
    for t in (tracec.zeros(2, requires_grad=True), tracec.ones(2, 2, requires_grad=True),
              tracec.tensor([1.0], requires_grad=True), tracec.randn(3, requires_grad=True),
              tracec.full((2,), 1.0, requires_grad=True), tracec.linspace(0, 1, 3,
                                                                        requires_grad=True),
              tracec.arange(3.0, requires_grad=True), tracec.eye(2, requires_grad=True)):
        assert t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None
    with pytest.raises(RuntimeError, match="floating point"):
        tracec.tensor([1, 2], requires_grad=True)


def test_random_seeding_and_ranges():
    tracec.manual_seed(3)
    a = tracec.rand(100)
    tracec.manual_seed(3)
    b = tracec.rand(100)
    assert np.array_equal(a.numpy(), b.numpy())
    assert 0 <= a.min().item() and a.max().item() < 1
    r = tracec.randint(2, 5, (200,))
    assert set(np.unique(r.numpy())) == {2, 3, 4}
    z = tracec.randn(4000, dtype=tracec.float64)
    assert abs(z.mean().item()) < 0.1 and abs(z.std().item() - 1) < 0.1


def test_item_tolist_numpy_from_numpy():
    x = tracec.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert x[0, 0].item() == 1.5 and isinstance(x[0, 0].item(), float)
    assert tracec.tensor([3]).item() == 3 and isinstance(tracec.tensor([3]).item(), int)
    assert isinstance(tracec.tensor(True).item(), bool)
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert tracec.tensor(2).tolist() == 2
    assert tracec.arange(3).tolist() == [0, 1, 2]
    n = x.numpy()
    assert n.dtype == np.float32
    n[0, 0] = 9.0
    assert x[0, 0].item() == 9.0  # numpy() shares memory
    x.add_(1)
    assert n[0, 0] == 10.0
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = tracec.from_numpy(a)
    assert t.dtype is tracec.float64
    a[0, 0] = -1
    assert t[0, 0].item() == -1
    t[1, 1] = 42
    assert a[1, 1] == 42
    assert tracec.from_numpy(np.arange(3)).dtype is tracec.int64
    assert tracec.from_numpy(np.zeros(2, np.float32)).dtype is tracec.float32
    with pytest.raises(RuntimeError, match="detach"):
        tracec.ones(2, requires_grad=True).numpy()
    assert float(tracec.tensor([2.5])) == 2.5 and int(tracec.tensor(3.7)) == 3
    with pytest.raises(RuntimeError):
        tracec.ones(2).item()


def test_conversions():
    x = tracec.tensor([1.7, -2.2], requires_grad=True)
    assert x.long().dtype is tracec.int64 and x.long().tolist() == [1, -2]
    assert x.int().dtype is tracec.int32
    assert x.double().dtype is tracec.float64 and x.double().requires_grad
    assert x.float() is x
    assert x.to(tracec.float64).dtype is tracec.float64
    assert x.to("cpu") is x and x.cpu() is x
    assert x.to(tracec.device("cpu"), tracec.float16).dtype is tracec.float16
    assert x.half().dtype is tracec.half and x.bool().dtype is tracec.bool
    assert x.detach().requires_grad is False
    assert x.type_as(tracec.tensor([1])).dtype is tracec.int64
    x.double().sum().backward()
    assert x.grad.dtype is tracec.float32
    assert x.shape == (2,) and x.size() == (2,) and x.size(0) == 2 and x.size(-1) == 2
    assert x.ndim == 1 and x.dim() == 1 and x.numel() == 2 and len(x) == 2
    assert x.device == tracec.device("cpu") and str(x.device) == "cpu"
    assert x.dtype is tracec.float and tracec.double is tracec.float64
    assert tracec.long is tracec.int64 and tracec.int is tracec.int32
    assert tracec.half is tracec.float16
    y = tracec.ones(2, 3)
    assert y.T.shape == (3, 2) and y.data.requires_grad is False
    assert y.contiguous() is y


def test_bfloat16_rounding():
    run_both(lambda L, x: (x.to(L.bfloat16) * 3).float(), rnd(R, (8,)), grad=False)
    run_both(lambda L, x: (x.to(L.bfloat16) + x.to(L.bfloat16)), rnd(R, (8,)), grad=False)


# --- hypothesis: shapes and broadcasting --------------------------------------------

dims = st.integers(1, 4)
shape_st = st.lists(dims, min_size=0, max_size=4).map(tuple)


@st.composite
def broadcastable_pair(draw):
    a = draw(shape_st)
    b = []
    for d in a[draw(st.integers(0, len(a))):]:
        b.append(draw(st.sampled_from([1, d])))
    if draw(st.booleans()):
        a, b = tuple(b), a
    return tuple(a), tuple(b)


HYP = settings(max_examples=25, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])


@HYP
@given(broadcastable_pair(), st.sampled_from(["add", "sub", "mul", "div", "maximum", "where"]))
def test_hyp_broadcast_binary(shapes, op):
    rng = np.random.default_rng(hash(shapes) % 2 ** 32)
    a, b = rnd(rng, shapes[0], "float64"), rnd(rng, shapes[1], "float64", positive=True)
    fn = BINARY[op]
    run_both(fn, a, b)


@HYP
@given(shape_st, st.data())
def test_hyp_reduce_any_dims(shape, data):
    nd = len(shape)
    dims_ = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda d: d % nd,
                               max_size=nd) if nd else st.just([]))
    keepdim = data.draw(st.booleans())
    op = data.draw(st.sampled_from(["sum", "mean", "amax", "logsumexp"]))
    x = rnd(np.random.default_rng(len(shape)), shape, "float64")
    if not dims_:
        if op == "logsumexp":
            return
        run_both(lambda L, x: getattr(L, op)(x), x)
    else:
        run_both(lambda L, x: getattr(L, op)(x, tuple(dims_), keepdim=keepdim), x)


@HYP
@given(shape_st, st.data())
def test_hyp_reshape_permute(shape, data):
    nd = len(shape)
    perm = data.draw(st.permutations(list(range(nd))))
    x = rnd(np.random.default_rng(nd), shape, "float64")
    run_both(lambda L, x: x.permute(*perm).reshape(-1).reshape(*reversed(shape)) if nd
             else x.reshape(-1), x)


@HYP
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2),
       st.booleans())
def test_hyp_matmul_batched(m, k, n, batch, vec)->None:
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    bs = (2,) * batch
    a = rnd(rng, bs + (m, k), "float64")
    b = rnd(rng, (1,) * min(batch, 1) + (k, n) if not vec else (k,), "float64")
    run_both(lambda L, a, b: a @ b, a, b)


def test_format_of_a_0d_tensor_matches_torch():
    """'{:+.2f}'.format(t) formats a 0-d tensor as its number (PyTorch's
    Tensor.__format__); other tensors and Parameters format as objects."""
    import tracec
    for lib in (tracec, torch):
        t = lib.tensor(-2.2567, requires_grad=True) * 1
        assert "{:+.2f}".format(t) == "-2.26" and f"{t:.1e}" == "-2.3e+00"
        with pytest.raises(TypeError):
            "{:.2f}".format(lib.ones(2))
        with pytest.raises(TypeError):
            "{:.2f}".format(lib.nn.Parameter(lib.tensor(1.0)))
