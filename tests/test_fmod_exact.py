"""``torch.fmod``, ``%`` / ``remainder`` and floor division of floats are
exact as PyTorch's eager kernels (C's fmod: the remainder of the true
quotient), eagerly, compiled (the ``fmod`` primitive, LLVM's ``frem``) and
in their gradients; they were ``a - trunc(a / b) * b`` in float32, off by
ulps (``6.66 % 1.3``) and far off for large quotients (``1e10 % 3``)."""
import numpy as np
import pytest
import torch

import tracec

A = np.array([1e10, -7.5, 7.5, 0.3, -0.0, 5.0, 3.0, 2.5, 6.66, -6.66, 1e-30, 123456.789],
             np.float32)
B = np.array([3.0, 2.0, -2.0, 0.1, 1.0, np.inf, 0.0, 0.5, 1.3, 1.3, 7.0, -0.01], np.float32)


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), want.numpy())
    num = ~np.isnan(want.numpy())
    np.testing.assert_array_equal(np.signbit(np.asarray(got))[num], np.signbit(want.numpy())[num])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fmod_remainder_floor_divide_equal_torch(dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    xa, xb = tracec.from_numpy(a), tracec.from_numpy(b)
    _same(tracec.fmod(xa, xb).numpy(), torch.fmod(ta, tb))
    _same((xa % xb).numpy(), ta % tb)
    _same(tracec.floor_divide(xa, xb).numpy(), torch.floor_divide(ta, tb))
    _same((xa % 1.3).numpy(), ta % 1.3)
    c = tracec.compile(lambda u, v: (tracec.fmod(u, v), u % v, u // v))
    for _ in range(2):
        got = c(xa, xb)
    for g, w in zip(got, (torch.fmod(ta, tb), ta % tb, ta // tb)):
        _same(g.numpy(), w)


def test_gradients_equal_torch():
    a = A[[1, 2, 3, 8, 9, 11]].astype(np.float64)
    b = B[[1, 2, 3, 8, 9, 11]].astype(np.float64)
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    (torch.fmod(ta, tb).sum() + (torch.remainder(ta, tb) * 2).sum()).backward()
    xa, xb = (tracec.tensor(v, requires_grad=True) for v in (a, b))
    (tracec.fmod(xa, xb).sum() + (tracec.remainder(xa, xb) * 2).sum()).backward()
    np.testing.assert_array_equal(xa.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(xb.grad.numpy(), tb.grad.numpy())
    assert type(xa.grad).__name__ and tracec.fmod(xa, xb).grad_fn.name() == "FmodBackward0"
