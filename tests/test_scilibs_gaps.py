"""Gaps that scientific-ML packages (``tests/programs/scilibs``: torchsde,
schedule_free, ...) found in tracec, each checked against torch without
the packages:

- ``Optimizer.load_state_dict`` of a live ``state_dict()`` aliases the
  state tensors whose dtype and device already match, as PyTorch's policy
  does (``.to`` returns its input); tracec copied them, so resuming a
  schedule-free optimizer from another one in the same process gave other
  weights than torch's;
- ``torch._utils._flatten_dense_tensors`` / ``_unflatten_dense_tensors``
  (neuraloperator's model-parallel helpers import them at import time):
  tracec had no ``torch._utils``;
- ``torch.linalg.svd`` / ``svdvals`` / ``torch.svd`` of complex matrices
  (neuraloperator's tensor-GaLore AdamW projects the complex spectral
  weights' gradients with tensorly's Tucker decomposition): tracec refused
  complex inputs; now LAPACK's gesdd as PyTorch's (``torch.svd``'s ``V``
  is ``Vh``'s conjugate transpose), differentiated by PyTorch's complex
  svd_backward;
- seeding a generator (torchsde's BrownianInterval seeds a fresh
  ``torch.Generator`` for every draw) ran MT19937's ``init_genrand`` as a
  Python loop, 0.2 ms a seed; now NumPy's C seeding (the same state);
- ``torch.mm`` / ``torch.matmul`` (and the methods) given a NumPy array
  (deepxde's IDE example passes its quadrature matrix) raise PyTorch's
  TypeError naming the argument and its position."""
import numpy as np
import pytest
import torch

import tracec


def _load_live_state(lib):
    lib.manual_seed(0)
    p = lib.nn.Parameter(lib.randn(3))
    q = lib.nn.Parameter(p.detach().clone())
    q64 = lib.nn.Parameter(p.detach().double())
    opt = lib.optim.Adam([p], lr=0.1)
    p.grad = lib.ones(3)
    opt.step()
    sd = opt.state_dict()
    opt2 = lib.optim.Adam([q], lr=0.1)
    opt2.load_state_dict(sd)
    opt3 = lib.optim.Adam([q64], lr=0.1)
    opt3.load_state_dict(sd)
    s, s2, s3 = opt.state[p], opt2.state[q], opt3.state[q64]
    shared = (s2["exp_avg"] is s["exp_avg"], s2["step"] is s["step"],
              s3["exp_avg"] is s["exp_avg"], s3["step"] is s["step"],
              str(s3["exp_avg"].dtype)[-7:], str(s3["step"].dtype)[-7:])
    # the first optimizer steps again; the second sees its moments move
    p.grad = lib.full((3,), 2.0)
    opt.step()
    q.grad = lib.ones(3)
    opt2.step()
    return shared, q.detach().numpy(), s2["exp_avg"].numpy()


def test_optimizer_load_state_dict_aliases_live_state_like_torch():
    (t_shared, t_q, t_m), (c_shared, c_q, c_m) = map(_load_live_state, (torch, tracec))
    assert c_shared == t_shared == (True, True, False, True, "float64", "float32")
    np.testing.assert_allclose(c_q, t_q, rtol=1e-6)
    np.testing.assert_allclose(c_m, t_m, rtol=1e-6)


def test_flatten_unflatten_dense_tensors_like_torch():
    outs = []
    for lib in (torch, tracec):
        mod = __import__(lib.__name__ + "._utils", fromlist=["_utils"])
        a = lib.arange(6.0).view(2, 3).t()          # not contiguous
        b, e = lib.ones(2), lib.zeros(0)
        flat = mod._flatten_dense_tensors([a, b, e])
        parts = mod._unflatten_dense_tensors(flat, [a, b, e])
        one = mod._flatten_dense_tensors([b])
        parts[1].mul_(3)                              # a view: writes flat
        outs.append((flat.numpy().tolist(), type(parts).__name__,
                     [tuple(p.shape) for p in parts], parts[0].numpy().tolist(),
                     one.data_ptr() == b.data_ptr()))
    assert outs[1] == outs[0]


