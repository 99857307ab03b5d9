"""Gaps that the Gaussian-process packages (``tests/programs/gplibs``:
GPyTorch, linear-operator, BoTorch) found in tracec, each checked against
torch without the packages."""
import numpy as np
import torch

import tracec


def test_standard_normal_draws_as_torch():
    """``torch.distributions.utils._standard_normal`` (GPyTorch's
    MultivariateNormal imports it) draws what torch draws."""
    import tracec.distributions.utils as tu
    outs = []
    for lib, u in ((torch, torch.distributions.utils), (tracec, tu)):
        lib.manual_seed(3)
        a = u._standard_normal((2, 3), dtype=lib.float64, device=lib.device("cpu"))
        b = u._standard_normal(lib.Size([4]), dtype=None, device=None)
        outs.append((a.dtype == lib.float64, b.dtype == lib.float32, a.numpy(), b.numpy()))
    assert outs[0][:2] == outs[1][:2] == (True, True)
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-12)
    np.testing.assert_allclose(outs[1][3], outs[0][3], rtol=1e-6)
