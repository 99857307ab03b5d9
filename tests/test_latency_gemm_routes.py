"""Which kernel a short product with A read transposed takes (issue 12).

``[K, M]^T @ [K, N]`` with few rows of C (a weight gradient ``g.T @ x``
over a small batch) takes the packed GEMM of the per-machine library
(``gemm_run_tn``, which the step's other weight gradients use already)
wherever ``gemm.suitable`` holds, so a cold compile does not also build
``gemm_small_tn``; smaller products keep the unpacked small kernel.
Both routes give NumPy's product for odd sizes (the GEMM's edge tiles,
the small kernel's masked last panel)."""
import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from tracec.backends.cpu import gemm, gemm_small, matmul

#: (K, M, N): the GEMM suits the first (M >= MR on AVX2 and AVX-512), not
#: the second (M below either MR), both suit the small kernel.
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
    """``{shape: (llvm ir, product)}`` compiled with the route as it is."""
    out = {}
    for shape in (GEMM_SHAPE, SMALL_SHAPE):
        a, b = _operands(*shape)
        f, c = _compiled_product(a, b)
        out[shape] = (f.ir("llvm"), c)
    return out


def test_the_rule_follows_the_gemms_own_suitability():
    for d in (dt.float32, dt.float64):
        for K, M, N in (GEMM_SHAPE, SMALL_SHAPE, (32, 10, 512), (256, 10, 64), (8, 32, 64)):
            assert gemm_small.suitable(d, M, N, K, False)          # a short product
            want = gemm.suitable(d, M, N, K)
            assert matmul.small_a_transposed_takes_gemm(d, M, N, K, True) is want
            assert not matmul.small_a_transposed_takes_gemm(d, M, N, K, False)
    assert matmul.small_a_transposed_takes_gemm(dt.float32, 10, 512, 32, True)
    assert not matmul.small_a_transposed_takes_gemm(dt.float32, 5, 100, 13, True)


def test_a_transposed_short_product_calls_the_librarys_gemm(routed):
    ir, _ = routed[GEMM_SHAPE]
    assert "gemm_run_tn_f32" in ir
    assert "gemm_small" not in ir


def test_a_tiny_one_keeps_the_small_kernel(routed):
    ir, _ = routed[SMALL_SHAPE]
    assert "gemm_small_tn_f32" in ir
    assert "gemm_run" not in ir


@pytest.mark.parametrize("shape", [GEMM_SHAPE, SMALL_SHAPE])
def test_both_routes_equal_numpy(routed, shape, monkeypatch):
    a, b = _operands(*shape)
    ref = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(routed[shape][1], ref, rtol=1e-4, atol=1e-4)
    # The other route for the same sizes (compiled afresh: the cache's key
    # does not know of the patch): the small kernel for the GEMM's shape;
    # for the tiny one, what a product the small kernel does not take gets
    # (the GEMM does not suit it: the row kernel).
    monkeypatch.setenv("TRACEC_NO_CACHE", "1")
    monkeypatch.setattr(matmul, "small_a_transposed_takes_gemm",
                        lambda d, M, N, K, ta: ta and shape == SMALL_SHAPE)
    f, other = _compiled_product(a, b)
    ir = f.ir("llvm")
    if shape == GEMM_SHAPE:
        assert "gemm_small_tn_f32" in ir and "gemm_run" not in ir
    else:
        assert "gemm_small" not in ir and "gemm_run" not in ir
    np.testing.assert_allclose(other, ref, rtol=1e-4, atol=1e-4)


def test_float64_route_equals_numpy():
    a, b = _operands(*GEMM_SHAPE, d=np.float64)
    f, c = _compiled_product(a, b)
    assert "gemm_run_tn_f64" in f.ir("llvm")
    np.testing.assert_allclose(c, a.T @ b, rtol=1e-10, atol=1e-10)


def test_a_dynamic_batch_takes_the_gemm_for_every_size():
    """``g.T @ h`` with the batch K symbolic (its hint, 64, chooses the
    GEMM): every batch, down to one row, gives NumPy's product."""
    f = tracec.compile(lambda g, h: g.t() @ h, backend="cpu")
    rng = np.random.default_rng(5)
    for n in (64, 1, 3, 17, 40):
        g = rng.standard_normal((n, 10)).astype(np.float32)
        h = rng.standard_normal((n, 512)).astype(np.float32)
        out = f(tracec.mark_dynamic(tracec.from_numpy(g), 0, "B"),
                tracec.mark_dynamic(tracec.from_numpy(h), 0, "B")).numpy()
        np.testing.assert_allclose(out, g.astype(np.float64).T @ h, rtol=1e-4, atol=1e-4)
    assert f.cache_info().compiles + f.cache_info().loads == 1
    assert "gemm_run_tn_f32" in f.ir("llvm")
