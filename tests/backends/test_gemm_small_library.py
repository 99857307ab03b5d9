"""Short products (few rows of C) call the shape-generic ``gemm_small``
routine of the per-machine GEMM library (tracec/backends/cpu/gemm_small.py
``_small_fn``, gemm_lib.py): every size a run-time argument, the last
column panel loaded and stored masked.  Checked against NumPy over the
sizes that exercise each path: every remainder of N modulo the panel width,
row counts on both sides of the row-tile heights, A read transposed,
batches, float32 and float64, with and without the library."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tracec
from tracec.backends.cpu import gemm
from tracec import dtypes as dt

NR = gemm.params_for(dt.float32)[2]
VL = gemm.params_for(dt.float32)[0]
# Every kind of last panel: none, 1 column, less than a vector, one vector,
# a vector and some, one short of a panel (for this CPU's panel width).
NS = sorted({NR, NR + 1, NR + VL // 2 + 1, NR + VL, NR + VL + 3, 2 * NR - 1, 3 * NR + 5})
MS = (1, 2, 3, 7, 12, 13, 24, 25, 31, 32)


def _check(comp, a, b, ref, tol):
    np.testing.assert_allclose(comp(a, b).numpy(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("ta", [False, True])
def test_every_row_count_and_column_remainder(ta):
    rng = np.random.default_rng(0)
    for N in NS:
        # One compile per N (and layout): the second size makes M and K
        # symbolic (N stays static, as the small kernel needs), and the
        # kernel serves each M <= 32 (the GEMM the others).
        comp = tracec.compile((lambda a, b: a.t() @ b) if ta else (lambda a, b: a @ b),
                              backend="cpu")
        for M in MS:
            for K in (9, 64):
                a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
                b = rng.standard_normal((K, N)).astype(np.float32)
                ref = (a.T if ta else a).astype(np.float64) @ b
                _check(comp, tracec.from_numpy(a), tracec.from_numpy(b), ref, 1e-4)
        assert "gemm_small" in comp.ir("llvm")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_static_sizes_batched_and_float64(dtype):
    rng = np.random.default_rng(1)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for nb, M, K, N in [(1, 20, 200, 800), (3, 5, 33, NR + 7), (2, 32, 17, 2 * NR - 1),
                        (1, 8, 512, 3 * NR + 5)]:
        a = rng.standard_normal((nb, M, K)).astype(dtype)
        b = rng.standard_normal((nb, K, N)).astype(dtype)
        comp = tracec.compile(lambda x, y: x @ y, backend="cpu")
        _check(comp, tracec.from_numpy(a), tracec.from_numpy(b),
               a.astype(np.float64) @ b, tol)


def test_module_calls_the_library_routine():
    """The module declares the library's routine instead of compiling its own."""
    comp = tracec.compile(lambda x, y: x @ y, backend="cpu")
    x, y = tracec.randn(16, 64), tracec.randn(64, NR + 3)
    np.testing.assert_allclose(comp(x, y).numpy(), x.numpy() @ y.numpy(), rtol=1e-4, atol=1e-4)
    text = comp.ir("llvm")
    assert "tracec_gemmlib_gemm_small_f32" in text
    assert not any(line.startswith("define") and "gemm_small" in line
                   for line in text.splitlines())


def test_without_the_library_the_routine_is_in_the_module():
    """``TRACEC_GEMM_LIBRARY=0`` (each module self-contained): the same
    routine compiled into the module, same values."""
    code = """
import numpy as np, tracec
comp = tracec.compile(lambda x, y: x @ y, backend="cpu")
rng = np.random.default_rng(0)
for M, K in [(3, 40), (32, 63), (17, 100), (9, 8)]:
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, 77)).astype(np.float32)
    np.testing.assert_allclose(comp(tracec.from_numpy(a), tracec.from_numpy(b)).numpy(),
                               a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
assert any(l.startswith("define") and "gemm_small" in l for l in comp.ir("llvm").splitlines())
print("ok")
"""
    env = dict(os.environ, TRACEC_GEMM_LIBRARY="0", TRACEC_NO_CACHE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
