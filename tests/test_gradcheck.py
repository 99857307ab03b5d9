"""Every primitive's rules, checked against each other.

* ``SAMPLES`` has one entry per primitive in ``tracec.ops.PRIMITIVES``:
  a primitive added without one fails ``test_every_primitive_has_a_sample``.
* Each primitive has a shape rule, a dtype rule, a NumPy impl and, if
  differentiable, a VJP; the rules agree with what the impl returns.
* Differentiable primitives pass ``tracec.autograd.gradcheck`` in float64
  and a VJP check along random directions, and their VJPs are built from
  primitives only (every cotangent they return was bound as a primitive).
"""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from tracec.autograd import GradcheckError, gradcheck
from tracec.ops import PRIMITIVES, Aval, ShapeError
from tracec.tensor import RECORDERS

_WORLD = __import__("mpi4py.MPI").MPI.COMM_WORLD.py2f()   # a world of one process

F64 = "float64"


def _r(shape, *, positive=False, lo=-1.5, hi=1.5, distinct=False, seed=None):
    rng = np.random.default_rng(seed if seed is not None else hash(shape) % 1000)
    if distinct:  # no ties (max/min/abs kinks)
        n = int(np.prod(shape))
        vals = rng.permutation(n).astype(F64) / max(n, 1) * 2 - 1 + 0.05
        return (vals * 1.3 + rng.uniform(-0.01, 0.01, n)).reshape(shape)
    if positive:
        return rng.uniform(0.5, 2.0, size=shape)
    return rng.uniform(lo, hi, size=shape)


def _idx(shape, n, seed=0):
    return np.random.default_rng(seed).integers(0, n, size=shape).astype(np.int64)


def _mask(shape, seed=0):
    return np.random.default_rng(seed).random(shape) < 0.5


