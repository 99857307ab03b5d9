"""Symbolic sizes follow Python's floor division and modulo in native code.

``x[-1]`` on a symbolic dimension B starts at ``-1 % B``.  The cpu backend
emitted LLVM's ``srem`` (rounding toward zero: -1), so ``x[-1]`` read the
element before the buffer: garbage, silently, at every size but the traced
one.  Each case runs over several sizes in one symbolic trace and equals
eager."""
import numpy as np
import pytest

import tracec

CASES = {
    "last row": lambda x: x[-1],
    "last column": lambda x: x[:, -1],
    "tail slice": lambda x: x[-2:],
    "negative step window": lambda x: x[-3:-1, -2],
    "half from the end": lambda x: x[-(x.shape[0] // 2):],
    "last of a cumsum": lambda x: x.cumsum(0)[-1],
    "sorted last": lambda x: x.sort(0).values[-1],
    "modulo of a size": lambda x: x[(x.shape[0] - 7) % x.shape[0]],
    "floor of a negative size expression": lambda x: x[:, (3 - x.shape[1]) // 2 + x.shape[1] - 1:],
}


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("name", list(CASES))
def test_negative_indices_on_symbolic_sizes_equal_eager(backend, name):
    fn = CASES[name]
    f = tracec.compile(fn, dynamic=True, backend=backend)
    for n in (4, 5, 7, 10):
        x = tracec.tensor(np.arange(n * (n + 3), dtype=np.float32).reshape(n, n + 3))
        np.testing.assert_array_equal(f(x).numpy(), fn(x).numpy(), err_msg=f"n={n}")
    # (a sort's algorithm and an integer index are size guards: a few traces)
    assert f.cache_info().traces <= 3


def _groups(x):
    b = x.shape[0]
    g = x.reshape(b, 2, -1)
    g = (g - g.mean(-1, keepdim=True)) * 2.0
    return g.reshape(x.shape)          # [B, 2, (B*C*L)//(2*B)] viewed back as [B, C, L]


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_view_back_from_an_inferred_size_is_a_divisibility_guard_not_a_specialization(backend):
    f = tracec.compile(_groups, dynamic=True, backend=backend)
    for shape in [(2, 4, 5), (3, 6, 7), (2, 8, 9), (4, 2, 3)]:
        x = tracec.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 7)
        np.testing.assert_allclose(f(x).numpy(), _groups(x).numpy(), rtol=1e-6, atol=1e-5)
    assert f.cache_info().traces == 1, f.cache_info().reasons
    # Sizes the division is not exact for fail the guard: the call does
    # what eager does (here: refuses the view).
    x = tracec.ones(3, 5, 3)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        _groups(x)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        f(x)


SIZE_INDICES = {
    "x[B // 2 - 1]": lambda x: x[x.shape[0] // 2 - 1],
    "x[:, T - 2]": lambda x: x[:, x.shape[1] - 2],
    "x[B - 1, T // 3]": lambda x: x[x.shape[0] - 1, x.shape[1] // 3],
    "narrow(0, B - 2, 2)": lambda x: x.narrow(0, x.shape[0] - 2, 2),
    "narrow(1, 1, T - 2)": lambda x: x.narrow(1, 1, x.shape[1] - 2),
}


@pytest.mark.parametrize("name", list(SIZE_INDICES))
def test_an_index_computed_from_sizes_stays_symbolic(name):
    """An int index or a narrow start made from symbolic sizes is a slice
    from ``k % size`` (as ``x[-1]``), not a number that specializes them."""
    fn = SIZE_INDICES[name]
    f = tracec.compile(fn, dynamic=True)
    for n in (4, 5, 7, 10):
        x = tracec.tensor(np.arange(n * (n + 3), dtype=np.float32).reshape(n, n + 3))
        np.testing.assert_array_equal(f(x).numpy(), fn(x).numpy(), err_msg=f"n={n}")
    assert f.cache_info().traces == 1, f.cache_info().reasons
