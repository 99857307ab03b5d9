"""Changes made between compiled calls that the compiled function depends on,
found by ``tests/fuzz_guards.py`` to give results different from eager
ones: each test changes one thing between two calls and checks that the
compiled call equals the eager call (and that the change retraced, where a
retrace is the only way to see it)."""
import types

import numpy as np

import tracec
from tracec import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.lin(x))


def _same(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_a_submodule_swapped_between_calls_is_called():
    # (fuzz_guards seed 1: the trace kept calling the first Linear)
    tracec.manual_seed(0)
    m = Net()

    def step(x):
        return m(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(2, 4)
    _same(f(x), step(x))
    m.lin = nn.Linear(4, 4)          # new parameters, in a new module
    _same(f(x), step(x))
    m.act = nn.ReLU()                # no parameters at all
    _same(f(x), step(x))
    assert f(x) is not None and f.cache_info().traces == 3


def test_a_submodule_of_a_sequential_replaced_by_index():
    tracec.manual_seed(1)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    f = tracec.compile(m, backend="cpu")
    x = tracec.ones(3, 4)
    _same(f(x), m(x))
    m[1] = nn.Sigmoid()
    _same(f(x), m(x))
    del m[1]
    _same(f(x), m(x))


def test_the_default_dtype_set_between_calls_retraces():
    # (fuzz_guards seed 37: randn / ones kept making float32 tensors)
    def step(x):
        return x + tracec.ones(3) * 0.5 + tracec.arange(3) * 0.25

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(3)
    _same(f(x), step(x))
    _same(f(x), step(x))             # (the fast path's matcher made)
    old = tracec.get_default_dtype()
    tracec.set_default_dtype(tracec.float64)
    try:
        y = f(x)
        assert y.dtype is tracec.float64
        _same(y, step(x))
        assert "default dtype changed" in f.cache_info().reasons[-1]
    finally:
        tracec.set_default_dtype(old)
    _same(f(x), step(x))
    assert f.cache_info().traces == 2


def _run_both(m, step, f, x):
    """``step`` and its compiled ``f`` from one RNG state (counter draws:
    dropout masks agree bit for bit); their results."""
    from tracec import torch_rng
    with torch_rng.counter_draws():
        st = tracec.get_rng_state()
        e = step(x)
        tracec.set_rng_state(st)
        return e, f(x)


def test_dropout_p_set_between_calls_is_lifted():
    # (fuzz_guards seed 114: the lifted p reached a primitive, a TypeError)
    tracec.manual_seed(2)
    m = nn.Dropout(0.25)

    def step(x):
        return m(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.randn(8, 4)
    for p in (0.25, 0.1, 0.6):
        m.p = p
        e, c = _run_both(m, step, f, x)
        _same(c, e)
    assert "Dropout.p: lifted" in f.cache_info().reasons[-1]


def test_batch_norm_momentum_set_to_none_after_it_was_lifted():
    # (fuzz_guards seed 111: the retrace lifted None, a TypeError)
    tracec.manual_seed(3)
    m, twin = nn.BatchNorm1d(3), nn.BatchNorm1d(3)

    def step(x):
        return m(x) * 2

    def eager(x):
        return twin(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.randn(4, 3)
    for momentum in (0.1, 0.2, None, 0.3, None):
        m.momentum = twin.momentum = momentum
        _same(f(x), eager(x))
        _same(m.running_mean, twin.running_mean)
        _same(m.running_var, twin.running_var)
        assert int(m.num_batches_tracked) == int(twin.num_batches_tracked)


CFG = types.SimpleNamespace(scale=1.0, shift=0.0)


def test_a_lifted_attribute_of_a_global_rebound_to_a_new_object():
    # (fuzz_guards seed 100281: the lifted number was read from the old
    # object while the guard, which follows the path, looked at the new one)
    global CFG

    def step(x):
        return x * CFG.scale + CFG.shift

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(2)
    _same(f(x), step(x))
    CFG.scale = 1.25                 # lifted from now on
    _same(f(x), step(x))
    CFG = types.SimpleNamespace(scale=1.25, shift=0.5)
    _same(f(x), step(x))
    CFG.scale = 1.75
    _same(f(x), step(x))
    CFG.scale = 2.0
    _same(f(x), step(x))


def _sgd_world(compiled):
    tracec.manual_seed(7)
    m = nn.Linear(4, 4)
    opt = tracec.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

    def step(x):
        loss = m(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss
    return m, (tracec.compile(step, backend="cpu") if compiled else step)


def test_a_grad_set_on_a_parameter_no_backward_reaches_is_zeroed():
    # (fuzz_guards seed 100343: zero_grad(set_to_none=False) wrote the zeros
    # into the trace's grad tensor, not into the one set since)
    got = []
    for compiled in (False, True):
        m, f = _sgd_world(compiled)
        x = tracec.ones(2, 4)
        f(x)
        f(x)
        m.weight.requires_grad_(False)
        f(x)
        m.weight.grad = tracec.full((4, 4), 0.5)
        f(x)
        got.append((m.weight, m.weight.grad))
    (w0, g0), (w1, g1) = got
    _same(w1, w0)
    _same(g1, g0)


def test_an_old_grad_the_program_holds_is_not_written():
    got = []
    for compiled in (False, True):
        m, f = _sgd_world(compiled)
        x = tracec.ones(2, 4)
        f(x)
        f(x)
        old = m.weight.grad
        old.fill_(3.0)
        m.weight.grad = tracec.full((4, 4), 0.5)
        f(x)
        got.append((old, m.weight.grad, m.weight))
    for a, b in zip(*got):
        _same(b, a)


def test_requires_grad_toggled_after_a_size_change_retraces():
    # (fuzz_guards seed 100738: a symbolic trace, made when the batch size
    # changed, did not guard its state tensors' requires_grad)
    got = []
    for compiled in (False, True):
        tracec.manual_seed(8)
        m = nn.Linear(4, 4)
        opt = tracec.optim.Adam(m.parameters(), lr=0.1)

        def step(x):
            m(x).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        f = tracec.compile(step, backend="cpu") if compiled else step
        for k in range(5):
            if k == 4:
                m.bias.requires_grad_(False)
            f(tracec.ones(5 if k >= 2 else 3, 4))
        got.append((m.bias, opt.state[m.bias]["exp_avg"]))
    for a, b in zip(*got):
        _same(b, a)


def test_a_lifted_module_attribute_deleted_between_calls():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            return x * getattr(self, "t", 3.0)

    m = M()
    f = tracec.compile(lambda x: m(x), backend="cpu")
    x = tracec.ones(2)
    for k in range(4):
        if k == 1:
            m.t = 2.0                # lifted from now on
        if k == 2:
            del m.t                  # (was a KeyError reading it)
        if k == 3:
            m.t = 5.0
        _same(f(x), m(x))
