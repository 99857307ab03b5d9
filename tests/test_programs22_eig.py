"""Gradients through ``torch.linalg.eig`` / ``eigvals`` (PyTorch's
linalg_eig_backward: real part for a real input, a loss depending on the
eigenvectors' phases refused), checked against torch; tracec refused any
input that required grad."""
import numpy as np
import pytest
import torch

import tracec

RNG = np.random.RandomState(3)
REAL = RNG.randn(4, 4)
CPLX = RNG.randn(3, 3) + 1j * RNG.randn(3, 3)


def _grads(lib, case):
    if case == "eigvals_real":
        A = lib.tensor(REAL).requires_grad_()
        return lib.autograd.grad(lib.linalg.eigvals(A).abs().sum(), A)[0]
    if case == "eig_real":
        A = lib.tensor(REAL).requires_grad_()
        L, V = lib.linalg.eig(A)
        loss = (L.real * 2).sum() + (V.abs() * lib.arange(4.)).sum()
        return lib.autograd.grad(loss, A)[0]
    if case == "eig_complex":
        Z = lib.tensor(CPLX).requires_grad_()
        L, V = lib.linalg.eig(Z)
        return lib.autograd.grad((L * L.conj()).real.sum() + V.abs().sum(), Z)[0]
    if case == "float32":
        A = lib.tensor(REAL.astype(np.float32)).requires_grad_()
        return lib.autograd.grad(lib.linalg.eig(A)[0].imag.pow(2).sum(), A)[0]
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["eigvals_real", "eig_real", "eig_complex", "float32"])
def test_eig_gradient_matches_torch(case):
    want, got = _grads(torch, case), _grads(tracec, case)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_eig_phase_dependent_loss_is_refused_as_in_torch():
    msgs = []
    for lib in (torch, tracec):
        Z = lib.tensor(CPLX).requires_grad_()
        _, V = lib.linalg.eig(Z)
        with pytest.raises(RuntimeError) as e:
            lib.autograd.grad(V.real.sum(), Z)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