# name -> list of (args, params); numpy float arrays become float64 tensors
# that require grad, other arrays tensors that do not, other values stay.
SAMPLES = {
    "neg": [((_r((3, 4)),), {})],
    "stop_gradient": [((_r((3, 4)),), {})],
    "exp": [((_r((3, 4)),), {})],
    "log": [((_r((3, 4), positive=True),), {})],
    "expm1": [((_r((3, 4)),), {})],
    "log1p": [((_r((3, 4), positive=True),), {})],
    "sqrt": [((_r((3, 4), positive=True),), {})],
    "rsqrt": [((_r((3, 4), positive=True),), {})],
    "sin": [((_r((3, 4)),), {})],
    "cos": [((_r((3, 4)),), {})],
    "tanh": [((_r((3, 4)),), {})],
    "logistic": [((_r((3, 4), lo=-4, hi=4),), {})],
    "abs": [((_r((3, 4), distinct=True),), {})],
    "sign": [((_r((3, 4), distinct=True),), {})],
    "erf": [((_r((3, 4)),), {})],
    "logical_not": [((_mask((3, 4)),), {})],
    "add": [((_r((3, 1)), _r((4,))), {}), ((_r((2, 3)), 2.5), {})],
    "sub": [((_r((3, 1)), _r((2, 1, 4))), {}), ((1.5, _r((3,))), {})],
    "mul": [((_r((3, 4)), _r((4,))), {}), ((_r((3,)), -2.0), {})],
    "div": [((_r((3, 4)), _r((3, 1), positive=True)), {}), ((2.0, _r((3,), positive=True)), {})],
    "pow": [((_r((3, 4), positive=True), _r((4,))), {}), ((_r((3,), positive=True), 3.0), {}),
            ((2.0, _r((3,))), {})],
    "maximum": [((_r((3, 4), distinct=True, seed=1), _r((4,), distinct=True, seed=2)), {})],
    "minimum": [((_r((3, 4), distinct=True, seed=3), _r((3, 1), distinct=True, seed=4)), {})],
    # quotients in (1.2, 1.9): away from the jumps at integers
    "fmod": [((_r((3, 4), lo=2.7, hi=3.3), _r((4,), lo=1.8, hi=2.2)), {}),
             ((_r((3,), lo=-3.3, hi=-2.7), 2.0), {})],
    "eq": [((_idx((3, 4), 3), _idx((4,), 3)), {})],
    "bitwise_and": [((_idx((3, 4), 7), _idx((4,), 7, seed=1)), {})],
    "bitwise_or": [((_idx((3, 4), 7), _idx((4,), 7, seed=1)), {})],
    "bitwise_xor": [((_idx((3, 4), 7), _idx((4,), 7, seed=1)), {})],
    "ne": [((_r((3, 4)), _r((3, 4))), {})],
    "lt": [((_r((3, 4)), _r((4,))), {})],
    "le": [((_r((3, 4)), _r((4,))), {})],
    "gt": [((_r((3, 4)), 0.0), {})],
    "ge": [((_r((3, 4)), _r((4,))), {})],
    "logical_and": [((_mask((3, 4)), _mask((4,), 1)), {})],
    "logical_or": [((_mask((3, 4)), _mask((3, 1), 1)), {})],
    "where": [((_mask((3, 4)), _r((3, 4)), _r((4,))), {}), ((_mask((3,)), _r((3,)), 0.0), {})],
    # check: x (broadcast with an all-true condition); its gradient is g's.
    "check": [((_r((3, 4)), np.ones((4,), bool)), {"message": "m"}),
              ((_r((3,)), np.ones((2, 1), bool)), {"message": "m"})],
    "cast": [((_r((3, 4)),), {"dtype": dt.float64}), ((_idx((3,), 4),), {"dtype": dt.float64}),
             ((_r((2, 3)),), {"dtype": dt.float32})],
    "reduce_sum": [((_r((2, 3, 4)),), {"axes": (0, 2)}), ((_r((3,)),), {"axes": (0,)}),
                   ((_r(()),), {"axes": ()})],
    "reduce_max": [((_r((2, 3, 4), distinct=True),), {"axes": (1,)}),
                   ((_r((3, 4), distinct=True),), {"axes": (0, 1)})],
    "reduce_min": [((_r((2, 3, 4), distinct=True),), {"axes": (0, 2)})],
    "argmax": [((_r((3, 4), distinct=True),), {"axis": 1})],
    "argmin": [((_r((3, 4), distinct=True),), {"axis": 0})],
    "argsort": [((_r((3, 4), distinct=True),), {"axis": 1, "descending": False})],
    "matmul": [((_r((3, 4)), _r((4, 2))), {}), ((_r((2, 1, 3, 4)), _r((3, 4, 2))), {}),
               # one B for a batch of A (its gradient: one product over all rows)
               ((_r((2, 3, 4)), _r((4, 2))), {}), ((_r((2, 3, 4)), _r((1, 4, 2))), {})],
    "reshape": [((_r((2, 6)),), {"shape": (3, 4)}), ((_r((1,)),), {"shape": ()})],
    "transpose": [((_r((2, 3, 4)),), {"perm": (2, 0, 1)})],
    "broadcast_to": [((_r((3, 1)),), {"shape": (2, 3, 4)})],
    "slice": [((_r((5, 6)),), {"starts": (1, 0), "stops": (5, 6), "steps": (2, 3)}),
              ((_r((4,)),), {"starts": (1,), "stops": (3,), "steps": (1,)})],
    "pad": [((_r((2, 3)),), {"low": (1, 0), "high": (0, 2), "interior": (1, 2), "value": 0.0})],
    "concatenate": [((_r((2, 3)), _r((1, 3)), _r((3, 3))), {"axis": 0}),
                    ((_r((2, 1)), _r((2, 2))), {"axis": 1})],
    "take": [((_r((4, 3)), _idx((2, 5), 3)), {"axis": 1}), ((_r((4,)), _idx((3,), 4)), {"axis": 0})],
    "index_add": [((_r((4, 3)), _idx((5,), 4), _r((5, 3))), {"axis": 0})],
    "gather": [((_r((3, 4)), _idx((3, 2), 4)), {"axis": 1})],
    "scatter_add": [((_r((3, 4)), _idx((2, 4), 3), _r((2, 4))), {"axis": 0})],
    "scatter_max": [((_r((3, 4), distinct=True, seed=5), _idx((2, 4), 3),
                      _r((2, 4), distinct=True, seed=6)), {"axis": 0})],
    "scatter_min": [((_r((3, 4), distinct=True, seed=7), _idx((3, 2), 4),
                      _r((3, 2), distinct=True, seed=8)), {"axis": 1})],
    "scatter_mul": [((_r((3, 4)), _idx((2, 4), 3), _r((2, 4))), {"axis": 0})],
    "full": [((), {"value": 1.5, "shape": (2, 3), "dtype": dt.float32})],
    "iota": [((), {"shape": (2, 3), "dtype": dt.int64, "axis": 1})],
    "random_uniform": [((np.array([7, 3], np.int64),), {"shape": (4,), "dtype": dt.float64})],
    # one direction of a recurrent layer (T=3, N=2, H=2), each mode and direction
    "rnn_scan": [((_r((3, 2, 8), seed=11), _r((2, 8), seed=12), _r((2, 2), seed=13),
                   _r((2, 2), seed=14)), {"mode": "LSTM", "reverse": 0}),
                 ((_r((3, 2, 6), seed=15), _r((2, 6), seed=16), _r((2, 2), seed=17),
                   _r((6,), seed=18)), {"mode": "GRU", "reverse": 1}),
                 ((_r((3, 2, 6), seed=19), _r((2, 6), seed=20), _r((2, 2), seed=21)),
                  {"mode": "GRU", "reverse": 0}),
                 ((_r((3, 2, 2), seed=22), _r((2, 2), seed=23), _r((2, 2), seed=24)),
                  {"mode": "RNN_TANH", "reverse": 1}),
                 ((_r((3, 2, 2), seed=25, distinct=True), _r((2, 2), seed=26),
                   _r((2, 2), seed=27)), {"mode": "RNN_RELU", "reverse": 0})],
    "rnn_scan_grad": [((_r((4, 2, 12)), _r((4, 2, 12)), _r((2, 8)), _r((2, 2)), _r((2, 2))),
                       {"mode": "LSTM", "reverse": 1})],
    # collectives in a world of one process (tests/distributed runs several)
    "all_reduce": [((_r((3, 4)),), {"reduce_op": 0, "comm": _WORLD})],
    "broadcast": [((_r((2, 3)),), {"src": 0, "comm": _WORLD})],
    "all_gather": [((_r((2, 3)),), {"size": 1, "comm": _WORLD})],
}

