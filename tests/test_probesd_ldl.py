"""torch.linalg.ldl_factor / ldl_factor_ex / ldl_solve (were missing),
checked against torch 2.13 in the same process: LAPACK's compact factor
(lower, column-major), its pivots (negative pairs for 2x2 blocks), info,
the Hermitian variant, batches, errors, and PyTorch's missing derivative."""
import numpy as np
import pytest
import torch

import tracec


def _sym(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    a = (a + np.swapaxes(a, -1, -2)).astype(dtype)
    return a


def _both(a):
    return tracec.from_numpy(a.copy()), torch.from_numpy(a.copy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_factor_and_solve_match_torch(dtype, hermitian):
    rng = np.random.default_rng(3)
    a = _sym(rng, (3, 6, 6), dtype)
    if hermitian and np.dtype(dtype).kind == "c":
        a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    b = rng.standard_normal((6, 2)).astype(dtype)
    ta, pa = _both(a)
    tb, pb = _both(b)
    tr, pr = tracec.linalg.ldl_factor_ex(ta, hermitian=hermitian), \
        torch.linalg.ldl_factor_ex(pa, hermitian=hermitian)
    assert type(tr).__name__ == type(pr).__name__.rpartition(".")[2] == "linalg_ldl_factor_ex"
    tol = 1e-5 if dtype is np.float32 else 1e-12
    np.testing.assert_allclose(tr.LD.numpy(), pr.LD.numpy(), rtol=tol, atol=tol)
    assert tr.LD.stride() == pr.LD.stride() == (36, 1, 6)
    assert tr.pivots.dtype == tracec.int32 and tr.pivots.tolist() == pr.pivots.tolist()
    assert tr.info.tolist() == pr.info.tolist() == [0, 0, 0]
    LD, piv = tracec.linalg.ldl_factor(ta, hermitian=hermitian)
    X = tracec.linalg.ldl_solve(LD, piv, tb, hermitian=hermitian)
    Y = torch.linalg.ldl_solve(pr.LD, pr.pivots, pb, hermitian=hermitian)
    assert X.shape == Y.shape and X.stride() == Y.stride()
    np.testing.assert_allclose(X.numpy(), Y.numpy(), rtol=10 * tol, atol=10 * tol)


def test_ldl_two_by_two_pivots_and_singular_matrix():
    a = np.array([[0., 1., 2.], [1., 0., 3.], [2., 3., 0.]])
    ta, pa = _both(a)
    assert tracec.linalg.ldl_factor(ta).pivots.tolist() == \
        torch.linalg.ldl_factor(pa).pivots.tolist()
    z = np.zeros((3, 3))
    tz, pz = _both(z)
    tr, pr = tracec.linalg.ldl_factor_ex(tz), torch.linalg.ldl_factor_ex(pz)
    assert tr.info.item() == pr.info.item() == 1
    assert tr.pivots.tolist() == pr.pivots.tolist()
    for lib, x in ((tracec, tz), (torch, pz)):
        with pytest.raises(RuntimeError, match="Unknown error code: 1"):
            lib.linalg.ldl_factor(x)
    e = np.zeros((0, 0))
    assert tracec.linalg.ldl_factor(tracec.from_numpy(e)).LD.shape == (0, 0)


def _error(lib, fn):
    with pytest.raises(Exception) as e:
        fn(lib)
    return type(e.value).__name__, str(e.value)


BAD = [lambda L: L.linalg.ldl_factor(L.ones(3, 4)),
       lambda L: L.linalg.ldl_factor(L.ones(3)),
       lambda L: L.linalg.ldl_factor(L.ones(3, 3, dtype=L.int64)),
       lambda L: L.linalg.ldl_factor(L.ones(3, 3, dtype=L.float16)),
       lambda L: L.linalg.ldl_solve(L.eye(3), L.tensor([1, 2, 3], dtype=L.int32), L.ones(3)),
       lambda L: L.linalg.ldl_solve(L.eye(3), L.tensor([1., 2., 3.]), L.ones(3, 1)),
       lambda L: L.linalg.ldl_solve(L.eye(3), L.tensor([1, 2], dtype=L.int32), L.ones(3, 1)),
       lambda L: L.linalg.ldl_solve(L.eye(3), L.tensor([1, 2, 3], dtype=L.int32),
                                    L.ones(4, 1)),
       lambda L: L.linalg.ldl_solve(L.eye(3), L.tensor([1, 2, 3], dtype=L.int32),
                                    L.ones(3, 1, dtype=L.float64))]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_ldl_errors_are_torchs(i):
    assert _error(tracec, BAD[i]) == _error(torch, BAD[i])


def test_ldl_has_no_derivative_as_in_torch():
    for lib in (tracec, torch):
        a = lib.eye(3, dtype=lib.float64).requires_grad_()
        LD, piv = lib.linalg.ldl_factor(a)
        assert LD.requires_grad
        with pytest.raises(RuntimeError,
                           match="derivative for aten::linalg_ldl_factor_ex is not implemented"):
            LD.sum().backward()
        b = lib.ones(3, 1, dtype=lib.float64, requires_grad=True)
        X = lib.linalg.ldl_solve(LD.detach(), piv, b)
        with pytest.raises(RuntimeError,
                           match="derivative for aten::linalg_ldl_solve is not implemented"):
            X.sum().backward()
