"""Matmul kernels of size-generic code (issue 10): a symbolic batch gets the
small-product kernel where it is small and the GEMM, with the column split
the static code would make, where it is large, chosen per call in one
object; a symbolic depth K is a loop bound of the small kernel.  And the
tools that compile a symbolic trace again: ``fn.ir("llvm")`` after a disk
cache hit, ``fn.profile`` of a symbolic function.  See
tracec/backends/cpu/gemm_small.py, gemm.py and matmul.py."""
import numpy as np
import pytest

import tracec
from tracec.backends.cpu import gemm
from test_cpu_sized import _mlp  # noqa: E402 - this folder is on sys.path (pytest)

SIZES = (2, 7, 12, 13, 32, 33, 129, 257)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _dyn(a, dim=0):
    return tracec.mark_dynamic(tracec.tensor(a), dim, "B")


def _generic(comp):
    (g,) = [g for es in comp._sym.values() for e in es for g in e.generic]
    return g


def _serve(fn, make, sizes=SIZES, tol=1e-4):
    """Call ``tracec.compile(fn)`` on ``make(n)`` (numpy arrays, dim 0 of the
    first made symbolic) for every size: equal to ``fn`` run eagerly, one
    trace and one native compile."""
    comp = tracec.compile(fn)
    for n in sizes:
        arrays = make(n)
        got = comp(_dyn(arrays[0]), *map(tracec.tensor, arrays[1:]))
        want = fn(*map(tracec.tensor, arrays))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol,
                                   err_msg=f"size {n}")
    info = comp.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1, info
    assert not info.notes, info.notes
    return comp


rng = np.random.default_rng(0)
W = rng.standard_normal((96, 40)).astype(np.float32)     # N = 40: a full and an edge panel


def test_symbolic_rows_small_kernel_and_gemm_in_one_object(fresh_cache):
    """``x[B, 96] @ W[96, 40]``: rows of C symbolic.  Every size, from 2 to
    past the GEMM's row block, is served by one compile holding both the
    small kernel (B <= MAX_M) and the GEMM."""
    def f(x, w):
        return x @ w
    comp = _serve(f, lambda n: [rng.standard_normal((n, 96)).astype(np.float32), W])
    llvm = comp.ir("llvm")
    assert "matmul_small" in llvm and "gemm_run" in llvm


def test_symbolic_rows_read_transposed_float64(fresh_cache):
    """A read transposed (``x.T`` with x ``[96, B]``: M = B with stride M
    along K), in float64."""
    w = W.astype(np.float64)

    def f(xt, w):
        return xt.transpose(0, 1) @ w
    comp = tracec.compile(f)
    for n in SIZES:
        xt = rng.standard_normal((96, n))
        got = comp(tracec.mark_dynamic(tracec.tensor(xt), 1, "B"), tracec.tensor(w))
        np.testing.assert_allclose(got.numpy(), xt.T @ w, rtol=1e-10, atol=1e-10)
    assert comp.cache_info().compiles + comp.cache_info().loads == 1
    assert "matmul_small" in comp.ir("llvm")


def test_symbolic_depth_static_rows(fresh_cache):
    """``g.T[10, B] @ h[B, 48]`` (a weight gradient of a 10-wide layer): K
    symbolic, M = 10 static: the small kernel with a run-time K."""
    def f(g, h):
        return g.transpose(0, 1) @ h
    comp = _serve(f, lambda n: [rng.standard_normal((n, 10)).astype(np.float32),
                                rng.standard_normal((n, 48)).astype(np.float32)])
    assert "matmul_small" in comp.ir("llvm")


def test_symbolic_rows_batched(fresh_cache):
    """A static batch of 3 products with symbolic rows: ``[3, B, 24] @
    [3, 24, 40]``."""
    w = rng.standard_normal((3, 24, 40)).astype(np.float32)

    def f(x, w):
        return x @ w
    comp = tracec.compile(f)
    for n in SIZES:
        x = rng.standard_normal((3, n, 24)).astype(np.float32)
        got = comp(tracec.mark_dynamic(tracec.tensor(x), 1, "B"), tracec.tensor(w))
        np.testing.assert_allclose(got.numpy(), x @ w, rtol=1e-4, atol=1e-4)
    assert comp.cache_info().compiles + comp.cache_info().loads == 1