CASES = [(name, i) for name in sorted(SAMPLES) for i in range(len(SAMPLES[name]))]
DIFF_CASES = [(n, i) for n, i in CASES if n in PRIMITIVES and PRIMITIVES[n].differentiable]


def _tensors(args):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            t = tracec.tensor(a.copy())
            if a.dtype.kind == "f":
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def _bind(prim, args, params):
    if args and any(isinstance(a, tracec.Tensor) for a in args):
        return prim.bind(*args, **params)
    return prim.bind(*args, like=tracec.zeros(1), **params)


def test_every_primitive_has_a_sample():
    missing = sorted(set(PRIMITIVES) - set(SAMPLES))
    assert not missing, f"primitives without a gradcheck sample in {__file__}: {missing}"
    stale = sorted(set(SAMPLES) - set(PRIMITIVES))
    assert not stale, f"samples for primitives that do not exist: {stale}"


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_declares_every_rule(name):
    prim = PRIMITIVES[name]
    for attr in ("shape_rule", "dtype_rule", "impl"):
        assert callable(getattr(prim, attr, None)), f"{name} lacks {attr}"
    assert prim.kind in ("elementwise", "reduce", "movement", "index", "matmul",
                         "creation", "random", "collective", "recurrent"), prim.kind
    if prim.differentiable:
        assert callable(prim.vjp)
    for args, params in SAMPLES.get(name, []):
        save = prim.save(_tensors(args)) if callable(prim.save) else prim.save
        assert all(isinstance(i, int) and 0 <= i < max(len(args), 1) for i in save)
    # Primitives that produce bool/int results are not differentiable.
    for args, params in SAMPLES.get(name, []):
        out = _bind(prim, _tensors(args), params)
        if not out.dtype.is_floating_point:
            assert not prim.differentiable or prim.name in ("cast", "reduce_sum") or \
                prim.kind in ("movement", "index"), name


