"""Slices read only by fused kernels (an RNN's gate chunks) are read in
place by the kernels' loop programs, with no copy step (cpu backend,
``indexing.folds_into_kernels`` and ``Lowering._kernel_reads``); strided
innermost slices (a max pool's taps) and slices read by a kernel that is
not one program (a sum of pads) are still copied.  Always equal to eager,
gradients included, at odd sizes."""
import re

import numpy as np
import pytest

import tracec


def _kernels(comp) -> list[str]:
    return sorted(set(re.findall(r"define[^@]*@\w+?_[0-9a-f]{12}_(\w+)", comp.ir("llvm"))))


def _gates(x):
    a, b, c, d = x.chunk(4, dim=-1)
    return a.sigmoid() * b.tanh() + c * d.exp()


@pytest.mark.parametrize("shape", [(3, 5, 12), (1, 7, 20), (2, 1, 4)])
def test_gate_chunks_are_read_in_place(shape):
    comp = tracec.compile(_gates, backend="cpu")
    x = tracec.randn(*shape)
    np.testing.assert_allclose(comp(x).numpy(), _gates(x).numpy(), rtol=1e-6, atol=1e-6)
    assert not [k for k in _kernels(comp) if k.startswith("slice")], _kernels(comp)


def test_lstm_like_step_with_gradients_matches_eager():
    tracec.manual_seed(0)
    p = tracec.randn(5, 3, 28, requires_grad=True)

    def step(h):
        p.grad = None
        total = 0
        for t in range(p.shape[0]):
            i, f, g, o = p[t].chunk(4, dim=1)
            h = f.sigmoid() * h + i.sigmoid() * g.tanh()
            total = total + (o.sigmoid() * h.tanh()).sum()
        total.backward()
        return total.detach(), p.grad
    comp = tracec.compile(step, backend="cpu")
    h = tracec.randn(3, 7)
    for _ in range(2):
        for g, w in zip(comp(h), step(h)):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_strided_innermost_slices_are_copied_together():
    def taps(x):
        return (x[..., ::2] > x[..., 1::2]).float() * x[..., 1::2], x[..., 2::2].tanh()
    comp = tracec.compile(taps, backend="cpu")
    x = tracec.randn(4, 3, 12)
    for g, w in zip(comp(x), taps(x)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    # x[..., ::2] and x[..., 1::2] (6 columns) share a copy program,
    # x[..., 2::2] (5 columns) gets its own
    kernels = _kernels(comp)
    assert "slices" in kernels and "slice" in kernels, kernels


def test_max_pool_taps_share_one_copy_with_gradients():
    import tracec.nn.functional as F

    def step(x):
        x.requires_grad_(True)
        y = F.max_pool2d(x, 2)
        (y * y.detach().tanh()).sum().backward()
        return y.detach(), x.grad
    comp = tracec.compile(step, backend="cpu")
    x = tracec.randn(3, 5, 10, 14)
    x = tracec.tensor(np.round(x.numpy() * 2) / 2)       # ties
    for g, w in zip(comp(x), step(x)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    kernels = _kernels(comp)
    assert "slices" in kernels and not [k for k in kernels if re.fullmatch(r"slice(_\d+)?", k)]


def test_slice_read_by_a_sum_of_pads_kernel_is_copied():
    # The kernel that sums the windows' gradient pads (padsum.py) also reads
    # a slice of q: that kernel is not one loop program, so q's slice gets
    # its copy step first.
    tracec.manual_seed(1)
    p = tracec.randn(2, 3, 7, 9, requires_grad=True)

    def step(x, q):
        p.grad = None
        h = (p * 2.0).relu()
        total = 0
        for k, (i, j) in enumerate([(0, 0), (1, 2), (2, 1)]):
            total = total + (h[:, :, i:5 + i, j:7 + j] * x[k]).sum()
        total.backward()
        return p.grad * q[:, :, 1:8, :]
    comp = tracec.compile(step, backend="cpu")
    x, q = tracec.randn(3, 5, 7), tracec.randn(2, 3, 9, 9)
    np.testing.assert_allclose(comp(x, q).numpy(), step(x, q).numpy(), rtol=1e-5, atol=1e-5)
    assert "padsum" in comp.ir("llvm")


def _im2col(x):
    # a 3x3 window im2col as conv2d makes it: nine shifted views stacked
    h, w = x.shape[-2] - 2, x.shape[-1] - 2
    return tracec.stack([x[..., i:i + h, j:j + w] for i in range(3) for j in range(3)], 2)


@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (1, 1, 5, 9), (3, 2, 4, 4)])
def test_same_shape_parts_are_stored_by_one_kernel(shape):
    """An im2col (same-shape shifted windows) is one concatenate kernel
    storing every window per point, equal to eager, gradients included."""
    def f(x):
        return (_im2col(x) * 2).sum(2)
    comp = tracec.compile(_im2col, backend="cpu")
    x = tracec.randn(*shape)
    np.testing.assert_array_equal(comp(x).numpy(), _im2col(x).numpy())
    assert [k for k in _kernels(comp) if k.startswith("concatenate")] == ["concatenate"], \
        _kernels(comp)
    w = tracec.randn(*shape, requires_grad=True)

    def step(t):
        loss = f(t * w).pow(2).sum()
        loss.backward()
        return loss
    want = step(x)
    g_eager = w.grad.numpy().copy()
    w.grad = None
    got = tracec.compile(step, backend="cpu")
    for _ in range(2):        # the second call runs the compiled step
        w.grad = None
        np.testing.assert_allclose(got(x).item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(w.grad.numpy(), g_eager, rtol=1e-5, atol=1e-5)


def test_same_shape_parts_with_a_symbolic_batch():
    comp = tracec.compile(_im2col, backend="cpu")
    for b in (2, 5, 3, 5):
        x = tracec.randn(b, 3, 6, 7)
        tracec.mark_dynamic(x, 0)
        np.testing.assert_array_equal(comp(x).numpy(), _im2col(x).numpy())
    info = comp.cache_info()
    assert info.compiles + info.loads == 1, info   # (a load when the disk cache holds it)
