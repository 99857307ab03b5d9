"""Kernels whose every call does little work (``lower.SMALL_WORK``) are
compiled ``optnone`` (no O3 pipeline: a fraction of its compile time), the
others optimized; both compute what the interpreter computes."""
import numpy as np
import pytest

import tracec
from tracec import ir
from tracec.backends.cpu import entry_symbol
from tracec.backends.cpu.lower import SMALL_WORK, lower_module


def _lowered(fn, *args):
    comp = tracec.compile(fn)
    comp(*args)
    comp(*args)
    module = ir.parse_module(comp.ir("optimized"))
    return comp, lower_module(module, entry_symbol(module))


@pytest.mark.parametrize("n,small", [(64, True), (SMALL_WORK * 8, False)])
def test_small_kernels_are_compiled_without_optimization(n, small):
    x = tracec.tensor(np.linspace(-2, 2, n, dtype=np.float32))
    f = lambda a: ((a * 3 + 1).relu() * a).sigmoid()    # noqa: E731
    comp, low = _lowered(f, x)
    assert bool(low.small) == small, low.small
    text = comp.ir("llvm")
    assert ("optnone" in text.split("define", 2)[-1]) or not small
    np.testing.assert_allclose(comp(x).numpy(), f(x).numpy(), rtol=1e-6, atol=1e-7)


def test_a_kernel_shared_by_a_large_call_stays_optimized():
    """One function serving calls of different extents (a body keyed
    without its extent, or an identical body) counts the most work of any
    of its calls: it is small only if every call is."""
    from tracec.backends.cpu.builder import ModuleBuilder
    from tracec.backends.cpu.lower import Kernels
    kernels = Kernels(ModuleBuilder("t_"), [])

    def body(fb, ptrs, err, lo, hi, status):
        pass
    kernels.kernel("k", [], 4, body, work=4, key=("same body",), small_ok=True)
    kernels.kernel("k", [], 10_000, body, work=10_000, key=("same body",), small_ok=True)
    # (a body identical to one emitted before is that function too)
    kernels.kernel("j", [], 4, body, work=4, key=("another key",), small_ok=True)
    assert [c.fn for c in kernels.calls] == ["t_k", "t_k", "t_k"]
    assert kernels.work == {"t_k": 10_000}
    # a kernel whose caller does not allow it is never small (a reduction)
    kernels.kernel("r", [], 4, lambda fb, *a: fb.i64(1) and None, work=4, key=("r",))
    assert kernels.work[kernels.calls[-1].fn] == float("inf")
