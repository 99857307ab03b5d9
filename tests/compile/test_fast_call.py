"""The call-side fast path (tracec.fast_call): its matcher agrees with
call_key on every kind of call, and a compiled function that switches
between signatures, guards and eager signatures still runs the right code."""
import itertools

import numpy as np
import pytest

import tracec
from tracec.compiler import call_key
from tracec.fast_call import matcher


def _calls():
    a, b = tracec.ones(2, 3), tracec.zeros(2, 3)
    c = tracec.ones(3, 2)
    d = tracec.ones(2, 3, dtype=tracec.float64)
    r = tracec.ones(2, 3, requires_grad=True)
    v = tracec.ones(4, 3)[:2]              # a view of another tensor's storage
    return [(a, b), (b, a), (a, a), (a, c), (c, a), (a, d), (a, r), (a, v), (v, a), (a,),
            (a, b, c), (a, b, 1.0), ([a], b), (a, b, a), (a, b, c, d, r)]


@pytest.mark.parametrize("grad_mode", [True, False])
def test_matcher_agrees_with_call_key(grad_mode):
    calls = _calls()
    for ref, args in itertools.product(calls, calls):
        key = call_key(ref, {})
        m = matcher(key, len(ref))
        if m is None:
            continue
        ctx = tracec.enable_grad() if grad_mode else tracec.no_grad()
        with ctx:
            want = call_key(args, {}) == key
            got = m(args)
            # True only on an equal key; exact unless an argument is a view
            # (those take the general path)
            assert got == want or (want and any(
                isinstance(t, tracec.Tensor) and t._base is not None for t in args)), (ref, args)
    # keys it does not take: aliasing, containers, numbers
    for ref in ((calls[0][0],) * 2, ([calls[0][0]],), (calls[0][0], 2.0)):
        assert matcher(call_key(ref, {}), len(ref)) is None


def test_compiled_calls_switching_signatures_and_guards_equal_eager():
    scale = [2.0]

    def f(x, y):
        return x * scale[0] + y

    comp = tracec.compile(f, backend="interp")
    a, b = tracec.ones(2, 3), tracec.full((2, 3), 3.0)
    c = tracec.ones(3)
    for k in range(12):
        if k == 6:
            scale[0] = 5.0                    # a guard change: retrace, not the fast path
        for args in ((a, b), (c, c), (b, a), (a, a), (c, tracec.ones(3))):
            np.testing.assert_allclose(comp(*args).numpy(), f(*args).numpy())
        with tracec.no_grad():
            np.testing.assert_allclose(comp(a, b).numpy(), f(a, b).numpy())


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_symbolic_code_on_the_fast_path(backend):
    """A call repeating the last sizes a symbolic trace's code served runs
    that code from the fast path (the trace stays the function's last
    entry); new sizes, and a guard that changes, take the general path."""
    scale = [2.0]

    def f(x, w):
        return (x @ w).sum(0) * scale[0]

    comp = tracec.compile(f, backend=backend)
    w = tracec.randn(4, 3)
    for k, n in enumerate((5, 5, 7, 7, 5, 9, 9, 9, 5)):
        if k == 7:
            scale[0] = 3.0
        x = tracec.mark_dynamic(tracec.randn(n, 4), 0)
        np.testing.assert_allclose(comp(x, w).numpy(), f(x, w).numpy(), rtol=1e-5, atol=1e-5)
        assert comp._last.trace.symbolic is not None
    e = comp._last
    assert comp._fast is not None and comp._fast[1] is e.last_sub and comp._fast[2] is e
    assert comp.cache_info().traces == 2           # (the guard change: a second trace)
