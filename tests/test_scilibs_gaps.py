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
  tracec had no ``torch._utils``."""
import numpy as np
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
