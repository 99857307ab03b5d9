"""Which kernel a short product with A read transposed takes (issue 12).

``[K, M]^T @ [K, N]`` with few rows of C (a weight gradient ``g.T @ x``
over a small batch) takes the small kernel when the module calls its
routine anyway (``gemm_small_f32``, whose A strides are run-time
arguments: one routine for both layouts, the MLP step's case, whose
forward ``x @ w`` is short too); in a module with no other small product
(the transformer step's head) it takes the packed GEMM wherever
``gemm.suitable`` holds, so a cold compile builds no small routine for it;
below the GEMM's sizes it takes the small kernel.  Every route gives
NumPy's product for odd sizes (the masked last panel, the GEMM's edge
tiles)."""
import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from tracec.backends.cpu import gemm, gemm_lib, gemm_small, matmul

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
    """``{shape: (llvm ir, product)}`` of ``a.t() @ b`` alone."""
    out = {}
    for shape in (GEMM_SHAPE, SMALL_SHAPE):
        a, b = _operands(*shape)
        f, c = _compiled_product(a, b)
        out[shape] = (f.ir("llvm"), c)
    return out


def test_the_rule():
    for d in (dt.float32, dt.float64):
        for K, M, N in (GEMM_SHAPE, SMALL_SHAPE, (32, 10, 512), (256, 10, 64), (8, 32, 64)):
            assert gemm_small.suitable(d, M, N, K, False)          # a short product
            want = gemm.suitable(d, M, N, K)
            assert matmul.small_a_transposed_takes_gemm(d, M, N, K, True) is want
            assert not matmul.small_a_transposed_takes_gemm(d, M, N, K, False)
    names = [n for n, (kind, _, _) in gemm_lib.routines("float32").items() if kind == "small"]
    assert names == ["tracec_gemmlib_gemm_small_f32"]


def test_alone_it_takes_the_gemm(routed):
    ir, c = routed[GEMM_SHAPE]
    assert "gemm_run_tn_f32" in ir and "gemm_small" not in ir
    a, b = _operands(*GEMM_SHAPE)
    np.testing.assert_allclose(c, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


def test_a_tiny_one_takes_the_small_kernel(routed):
    ir, c = routed[SMALL_SHAPE]
    assert "gemm_small_f32" in ir and "gemm_run" not in ir
    a, b = _operands(*SMALL_SHAPE)
    np.testing.assert_allclose(c, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


def _with_a_short_forward(shape):
    """``(g.t() @ x, g @ w)``: the second a short product of A untransposed,
    so the module calls the small routine anyway."""
    K, M, N = shape
    a, b = _operands(K, M, N)
    f = tracec.compile(lambda g, x, w: (g.t() @ x, g @ w), backend="cpu")
    w = np.random.default_rng(3).standard_normal((M, N)).astype(np.float32)
    args = [tracec.from_numpy(v) for v in (a, b, w)]
    f(*args)
    gx, gw = (t.numpy() for t in f(*args))
    return f.ir("llvm"), gx, gw, a, b, w


def test_beside_a_short_forward_both_share_the_small_routine():
    ir, gx, gw, a, b, w = _with_a_short_forward(GEMM_SHAPE)
    assert "gemm_small_f32" in ir and "gemm_run" not in ir
    np.testing.assert_allclose(gx, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, a.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_the_small_kernel_on_the_gemms_sizes_gives_the_gemms_values(routed, monkeypatch):
    """The A-transposed product of the GEMM's shape on the small kernel
    (the route a module with a short forward gives it) equals the GEMM's
    within rounding."""
    monkeypatch.setenv("TRACEC_NO_CACHE", "1")
    monkeypatch.setattr(matmul, "small_a_transposed_takes_gemm", lambda *args: False)
    a, b = _operands(*GEMM_SHAPE)
    f, c = _compiled_product(a, b)
    assert "gemm_small_f32" in f.ir("llvm") and "gemm_run" not in f.ir("llvm")
    np.testing.assert_allclose(c, routed[GEMM_SHAPE][1], rtol=1e-4, atol=1e-4)


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
