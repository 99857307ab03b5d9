"""Random programs (chains of elementwise, broadcast, movement and reduction
ops on small random shapes): after canonicalization and fusion they compute
what the unoptimized IR computes in the interpreter and what eager computes,
every kernel keeps the invariant, and the module round-trips through text.
A second property runs the chains under ``backward()`` through
``tracec.compile`` (autodiff IR is where most fusion happens)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracec
import tracec.ir as ir
from passes_helpers import assert_same, optimize, run

SCALARS = (0.0, 1.0, 2.0, -0.5)
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
UNARY = ("neg", "negneg", "tanh", "exp_tanh", "relu", "sigmoid", "abs")
REDUCE = ("sum", "amax", "amin", "mean")


def _apply(step, pool, rows, cols):
    """One step of a program: a new value from values of ``pool`` (all of
    whose shapes broadcast to [rows, cols])."""
    kind, i, j, k = step
    a, b = pool[i % len(pool)], pool[j % len(pool)]
    if kind == "binary":
        op = BINARY[k % len(BINARY)]
        if op == "div":
            return a / (b.abs() + 0.5)
        return {"add": a + b, "sub": a - b, "mul": a * b,
                "maximum": tracec.maximum(a, b), "minimum": tracec.minimum(a, b)}[op]
    if kind == "scalar":
        s = SCALARS[k % len(SCALARS)]
        return [a + s, s + a, a - s, a * s, s * a, a / (s or 1.0), s - a][k % 7]
    if kind == "unary":
        op = UNARY[k % len(UNARY)]
        return {"neg": lambda: -a, "negneg": lambda: -(-a), "tanh": a.tanh,
                "exp_tanh": lambda: a.tanh().exp(), "relu": a.relu,
                "sigmoid": a.sigmoid, "abs": a.abs}[op]()
    if kind == "where":
        return tracec.where(a > b, a, b)
    if kind == "reduce":
        if a.ndim == 0:
            return a * 1.0
        op = REDUCE[k % len(REDUCE)]
        dim = j % a.ndim
        if dim == 0 and k % 2:  # keepdim=False is safe on the leading axis only
            return getattr(a, op)(0)
        return getattr(a, op)(dim, keepdim=True)
    if kind == "expand":
        return a.expand(rows, cols)
    # movement: round trips through transposes and reshapes
    if a.ndim == 2:
        return a.t().t() if k % 2 else a.reshape(-1).reshape(tuple(a.shape))
    return a.reshape(1, *a.shape).reshape(tuple(a.shape))


STEP = st.tuples(
    st.sampled_from(["binary", "binary", "scalar", "unary", "unary", "where", "reduce",
                     "expand", "movement"]),
    st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))

PROGRAM = st.tuples(st.integers(1, 4), st.integers(1, 5),
                    st.lists(STEP, min_size=1, max_size=8), st.integers(0, 50),
                    st.integers(0, 2**31 - 1))


def _program(steps, rows, cols, n_inputs):
    def fn(*inputs):
        pool = list(inputs)
        for step in steps:
            pool.append(_apply(step, pool, rows, cols))
        return pool[-1], pool[n_inputs + (steps[0][1] % len(steps))]
    return fn


def _input_shapes(rows, cols):
    return [(rows, cols), (rows, cols), (cols,), (rows, 1), ()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PROGRAM)
def test_random_programs_keep_their_results(program):
    rows, cols, steps, _, seed = program
    shapes = _input_shapes(rows, cols)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fn = _program(steps, rows, cols, len(shapes))
    module = tracec.trace(fn, *[tracec.tensor(a) for a in arrays]).module
    before = module.clone()
    optimize(module)
    text = ir.print_module(module, debuginfo=False)
    got = run(module, arrays)
    assert_same(got, run(before, arrays), text)
    eager = [t.numpy() for t in fn(*[tracec.tensor(a) for a in arrays])]
    assert_same(got, eager, text)
    assert ir.parse_module(ir.print_module(module)).is_structurally_equivalent(module)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PROGRAM)
def test_random_programs_under_backward_through_compile(program):
    rows, cols, steps, _, seed = program
    shapes = _input_shapes(rows, cols)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    chain = _program(steps, rows, cols, len(shapes))

    def make(params):
        def fn(x):
            for p in params:
                p.grad = None
            out, other = chain(x, *params)
            # The parameters' own sum keeps every loss differentiable.
            loss = (out * out).sum() + other.sum() + sum(p.sum() for p in params) * 0.25
            loss.backward()
            return loss.detach()
        return fn

    def fresh():
        return [tracec.tensor(a, requires_grad=True) for a in arrays[1:]]

    eager_params, compiled_params = fresh(), fresh()
    want = make(eager_params)(tracec.tensor(arrays[0])).numpy()
    step = tracec.compile(make(compiled_params), backend="interp")
    step(tracec.tensor(arrays[0]))  # records (runs eagerly)
    got = step(tracec.tensor(arrays[0])).numpy()  # runs the optimized IR
    text = step.ir("optimized")
    assert step.cache_info().hits == 1, text
    assert_same([got], [want], text)
    for p, q in zip(compiled_params, eager_params):
        if q.grad is None:
            assert p.grad is None
        else:
            assert_same([p.grad.numpy()], [q.grad.numpy()], text)