@pytest.mark.parametrize("name,i", CASES)
def test_rules_agree_with_impl(name, i):
    prim = PRIMITIVES[name]
    args, params = SAMPLES[name][i]
    tensors = _tensors(args)
    ref = max((t.dtype for t in tensors if isinstance(t, tracec.Tensor)),
              key=lambda d: d.category, default=None)
    avals, arrays = [], []
    for a in tensors:
        if isinstance(a, tracec.Tensor):
            avals.append(Aval(a.shape, a.dtype))
            arrays.append(a.numpy() if not a.requires_grad else a.detach().numpy())
        else:  # weak scalars take the tensor operands' dtype
            avals.append(Aval((), ref))
            arrays.append(np.asarray(a, ref.np))
    aval = prim.abstract_eval(*avals, **params)
    out = prim.impl(*arrays, **params)
    out = np.asarray(out)
    assert tuple(out.shape) == aval.shape, f"{name}: impl shape {out.shape}, rule {aval.shape}"
    assert out.dtype == aval.dtype.np, f"{name}: impl dtype {out.dtype}, rule {aval.dtype}"
    # ...and the eager tensor agrees with both
    t = _bind(prim, tensors, params)
    assert t.shape == aval.shape and t.dtype is aval.dtype


def test_dtype_rules_refuse_bad_operands():
    f32, f64, i64 = Aval((2,), dt.float32), Aval((2,), dt.float64), Aval((2,), dt.int64)
    with pytest.raises(ShapeError):
        PRIMITIVES["add"].abstract_eval(f32, f64)
    with pytest.raises(ShapeError):
        PRIMITIVES["exp"].abstract_eval(i64)
    with pytest.raises(ShapeError):
        PRIMITIVES["where"].abstract_eval(f32, f32, f32)
    with pytest.raises(ShapeError):
        PRIMITIVES["take"].abstract_eval(f32, f32, axis=0)
    with pytest.raises(ShapeError, match=r"\(2,\).*\(3,\)"):
        PRIMITIVES["mul"].abstract_eval(f32, Aval((3,), dt.float32))
    with pytest.raises(ShapeError):
        PRIMITIVES["matmul"].abstract_eval(Aval((2, 3), dt.float32), Aval((2, 3), dt.float32))
    with pytest.raises(ShapeError):
        PRIMITIVES["reshape"].abstract_eval(f32, shape=(3,))


@pytest.mark.parametrize("name,i", DIFF_CASES)
def test_gradcheck_primitive(name, i):
    prim = PRIMITIVES[name]
    args, params = SAMPLES[name][i]
    tensors = _tensors(args)
    if not any(isinstance(t, tracec.Tensor) and t.requires_grad for t in tensors):
        pytest.skip("no float operand")
    if name == "cast" and params["dtype"] is not dt.float64:
        # f64 -> f32 -> f64 round trip: finite differences need float64 end to end
        def fn(*xs):
            return PRIMITIVES["cast"].bind(prim.bind(*xs, **params), dtype=dt.float64)
        assert gradcheck(fn, tuple(tensors), eps=1e-3, atol=1e-4, rtol=1e-3)
        return
    assert gradcheck(lambda *xs: prim.bind(*xs, **params), tuple(tensors))