def test_gemm_column_split_per_row_block_count(fresh_cache):
    """The column split of a GEMM with symbolic rows is the static one for
    every row-block count (``_split_ranges`` against ``_column_blocks``), and
    results across the row-block boundaries equal numpy."""
    for nb, npan, threads in ((1, 16, 2), (1, 16, 8), (2, 3, 8), (1, 1, 4), (5, 64, 16)):
        ranges = gemm._split_ranges(nb, npan, threads)
        assert ranges[0][0] == 1 and ranges[-1][1] is None
        for mt in range(1, 6 * threads):
            (s,) = [s for lo, hi, s in ranges if lo <= mt and (hi is None or mt <= hi)]
            assert s == gemm._column_blocks(nb, mt, npan, threads), (nb, npan, threads, mt)
    w = rng.standard_normal((16, 512)).astype(np.float32)
    mc = gemm.MC_PANELS * gemm.params_for(tracec.float32)[1]

    def f(x, w):
        return x @ w
    _serve(f, lambda n: [rng.standard_normal((n, 16)).astype(np.float32), w],
           sizes=(33, mc, mc + 1, 2 * mc + 1, 5))


def test_mlp_training_step_symbolic_batch_equals_eager(fresh_cache):
    """A 96-64-48-10 SGD step with a symbolic batch (its products: small,
    narrow, GEMM and weight gradients with K = B) equals eager at odd
    sizes, after one compile."""
    me, eager = _mlp(sizes=(96, 64, 48, 10))
    mc, step = _mlp(sizes=(96, 64, 48, 10))
    comp = tracec.compile(step)
    r = np.random.default_rng(3)
    for n in (7, 33, 2, 13, 40, 257):
        x = r.standard_normal((n, 96)).astype(np.float32)
        y = r.integers(0, 10, n)
        want = eager(tracec.tensor(x), tracec.tensor(y)).item()
        got = comp(_dyn(x), _dyn(y)).item()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    info = comp.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1
    for a, b in zip(me.parameters(), mc.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-3,
                                   atol=1e-4)
    assert "matmul_small" in comp.ir("llvm")


def test_ir_of_size_generic_code_loaded_from_the_disk_cache(fresh_cache):
    """Regression: ``fn.ir("llvm")`` of a symbolic trace whose code came from
    the disk cache compiles it again under the sizes it was made for (it
    raised TypeError: the buffer planner had no size hints)."""
    def f(x, w):
        return (x @ w).relu().sum(1)
    w = tracec.tensor(W)
    first = tracec.compile(f)
    for n in (5, 9):
        first(_dyn(rng.standard_normal((n, 96)).astype(np.float32)), w)
    assert first.cache_info().compiles == 1
    again = tracec.compile(f)        # a new in-memory cache: the code comes from disk
    x = rng.standard_normal((11, 96)).astype(np.float32)
    got = again(_dyn(x), w)
    assert again.cache_info().compiles == 0 and again.cache_info().loads == 1
    np.testing.assert_allclose(got.numpy(), np.maximum(x @ W, 0).sum(1), rtol=1e-4)
    llvm = again.ir("llvm")
    assert "define" in llvm and "matmul_small" in llvm
    assert "llvm.func" in again.ir("lowered")


def test_profile_of_a_symbolic_function(fresh_cache):
    """``fn.profile`` of a symbolic function: a profiling build of its
    size-generic code, rows sized for the profiled call."""
    def f(x, w):
        return (x @ w).relu().sum(1)
    comp = tracec.compile(f)
    w = tracec.tensor(W)
    comp(_dyn(rng.standard_normal((5, 96)).astype(np.float32)), w)
    x = _dyn(rng.standard_normal((21, 96)).astype(np.float32))
    prof = comp.profile(x, w, repeat=2, echo=False)
    mm = [r for r in prof if r["kernel"] == "matmul"]
    assert mm and all(r["shape"] == [21, 40] for r in mm), prof
    assert mm[0]["flops"] == 2 * 21 * 40 * 96
    assert sum(r["calls"] for r in prof) >= 2 and prof.kernels_s > 0


def test_symbolic_work_gates_the_parallel_call(fresh_cache):
    """Regression: a kernel whose work is symbolic (``[B, 512]`` elementwise)
    runs on the threads only where a call's work is large enough (its
    gate); the gate had landed in the call's ``op`` field and was lost, so
    every such kernel ran on all threads, even for a few rows."""
    from tracec import symbolic
    from tracec.backends.cpu.lower import PARALLEL_WORK, Lowering

    def f(x):
        return (x * 2 + 1).relu()
    comp = tracec.compile(f)
    big = PARALLEL_WORK // 512 + 9
    for n in (5, 3, big):
        x = rng.standard_normal((n, 512)).astype(np.float32)
        np.testing.assert_allclose(comp(_dyn(x)).numpy(), np.maximum(x * 2 + 1, 0), rtol=1e-6)
    g = _generic(comp)
    with symbolic.hinted(g.size_env):
        low = Lowering(g.optimized(), "t")
        low.run({})
    (call,) = low.kernels.calls
    # the parallel wrapper, and the serial kernel where the gate is shut
    assert call.parallel and call.gate is not None and call.fn == call.gate[0]
