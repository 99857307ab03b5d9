"""Gradients through eigh, svd, svdvals, qr, pinv and lstsq against PyTorch
2.13 (``tracec/linalg_grads.py``): every output alone and together, tall,
wide, square and batched matrices, full_matrices, QR's modes.  Losses use
sign-invariant functions of singular vectors and eigenvectors (their sign is
LAPACK's choice), so the gradients are defined and must agree."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
SHAPES = {"square": (4, 4), "tall": (6, 3), "wide": (3, 5), "batched": (2, 4, 3)}


def _w(y):
    return np.linspace(-1.0, 1.5, y.numel()).reshape(tuple(y.shape))


CASES = {
    "svd_all": lambda L, a: sum(((t.abs() if i != 1 else t) * L.tensor(_w(t))).sum()
                                for i, t in enumerate(L.linalg.svd(a, full_matrices=False))),
    "svd_U": lambda L, a: (L.linalg.svd(a, full_matrices=False)[0] ** 2 * 3).sum()
    + (L.linalg.svd(a, full_matrices=False)[0].abs() * L.tensor(
        _w(L.linalg.svd(a, full_matrices=False)[0]))).sum(),
    "svd_Vh": lambda L, a: (L.linalg.svd(a, full_matrices=False)[2].abs()
                            * L.tensor(_w(L.linalg.svd(a, full_matrices=False)[2]))).sum(),
    "svd_full_matrices": lambda L, a: (lambda u, s, vh: (u[..., :, :s.shape[-1]] * s[..., None, :]
                                                         @ vh[..., :s.shape[-1], :]).sum()
                                       + (s * 2).sum())(*L.linalg.svd(a)),
    "svdvals": lambda L, a: (L.linalg.svdvals(a) * L.tensor(_w(L.linalg.svdvals(a)))).sum(),
    "nuclear_norm": lambda L, a: L.linalg.matrix_norm(a, "nuc").sum() if a.ndim == 2 else
    L.linalg.matrix_norm(a, "nuc").sum(),
    "qr": lambda L, a: sum((t.abs() * L.tensor(_w(t))).sum() for t in L.linalg.qr(a)),
    "qr_R": lambda L, a: (L.linalg.qr(a)[1].abs() ** 1.5).sum(),
    "pinv": lambda L, a: (L.linalg.pinv(a) * L.tensor(_w(L.linalg.pinv(a)))).sum(),
    "pinverse": lambda L, a: (L.pinverse(a) ** 2).sum(),
    "lstsq": lambda L, a: (L.linalg.lstsq(a, L.tensor(np.ones(tuple(a.shape[:-1]) + (2,)))
                                          ).solution ** 2).sum(),
}
SYM = {
    "eigh_all": lambda L, a: sum(((t.abs() if i else t) * L.tensor(_w(t))).sum()
                                 for i, t in enumerate(L.linalg.eigh(a + a.mT))),
    "eigh_vectors": lambda L, a: (L.linalg.eigh(a @ a.mT)[1] ** 2 * L.tensor(
        _w(L.linalg.eigh(a @ a.mT)[1]))).sum(),
    "eigh_upper": lambda L, a: (L.linalg.eigh(a, UPLO="U")[0] ** 2).sum(),
    "eigvalsh": lambda L, a: (L.linalg.eigvalsh(a + a.mT) ** 3).sum(),
}


def _grads(f, data):
    out = []
    for L in (torch, tracec):
        a = L.tensor(data, requires_grad=True)
        f(L, a).backward()
        out.append(a.grad.numpy())
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_factorization_gradients_match_pytorch(case, shape):
    data = RNG.standard_normal(SHAPES[shape])
    want, got = _grads(CASES[case], data)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("case", sorted(SYM))
def test_eigh_gradients_match_pytorch(case, n):
    data = RNG.standard_normal((n, n))
    want, got = _grads(SYM[case], data)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)


def test_float32_and_finite_differences():
    data = RNG.standard_normal((5, 3)).astype(np.float32)
    want, got = _grads(CASES["svd_all"], data)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    # the float64 gradient of a sign-invariant SVD loss against central differences
    a0 = RNG.standard_normal((4, 3))
    f = CASES["svd_all"]
    ana = _grads(f, a0)[1]
    num = np.zeros_like(a0)
    for idx in np.ndindex(a0.shape):
        d = np.zeros_like(a0)
        d[idx] = 1e-6
        num[idx] = (f(tracec, tracec.tensor(a0 + d)).item()
                    - f(tracec, tracec.tensor(a0 - d)).item()) / 2e-6
    np.testing.assert_allclose(ana, num, rtol=1e-5, atol=1e-6)


def test_qr_modes_refused_as_pytorch():
    for mode, shape in (("r", (4, 3)), ("complete", (5, 3))):
        msgs = []
        for L in (torch, tracec):
            a = L.tensor(RNG.standard_normal(shape), requires_grad=True)
            R = L.linalg.qr(a, mode=mode)[1]
            with pytest.raises(RuntimeError) as e:
                R.sum().backward()
            msgs.append(str(e.value))
        assert msgs[1] in msgs[0]


@pytest.mark.parametrize("name", ["svd", "svdvals", "pinv"])
def test_non_finite_input_raises_pytorchs_linalg_error(name):
    a = np.array([[1.0, np.nan], [3.0, 4.0], [5.0, 6.0]], np.float32)
    with pytest.raises(torch.linalg.LinAlgError) as want:
        getattr(torch.linalg, name)(torch.tensor(a))
    with pytest.raises(tracec.linalg.LinAlgError) as got:
        getattr(tracec.linalg, name)(tracec.tensor(a))
    assert str(got.value) == str(want.value) and isinstance(got.value, RuntimeError)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_general_eig_matches_pytorch(dtype):
    a = RNG.standard_normal((2, 5, 5)).astype(dtype)
    w, v = tracec.linalg.eig(tracec.tensor(a))
    tw, tv = torch.linalg.eig(torch.tensor(a))
    assert str(w.dtype).split(".")[-1] == str(tw.dtype).split(".")[-1]
    order = lambda x: np.sort_complex(np.round(x, 4))  # noqa: E731
    np.testing.assert_allclose(order(w.numpy()), order(tw.numpy()), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tracec.linalg.eigvals(tracec.tensor(a)).numpy(), w.numpy())
    # unit eigenvectors, A v = w v (the phase of each is LAPACK's choice)
    vn, wn = v.numpy(), w.numpy()
    np.testing.assert_allclose(np.linalg.norm(vn, axis=-2), 1.0, rtol=1e-5)
    np.testing.assert_allclose(a @ vn, vn * wn[..., None, :], atol=1e-4)
    # the derivative is PyTorch's (tests/test_programs22_eig.py for more)
    grads = []
    for lib in (tracec, torch):
        x = lib.tensor(a, requires_grad=True)
        grads.append(lib.autograd.grad(lib.linalg.eigvals(x).abs().sum(), x)[0].numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-3, atol=1e-4)
