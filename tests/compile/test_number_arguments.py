"""Python number arguments whose value changes between calls (a learning
rate, a step index passed in) are lifted by the retrace: read as inputs
(``tracec.lifted_state``'s ``"arg"`` locations), so one trace and one
native compile serve every value, as jax.jit traces a Python scalar and
torch.compile makes a changed int or float dynamic.  Every call equals eager;
a number used as a plain number (a loop count, an index, returned) makes
the function specialize on it again, each value its own trace."""
import numpy as np
import pytest

import tracec


def _sgd(backend, dynamic=None):
    w = tracec.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3),
                      requires_grad=True)

    def step(x, lr, k, *, decay=0.0):
        w.grad = None
        loss = ((x @ w) ** 2).mean() * k
        loss.backward()
        with tracec.no_grad():
            w.mul_(1 - decay)
            w.sub_(lr * w.grad)
        return loss
    return w, (tracec.compile(step, backend=backend, dynamic=dynamic) if backend else step)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_decaying_lr_and_a_changing_int_compile_once_and_equal_eager(backend):
    x = tracec.tensor(np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4))
    we, eager = _sgd(None)
    wc, comp = _sgd(backend)
    for i in range(12):
        args = (x, 0.1 * 0.9 ** i, 1 + i % 3)
        kw = {"decay": 0.01 * i} if i % 2 else {}
        want, got = eager(*args, **kw), comp(*args, **kw)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    info = comp.cache_info()
    # the first trace, the lifted one (lr, k), and one more when decay arrives
    # as a keyword, then changes (lifted in turn)
    assert info.traces <= 4, info.reasons
    assert any("argument lr" in lf and "argument k" in lf for lf in info.lifted), info.lifted
    assert any("argument decay" in lf for lf in info.lifted), info.lifted
    assert any("lifted, read as an input" in r for r in info.reasons)
    if backend == "cpu":
        assert info.compiles <= 3


def test_a_branch_on_a_lifted_argument_is_a_guard():
    f = tracec.compile(lambda x, t: x * t if t > 2 else x - t, backend="interp")
    x = tracec.ones(3)
    for t in (1.0, 1.5, 3.0, 4.0, 0.5, 5.0):
        want = 1.0 * t if t > 2 else 1.0 - t
        assert f(x, t).tolist() == [want] * 3
    assert f.cache_info().traces == 3      # 1.0, then lifted below 2, then above 2


def test_a_number_used_as_a_loop_count_specializes_again():
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x
    comp = tracec.compile(f, backend="interp")
    x = tracec.ones(2)
    for n in (1, 2, 3, 2, 1):
        assert comp(x, n).tolist() == [2.0 ** n] * 2
    info = comp.cache_info()
    assert info.traces == 3 and info.lifted == [[], [], []], info


def test_returning_a_number_computed_from_the_argument_specializes_again():
    comp = tracec.compile(lambda x, s: (x * s, s * 2), backend="interp")
    x = tracec.ones(2)
    for s in (1.0, 2.0, 3.0, 2.0):
        out, d = comp(x, s)
        assert out.tolist() == [s, s] and d == 2 * s and type(d) is float


def test_dynamic_false_keeps_specializing():
    _, comp = _sgd("interp", dynamic=False)
    x = tracec.ones(5, 4)
    for i in range(4):
        comp(x, 0.1 + i, 1)
    assert comp.cache_info().traces == 4
    assert comp.cache_info().lifted == [[]] * 4


def test_numpy_float_arguments_are_lifted_too():
    f = tracec.compile(lambda x, s: x * s, backend="interp")
    x = tracec.ones(2)
    for s in (np.float64(2.0), np.float64(3.0), np.float64(0.5)):
        assert f(x, s).tolist() == [float(s)] * 2
    assert f.cache_info().traces == 2
