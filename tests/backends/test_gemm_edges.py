"""The packed GEMM's edge tiles (tracec/backends/cpu/gemm.py
``_emit_microkernel``): N's edge at most one vector wide (its own narrow
loop) or wider (the full tile), rows past M, stored with masked vector
loads and stores over several K slices (the first assigns C, the others
add), for every operand layout; equal to torch, eager and compiled, and
the column split (``_column_blocks``) does not cut a narrow N."""
import numpy as np
import pytest
import torch

import tracec
from tracec.backends.cpu import gemm

# M = 37: four 8-row panels and 5 rows (AVX-512) or six 6-row and 1 (AVX2);
# K = 300: two K slices; N = 40: an 8-wide edge (float32: narrow loop,
# float64: one vector), 57: a 25-wide (float32) or 9-wide (float64) edge.
M, K = 37, 300


def _compiled(f, *args):
    """``f`` compiled for the cpu backend, its result on ``args`` from the
    native code (the first call runs eagerly while tracing)."""
    comp = tracec.compile(f, backend="cpu")
    comp(*args)
    return comp(*args)


def _products():
    return {"nn": lambda a, b: a @ b, "nt": lambda a, b: a @ b.t(),
            "tn": lambda a, b: a.t() @ b, "tt": lambda a, b: a.t() @ b.t()}


def _operands(layout, n, dtype):
    rng = np.random.default_rng(n)
    a_shape = (K, M) if layout[0] == "t" else (M, K)
    b_shape = (n, K) if layout[1] == "t" else (K, n)
    npd = np.float32 if dtype is tracec.float32 else np.float64
    return rng.standard_normal(a_shape).astype(npd), rng.standard_normal(b_shape).astype(npd)


@pytest.mark.parametrize("dtype", [tracec.float32, tracec.float64])
@pytest.mark.parametrize("n", [40, 57])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_edge_tiles_equal_torch(layout, n, dtype):
    assert gemm.suitable(dtype, M, n, K)
    f = _products()[layout]
    a, b = _operands(layout, n, dtype)
    want = f(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    ta, tb = tracec.from_numpy(a), tracec.from_numpy(b)
    tol = 1e-4 if dtype is tracec.float32 else 1e-11
    np.testing.assert_allclose(f(ta, tb).numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(_compiled(f, ta, tb).numpy(), want, rtol=tol, atol=tol)


def test_linear_grads_with_narrow_edge_equal_torch():
    """A decoder-like ``x @ W.T`` (N = 200: an 8-wide edge) with its input
    and weight gradients (M x K x N = 37 x 300 x 200 and 200 x 37 x 300)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((200, K)).astype(np.float32)
    g = rng.standard_normal((M, 200)).astype(np.float32)

    def step(x, w, g):
        return g @ w, g.t() @ x, x @ w.t()
    want = step(*map(torch.from_numpy, (x, w, g)))
    got = _compiled(step, *map(tracec.from_numpy, (x, w, g)))
    for o, e in zip(got, want):
        np.testing.assert_allclose(o.numpy(), e.numpy(), rtol=1e-4, atol=1e-3)


def test_narrow_n_is_not_split_when_rows_suffice():
    """N = 200 (7 panels) with 79 row blocks: one column block (a second
    would pack A, [M, K], again for a few panels); a short product still
    splits N for the threads, a wide one keeps its split."""
    assert gemm._column_blocks(1, 79, 7, 8) == 1
    assert gemm._column_blocks(1, 1, 7, 8) == 7
    assert gemm._column_blocks(1, 16, 64, 2) == 2


_AVX2_SCRIPT = """
import numpy as np, torch, tracec
from tracec.backends.cpu import codegen, gemm
rng = np.random.default_rng(0)
f = lambda a, b: a @ b.t()
# the host's library linked first: the x86-64-v3 code must call its own
# target's routines (a name-keyed table gave it the host's: heap corruption)
a, b = rng.standard_normal((37, 300)).astype(np.float32), rng.standard_normal((40, 300)).astype(np.float32)
host = tracec.compile(f, backend="cpu")
host(tracec.from_numpy(a), tracec.from_numpy(b))
np.testing.assert_allclose(host(tracec.from_numpy(a), tracec.from_numpy(b)).numpy(), a @ b.T,
                           rtol=1e-4, atol=1e-4)
with codegen.targeting("x86-64-v3"):
    for npd, d, tol in ((np.float32, tracec.float32, 1e-4), (np.float64, tracec.float64, 1e-11)):
        assert gemm.params_for(d)[1] == 6
        for n in (40, 45, 57):
            a = rng.standard_normal((37, 300)).astype(npd)
            b = rng.standard_normal((n, 300)).astype(npd)
            want = f(torch.from_numpy(a), torch.from_numpy(b)).numpy()
            comp = tracec.compile(f, backend="cpu")
            ta, tb = tracec.from_numpy(a), tracec.from_numpy(b)
            comp(ta, tb)
            np.testing.assert_allclose(comp(ta, tb).numpy(), want, rtol=tol, atol=tol,
                                       err_msg=f"{d} N = {n}")
print("ok")
"""


def test_avx2_edge_tiles_equal_torch(tmp_path):
    """The same micro-kernel for 256-bit vectors (x86-64-v3: VL 8 / 4, MR 6):
    N = 40, 45, 57 give float32 edges of 8 (narrow), 13, 9 and float64
    edges of none, 5, 1 (narrow).  In a process of its own, which links
    the host's GEMM library first: the x86-64-v3 code calls its own
    target's routines (``gemm_lib._linked`` was keyed by name only, and the
    host's, of other MR and NR, overran the buffers the caller sized: heap
    corruption)."""
    import os
    import subprocess
    import sys
    from tracec.backends.cpu import codegen
    if not codegen.host()[0].startswith("x86_64") or "+avx2" not in codegen.host()[2]:
        pytest.skip("this CPU does not run x86-64-v3 code")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, TRACEC_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _AVX2_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
