"""Programs that unroll into long chains of ops still compile: a Python loop
of elementwise updates, and a global average pool (DenseNet's
``F.avg_pool2d(out, 32)``) whose gradient once was a chain of 1024 adds."""
import numpy as np
import torch

import tracec


def test_a_2000_op_chain_compiles_and_matches_eager():
    def f(x):
        y = x
        for _ in range(1000):
            y = y * 1.001 + 0.01
        return y
    x = tracec.linspace(-1, 1, 8)
    got = tracec.compile(f)(x)
    np.testing.assert_allclose(got.numpy(), f(x).numpy(), rtol=1e-6)


def test_global_avg_pool_gradient_compiles_and_matches_torch():
    a = np.random.RandomState(0).randn(2, 3, 32, 32).astype(np.float32)

    def loss(F, x):
        return (F.avg_pool2d(x, 32) * 2).sum() + F.avg_pool2d(x, (4, 8)).square().sum()

    xt = torch.tensor(a, requires_grad=True)
    loss(torch.nn.functional, xt).backward()

    @tracec.compile
    def step(x):
        x.grad = None
        v = loss(tracec.nn.functional, x)
        v.backward()
        return v, x.grad
    xc = tracec.tensor(a, requires_grad=True)
    for _ in range(2):  # eager, then native
        v, g = step(xc)
        np.testing.assert_allclose(g.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_long_trace_is_counted_and_its_busiest_line_named():
    def f(x):
        y = x
        for _ in range(1100):
            y = y * 1.001 + 0.01
        return y
    cf = tracec.compile(f, backend="interp")
    cf(tracec.ones(4))
    info = cf.cache_info()
    assert info.timings["ops"] > 2000
    (note,) = info.notes
    assert f"the trace has {info.timings['ops']} ops, 22" in note
    assert "of them recorded at" in note and "test_long_chains.py:" in note
    short = tracec.compile(lambda x: x * 2 + 1, backend="interp")
    short(tracec.ones(4))
    assert 3 <= short.cache_info().timings["ops"] < 10 and not short.cache_info().notes
