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
  is ``Vh``'s conjugate transpose), the derivative still refused."""
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
    with pytest.raises(NotImplementedError, match="linalg.svd: the derivative for complex"):
        tracec.linalg.svd(c.requires_grad_())