@pytest.mark.parametrize("name,i", DIFF_CASES)
def test_vjp_along_random_directions(name, i):
    """<vjp(u), v> == <u, J v>, J v by central differences along v; and the
    VJP is made of primitives only (every cotangent was bound)."""
    prim = PRIMITIVES[name]
    args, params = SAMPLES[name][i]
    tensors = _tensors(args)
    rng = np.random.default_rng(7)
    diff = [k for k, t in enumerate(tensors) if isinstance(t, tracec.Tensor) and t.requires_grad
            and k not in prim.nondiff_argnums]
    if not diff:
        pytest.skip("no float operand")
    out = prim.bind(*tensors, **params)
    u = rng.standard_normal(out.shape).astype(out.dtype.np)
    bound = []
    g = tracec.tensor(u)
    RECORDERS.append(lambda p, ins, ps, o: bound.append(o))
    try:
        with tracec.no_grad():
            cts = out.grad_fn.apply(g)
    finally:
        RECORDERS.pop()
    assert len(cts) == len(tensors)
    for k in diff:
        assert cts[k] is not None, f"{name}: no cotangent for operand {k}"
        assert cts[k] is g or any(cts[k] is b for b in bound), \
            f"{name}: cotangent {k} was not produced by a primitive"
        assert cts[k].shape == tensors[k].shape and cts[k].dtype is tensors[k].dtype
    vs = {k: rng.standard_normal(tensors[k].shape) for k in diff}
    low = out.dtype is not tracec.float64  # a cast to float32
    h = 1e-3 if low else 1e-6

    def at(sign):
        xs = [tracec.tensor(t.detach().numpy() + sign * h * vs[k]) if k in vs else
              (t.detach() if isinstance(t, tracec.Tensor) else t)
              for k, t in enumerate(tensors)]
        return prim.bind(*xs, **params).numpy().astype(np.float64)

    jv = (at(1) - at(-1)) / (2 * h)
    lhs = sum(float(np.sum(cts[k].numpy() * vs[k])) for k in diff)
    rhs = float(np.sum(u * jv))
    tol = 1e-3 if low else 1e-6
    assert lhs == pytest.approx(rhs, rel=tol, abs=tol), name


# --- composites (plain Python over primitives) ------------------------------------

COMPOSITES = {
    "softmax": lambda x: tracec.softmax(x, -1),
    "log_softmax": lambda x: tracec.log_softmax(x, 0),
    "logsumexp": lambda x: tracec.logsumexp(x, (0, 1)),
    "var": lambda x: x.var(1),
    "std": lambda x: x.std(0, keepdim=True),
    "mean": lambda x: x.mean((0,)),
    "gelu": tracec.gelu,
    "gelu_tanh": lambda x: tracec.gelu(x, approximate="tanh"),
    "silu": tracec.silu,
    "clamp": lambda x: x.clamp(-0.5, 0.5),
    "max_dim": lambda x: x.max(1).values,
    "getitem": lambda x: x[1:, [0, 2, 2]] * x[0, None, :3],
    "norm_like": lambda x: (x * x).sum(-1).sqrt(),
    "matvec": lambda x: x @ x[0],
    "cat_stack": lambda x: tracec.stack([x, tracec.cat([x[:, 1:], x[:, :1]], 1)]),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_gradcheck_composite(name):
    x = tracec.tensor(_r((3, 4), distinct=True, seed=11), requires_grad=True)
    assert gradcheck(COMPOSITES[name], (x,))


@pytest.mark.parametrize("name", ["softmax", "gelu", "var", "matvec"])
def test_gradgradcheck_composite(name):
    x = tracec.tensor(_r((2, 3), distinct=True, seed=12), requires_grad=True)
    assert tracec.autograd.gradgradcheck(COMPOSITES[name], (x,))


def test_gradcheck_detects_a_wrong_vjp():
    class Wrong(tracec.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 * g * x

    x = tracec.tensor(_r((3,)), requires_grad=True)
    with pytest.raises(GradcheckError, match="input 0"):
        gradcheck(Wrong.apply, (x,))
    assert gradcheck(Wrong.apply, (x,), raise_exception=False) is False
