"""Which kernel a short product with A read transposed takes (issue 12).

``[K, M]^T @ [K, N]`` with few rows of C (a weight gradient ``g.T @ x``
over a small batch) takes the unpacked small kernel, whose one library
routine (``gemm_small_f32``: A's strides run-time arguments) also serves
``[M, K] @ [K, N]``: a program with short products of both layouts (an
MLP step) builds one small routine, not one per layout, and keeps the
small kernel's speed for its weight gradients (the packed GEMM packs both
operands: ~2x slower on these sizes).  Both layouts of the one routine,
and the GEMM the same sizes took before, give NumPy's product for odd
sizes (the masked last panel, the GEMM's edge tiles)."""
import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from tracec.backends.cpu import gemm_lib, gemm_small

#: (K, M, N): the GEMM suits the first (M >= MR on AVX2 and AVX-512; it
#: took the GEMM in the previous rule), not the second (M below either
#: MR), both suit the small kernel.
GEMM_SHAPE = (13, 11, 777)
SMALL_SHAPE = (13, 5, 100)


def _operands(K, M, N, d=np.float32):
    rng = np.random.default_rng(K * 1000 + M)
    return rng.standard_normal((K, M)).astype(d), rng.standard_normal((K, N)).astype(d)


def _compiled_product(a, b):
    f = tracec.compile(lambda x, y: x.t() @ y, backend="cpu")
    x, y = tracec.from_numpy(a), tracec.from_numpy(b)
    f(x, y)
    return f, f(x, y).numpy()


@pytest.fixture(scope="module")
def routed():
    """``{shape: (llvm ir, product)}`` of ``a.t() @ b``."""
    out = {}
    for shape in (GEMM_SHAPE, SMALL_SHAPE):
        a, b = _operands(*shape)
        f, c = _compiled_product(a, b)
        out[shape] = (f.ir("llvm"), c)
    return out


def test_one_small_routine_for_both_layouts():
    for d in (dt.float32, dt.float64):
        for K, M, N in (GEMM_SHAPE, SMALL_SHAPE, (32, 10, 512), (256, 10, 64), (8, 32, 64)):
            assert gemm_small.suitable(d, M, N, K, False)          # a short product
    names = [n for n, (kind, _, _) in gemm_lib.routines("float32").items() if kind == "small"]
    assert names == ["tracec_gemmlib_gemm_small_f32"]


@pytest.mark.parametrize("shape", [GEMM_SHAPE, SMALL_SHAPE])
def test_a_transposed_short_product_calls_the_small_routine(routed, shape):
    ir, c = routed[shape]
    assert "gemm_small_f32" in ir
    assert "gemm_run" not in ir
    a, b = _operands(*shape)
    np.testing.assert_allclose(c, a.astype(np.float64).T @ b.astype(np.float64),
                               rtol=1e-4, atol=1e-4)


def test_both_layouts_share_the_routine():
    """``x @ w`` and ``g.t() @ x`` in one function: one small routine
    declared, both products NumPy's."""
    K, M, N = GEMM_SHAPE
    a, b = _operands(K, M, N)
    f = tracec.compile(lambda g, x, w: (g.t() @ x, g @ w), backend="cpu")
    w = np.random.default_rng(3).standard_normal((M, N)).astype(np.float32)
    args = [tracec.from_numpy(v) for v in (a, b, w)]
    f(*args)
    gx, gw = (t.numpy() for t in f(*args))
    ir = f.ir("llvm")
    assert "gemm_small_f32" in ir and "gemm_run" not in ir
    np.testing.assert_allclose(gx, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, a.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_the_gemm_gives_the_same_values(monkeypatch):
    """The sizes the GEMM took before (small kernel disabled): equal to the
    small kernel's product within rounding."""
    a, b = _operands(*GEMM_SHAPE)
    monkeypatch.setenv("TRACEC_NO_CACHE", "1")
    monkeypatch.setattr(gemm_small, "conditions", lambda *args: None)
    f, other = _compiled_product(a, b)
    assert "gemm_run_tn_f32" in f.ir("llvm")
    np.testing.assert_allclose(other, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


def test_float64_route_equals_numpy():
    a, b = _operands(*GEMM_SHAPE, d=np.float64)
    f, c = _compiled_product(a, b)
    assert "gemm_small_f64" in f.ir("llvm")
    np.testing.assert_allclose(c, a.T @ b, rtol=1e-10, atol=1e-10)


def test_a_dynamic_batch_keeps_the_small_kernel_for_every_size():
    """``g.T @ h`` with the batch K symbolic: every batch, down to one
    row, gives NumPy's product (the small kernel needs K >= 8 and a large
    enough product: below, the sizes of the call choose another kernel)."""
    f = tracec.compile(lambda g, h: g.t() @ h, backend="cpu")
    rng = np.random.default_rng(5)
    for n in (64, 1, 3, 17, 40):
        g = rng.standard_normal((n, 10)).astype(np.float32)
        h = rng.standard_normal((n, 512)).astype(np.float32)
        out = f(tracec.mark_dynamic(tracec.from_numpy(g), 0, "B"),
                tracec.mark_dynamic(tracec.from_numpy(h), 0, "B")).numpy()
        np.testing.assert_allclose(out, g.astype(np.float64).T @ h, rtol=1e-4, atol=1e-4)
    assert f.cache_info().compiles + f.cache_info().loads == 1
    assert "gemm_small_f32" in f.ir("llvm")