def test_complex_svd_like_torch():
    torch.manual_seed(0)
    a = torch.randn(2, 6, 4, dtype=torch.complex64)
    c = tracec.tensor(a.numpy())
    U, S, Vh = torch.linalg.svd(a, full_matrices=False)
    u, s, vh = tracec.linalg.svd(c, full_matrices=False)
    assert (str(u.dtype), str(s.dtype), tuple(u.shape), tuple(vh.shape)) == \
        ("tracec.complex64", "tracec.float32", tuple(U.shape), tuple(Vh.shape))
    np.testing.assert_allclose(s.numpy(), S.numpy(), rtol=1e-5)
    # the singular vectors up to LAPACK's phase: the reconstruction, and |U|
    np.testing.assert_allclose((u * s.to(u.dtype)[..., None, :] @ vh).numpy(), a.numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(np.abs(u.numpy()), np.abs(U.numpy()), atol=1e-5)
    np.testing.assert_allclose(tracec.linalg.svdvals(c).numpy(), S.numpy(), rtol=1e-5)
    full = tracec.linalg.svd(c)
    assert tuple(full.U.shape) == (2, 6, 6) and tuple(full.Vh.shape) == (2, 4, 4)
    tu, ts, tv = tracec.svd(c)
    Tu, Ts, Tv = torch.svd(a)
    assert tv.is_conj() == Tv.is_conj()          # V = Vh.mH, a conjugate view in both
    tv = tv.resolve_conj()
    np.testing.assert_allclose((tu * ts.to(tu.dtype)[..., None, :] @ tv.mH).numpy(), a.numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(np.abs(tv.numpy()), np.abs(Tv.resolve_conj().numpy()), atol=1e-5)


def _phase_free_losses(lib, A):
    """Losses of a complex SVD that do not depend on the singular vectors'
    phases (U diag(e^{i phi}), Vh's conjugate phases)."""
    U, S, Vh = lib.linalg.svd(A, full_matrices=False)
    w = lib.arange(float(A.shape[-1]))
    return [(S * (lib.arange(float(S.shape[-1])) + 1)).sum(),
            ((U @ Vh).abs() ** 2 * w).sum(),
            ((U * S.to(U.dtype)[..., None, :]) @ Vh).abs().pow(3).sum(),
            (U.abs() ** 2 * lib.arange(float(U.shape[-1]))).sum() + (Vh.abs() ** 3).sum(),
            lib.linalg.svdvals(A).pow(2).sum()]


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_complex_svd_gradients_like_torch(shape):
    """PyTorch's svd_backward for complex matrices: conjugate transposes and
    the imaginary diagonal term, on losses blind to the vectors' phases."""
    torch.manual_seed(0)
    a = torch.randn(*shape, dtype=torch.complex128)
    for k in range(5):
        grads = []
        for lib in (torch, tracec):
            A = lib.tensor(a.numpy()).requires_grad_()
            _phase_free_losses(lib, A)[k].backward()
            grads.append(A.grad.resolve_conj().numpy())
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-8, atol=1e-10)
    # a loss that depends on the phases: refused with PyTorch's message
    for lib in (torch, tracec):
        A = lib.tensor(a.numpy()).requires_grad_()
        with pytest.raises(RuntimeError, match="specified up to multiplication by e"):
            lib.linalg.svd(A, full_matrices=False).U.real.sum().backward()


def test_generator_per_draw_seeding_like_torch():
    """A fresh generator seeded for each draw, as torchsde's ``_randn``."""
    seeds = [0, 1, 5489, 2**31 - 1, 2**32 + 17, 2**63 - 1, 67280421310721]
    outs = []
    for lib in (torch, tracec):
        draws = [lib.randn(3, generator=lib.Generator().manual_seed(s)).numpy() for s in seeds]
        lib.manual_seed(2**40 + 3)
        outs.append((np.stack(draws), lib.get_rng_state().numpy().tobytes(),
                     lib.rand(2, dtype=lib.float64).numpy()))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    assert outs[1][1] == outs[0][1]
    np.testing.assert_array_equal(outs[1][2], outs[0][2])


def test_mm_matmul_refuse_non_tensors_with_torchs_message():
    class Foo:
        pass
    calls = [("mm", lambda l, t, o: l.mm(o, t)), ("mm", lambda l, t, o: l.mm(t, o)),
             ("matmul", lambda l, t, o: l.matmul(o, t)), ("matmul", lambda l, t, o: l.matmul(t, o)),
             ("Tensor.mm", lambda l, t, o: t.mm(o)), ("Tensor.matmul", lambda l, t, o: t.matmul(o))]
    for other in (np.ones((2, 2)), [[1.0, 2.0], [3.0, 4.0]], Foo(), 3):
        for name, call in calls:
            msgs = []
            for lib in (torch, tracec):
                with pytest.raises(TypeError) as e:
                    call(lib, lib.ones(2, 2), other)
                msgs.append(str(e.value).split("\n")[0])
            assert msgs[1] == msgs[0], (name, msgs)
    a = tracec.ones(2, 3)
    assert a.mm(mat2=a.t()).sum().item() == 12.0 and a.matmul(other=a.t()).shape == (2, 2)
