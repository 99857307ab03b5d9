"""``Tensor.unfold`` without grad is a view, as PyTorch's: writes through
it reach the base (and bump its version); with grad or while tracing it is
a gather with the same values and gradient."""
import numpy as np
import pytest
import torch

import tracec

CASES = [((10,), 0, 3, 2), ((2, 3, 8), 2, 2, 2), ((2, 3, 8), 1, 2, 1), ((4, 5), 0, 4, 1),
         ((), 0, 1, 1), ((6,), 0, 6, 3), ((3, 4), -1, 2, 3)]


@pytest.mark.parametrize("shape,d,size,step", CASES)
def test_unfold_is_a_view_writes_reach_the_base(shape, d, size, step):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x, y = tracec.tensor(a.copy()), torch.tensor(a.copy())
    u, v = x.unfold(d, size, step), y.unfold(d, size, step)
    assert tuple(u.shape) == tuple(v.shape) and u.stride() == v.stride()
    np.testing.assert_array_equal(u.numpy(), v.numpy())
    v0 = x._version
    u[..., 0] = -1
    v[..., 0] = -1
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert x._version == v0 + 1


def test_unfold_of_a_transposed_view_and_in_place_through_it():
    x = tracec.arange(12.).view(3, 4).t()
    y = torch.arange(12.).view(3, 4).t()
    x.unfold(1, 2, 2).mul_(3)      # windows that do not overlap
    y.unfold(1, 2, 2).mul_(3)
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_unfold_with_grad_and_compiled_match_torch():
    w = tracec.ones(5, requires_grad=True)
    wt = torch.ones(5, requires_grad=True)
    (w.unfold(0, 2, 1) * tracec.arange(2.)).sum().backward()
    (wt.unfold(0, 2, 1) * torch.arange(2.)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), wt.grad.numpy())

    def f(x):
        return x.unfold(1, 3, 2).sum(-1)
    x = tracec.randn(2, 9)
    np.testing.assert_allclose(tracec.compile(f)(x).numpy(), f(x).numpy(), rtol=1e-6)
