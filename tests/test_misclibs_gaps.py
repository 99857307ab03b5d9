"""Gaps that the packages of ``tests/programs/misclibs`` (snntorch, ...)
found in tracec, each checked against torch without the packages:

- ``torch._C.Value`` (TorchScript's IR value class) exists, cannot be
  constructed, and is named ``torch.Value`` (snntorch's losses import it).

Not a tracec gap, recorded so the difference stays deliberate: torch
2.13's CPU ``torch.linalg.lstsq`` (default driver gelsy) returns rank 0 and
a zero solution when the matrix's FIRST column is all zero (pykan's
``refine`` builds such B-spline systems); tracec returns the least-squares
solution, as torch's own gelsd driver does.
"""
import numpy as np
import pytest
import torch

import tracec


def test_torch_C_Value_exists_and_has_no_constructor():
    for lib in (torch, tracec):
        cls = lib._C.Value
        assert (cls.__module__, cls.__qualname__) == ("torch", "Value")
        with pytest.raises(TypeError, match="No constructor defined"):
            cls()


def test_lstsq_with_a_leading_zero_column_solves_like_gelsd():
    torch.manual_seed(0)
    a = torch.rand(13, 4, dtype=torch.float64)
    a[:, 0] = 0
    b = torch.rand(13, 1, dtype=torch.float64)
    ref = torch.linalg.lstsq(a, b, driver="gelsd")
    got = tracec.linalg.lstsq(tracec.tensor(a.numpy()), tracec.tensor(b.numpy()))
    np.testing.assert_allclose(got.solution.numpy(), ref.solution.numpy(), rtol=1e-10, atol=1e-12)
    assert int(got.rank) == int(ref.rank) == 3
