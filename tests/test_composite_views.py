"""``Tensor.unfold`` is a view, as PyTorch's: writes through it reach the
base (and bump its version), eagerly with or without grad and inside
``tracec.compile`` (``tracec.composite_views``); a write to the base is seen
through it; a compiled function returns it as a view of its argument."""
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


def _program(T, x0, mode):
    """A step that reads or writes through ``unfold`` views (``mode``)."""
    x = T.tensor(x0, requires_grad=True)

    def fn(x):
        y = x * 1.5
        w = y.unfold(1, 3, 2)                  # overlapping windows
        if mode == "write through":
            w[:, 0].mul_(2.0)
            return (y * y).sum()
        if mode == "stale read":
            z = w.sum(-1)
            y.add_(1.0)                        # seen through w
            return (w * w).sum() + z.sum()
        if mode == "read":
            return (w.transpose(1, 2) ** 2).sum()
        u = y.unfold(-1, 2, 2)                 # "setitem": disjoint windows
        u[..., 0] = u[..., 1] * 3
        return y.sin().sum()
    return fn, x


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("mode", ["write through", "stale read", "read", "setitem"])
def test_writes_through_unfold_and_reads_after_base_writes_match_torch(mode, backend):
    x0 = np.random.RandomState(0).randn(2, 7, 4, 4).astype(np.float32)
    fn, xt = _program(torch, x0, mode)
    lt = fn(xt)
    lt.backward()
    fn, xe = _program(tracec, x0, mode)
    le = fn(xe)
    le.backward()
    np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-5)
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    fn, xc = _program(tracec, x0, mode)
    cf = tracec.compile(fn, backend=backend)
    for _ in range(3):                         # recorded call, then compiled ones
        xc.grad = None
        lc = cf(xc)
        lc.backward()
        np.testing.assert_allclose(lc.item(), lt.item(), rtol=1e-5)
        np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_a_compiled_write_through_unfold_reaches_the_argument():
    def f(x):
        x.unfold(0, 2, 2)[0].fill_(5.0)
        return x.sum()
    cf = tracec.compile(f)
    for _ in range(3):
        x, y = tracec.arange(6.), torch.arange(6.)
        assert cf(x).item() == f(y).item()
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_a_returned_unfold_is_a_view_of_the_argument():
    cf = tracec.compile(lambda x: x.unfold(0, 3, 1))
    for _ in range(3):
        x = tracec.arange(6.)
        w = cf(x)
        assert w.stride() == (1, 1) and w._base is x
        w[1, 2] = -1.0                         # x[3]
        assert x[3].item() == -1.0


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_as_strided_with_grad_and_compiled_is_a_view(backend):
    """``as_strided`` of a contiguous tensor: a write through it reaches the
    source, a write to the source is seen through it, gradients as torch's."""
    def step(T, x0):
        x = T.tensor(x0, requires_grad=True)

        def fn(x):
            y = x * 2.0
            v = T.as_strided(y, (3, 2), (2, 3), 1)
            w = y.as_strided((2, 2), (1, 2))
            v.add_(1.0)                        # reaches y
            s = w.sum()                        # reads y after the write
            y.add_(3.0)                        # seen through w
            return s + (w * v.sum()).sum() + y.sum()
        return fn, x
    x0 = np.random.RandomState(1).randn(12).astype(np.float32)
    fn, xt = step(torch, x0)
    lt = fn(xt)
    lt.backward()
    fn, xc = step(tracec, x0)
    cf = tracec.compile(fn, backend=backend)
    for _ in range(3):
        xc.grad = None
        lc = cf(xc)
        lc.backward()
        np.testing.assert_allclose(lc.item(), lt.item(), rtol=1e-5)
        np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
