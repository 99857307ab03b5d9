"""Sums of zero pads (the gradients of slices) computed window by window on
the cpu backend (tracec/backends/cpu/padsum.py): disjoint windows that tile
the output (an LSTM's per-step gates), disjoint ones that do not, overlapping
ones (col2im) with the rest of the kernel reading the sum, odd and symbolic
sizes, float64 and integers; always equal to eager."""
import numpy as np
import pytest

import tracec


def _grad_step(loss_fn, shape, dtype=tracec.float32, seed=0, **kw):
    """(eager, compiled) steps returning the gradient of ``loss_fn(p, x)``
    with respect to a parameter ``p`` of ``shape``."""
    tracec.manual_seed(seed)
    p = tracec.randn(*shape, dtype=dtype, requires_grad=True)

    def step(x):
        p.grad = None
        loss_fn(p, x).backward()
        return p.grad
    return step, tracec.compile(step, backend="cpu", **kw)


def _check(eager, comp, x, rtol=1e-6):
    want = eager(x).numpy()
    got = comp(x).numpy()
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    return comp.ir("llvm")


def _time_slices(p, x):
    # p: [T, B, F]; every step reads its slab, its four gate chunks differently.
    total = 0
    for t in range(p.shape[0]):
        a, b, c, d = p[t].chunk(4, dim=1)
        total = total + ((a * x).tanh() + b.sigmoid() * c - d * d).sum()
    return total


@pytest.mark.parametrize("shape", [(5, 3, 8), (7, 2, 12)])
def test_disjoint_tiling_windows(shape):
    eager, comp = _grad_step(_time_slices, shape)
    x = tracec.randn(shape[1], shape[2] // 4)
    assert "padsum" in _check(eager, comp, x)


def test_disjoint_windows_not_covering():
    def loss(p, x):         # rows 1 and 3 of 5 are never read: zero gradient
        return (p[0] * x).sum() + (p[2] * x).exp().sum() + (p[4] * x).sin().sum()
    eager, comp = _grad_step(loss, (5, 9))
    llvm = _check(eager, comp, tracec.randn(9))
    assert "padsum_fill" in llvm and "padsum" in llvm


def _conv_windows(p, x):
    # Nine shifted windows of relu(2 p): an im2col; the gradient is col2im
    # (overlapping windows) under the relu's mask, in one kernel.
    h = (p * 2.0).relu()
    n, c, hh, ww = h.shape
    total = 0
    k = 0
    for i in range(3):
        for j in range(3):
            total = total + (h[:, :, i:hh - 2 + i, j:ww - 2 + j] * x[k]).sum()
            k += 1
    return total


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 2, 5, 5)])
def test_overlapping_windows_under_a_mask(shape):
    eager, comp = _grad_step(_conv_windows, shape)
    x = tracec.randn(9, shape[2] - 2, shape[3] - 2)
    # The windows span N whole: one pass, image by image (N > 1).
    llvm = _check(eager, comp, x, rtol=1e-5)
    assert ("padsum_blocked" in llvm) == (shape[0] > 1) and "padsum" in llvm


def test_float64_and_repeated_calls():
    eager, comp = _grad_step(_time_slices, (4, 3, 8), dtype=tracec.float64)
    x = tracec.randn(3, 2, dtype=tracec.float64)
    for _ in range(3):
        _check(eager, comp, x, rtol=1e-12)


def test_symbolic_sizes(tmp_path, monkeypatch):
    """Symbolic sizes (one trace for every size): the windows' sizes are
    run-time values, so the sum is filled then accumulated; equal to eager.
    (A fresh cache: ``ir("llvm")`` of a symbolic trace loaded from the disk
    cache cannot be rebuilt, its size hints are not kept.)"""
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))
    def step(x, p):
        p.grad = None
        sum(((p[:, t] * x).tanh()).sum() for t in range(p.shape[1])).backward()
        return p.grad
    comp = tracec.compile(step, backend="cpu", dynamic=True)
    tracec.manual_seed(0)
    for b, f in ((3, 6), (5, 7), (2, 3)):
        p = tracec.randn(b, 4, f, requires_grad=True)
        x = tracec.randn(b, f)
        pe = p.detach().clone().requires_grad_(True)
        step(x, pe)
        np.testing.assert_allclose(comp(x, p).numpy(), pe.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert comp.cache_info().traces == 1
    llvm = comp.ir("llvm")
    assert "padsum_fill" in llvm and "padsum" in llvm


def test_integer_pads_sum():
    """Integer sums of pads (no autodiff: pads written out) match eager."""
    import tracec.nn.functional as F

    def f(x):
        return (F.pad(x[0], (0, 3)) + F.pad(x[1], (1, 2)) + F.pad(x[2], (3, 0)))
    x = tracec.randint(-50, 50, (3, 2, 4))
    want = f(x).numpy()
    comp = tracec.compile(f, backend="cpu")
    np.testing.assert_array_equal(comp(x).numpy(), want)
    assert "padsum" in comp.ir("llvm")


def _strided_windows(stride, k=3):
    def loss(p, x):
        # k*k windows of relu(2 p) taken with a stride (a strided conv's
        # im2col); their gradients are pads with interior zeros.
        h = (p * 2.0).relu()
        n, c, hh, ww = h.shape
        oh, ow = (hh - k) // stride + 1, (ww - k) // stride + 1
        total = 0
        for i in range(k):
            for j in range(k):
                w = h[:, :, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride]
                total = total + (w * x[i * k + j, :oh, :ow]).sum()
        return total
    return loss


@pytest.mark.parametrize("shape,stride", [((2, 3, 9, 11), 2), ((3, 2, 10, 7), 3), ((1, 2, 7, 7), 2)])
def test_strided_windows_are_a_padsum(shape, stride):
    """A strided conv's col2im: windows at a stride (pads with interior
    zeros) are summed window by window, not as a fused kernel testing
    every term at every element (CapsNet's step spent 75% of its time so)."""
    eager, comp = _grad_step(_strided_windows(stride), shape)
    x = tracec.randn(9, shape[2], shape[3])
    llvm = _check(eager, comp, x, rtol=1e-5)
    assert "padsum" in llvm


def test_more_windows_than_one_blocked_kernel_holds():
    """40 overlapping strided windows spanning the batch: split over
    several ``padsum_blocked`` kernels (BLOCKED_PROGRAMS each), the same
    additions in the same order."""
    from tracec.backends.cpu import padsum

    def loss(p, x):
        h = (p * 2.0).relu()
        total = 0
        for r in range(4):          # 4 convs of 10 windows read the same input
            for k in range(10):
                total = total + (h[:, :, k:k + 9:2] * (x[k] + r)).sum()
        return total
    eager, comp = _grad_step(loss, (3, 2, 19))
    llvm = _check(eager, comp, tracec.randn(10, 5), rtol=1e-5)
    assert llvm.count("padsum_blocked") >= 2 * (40 // padsum.BLOCKED_PROGRAMS + 1) - 1


def test_interleaved_lattices_are_disjoint():
    """Windows with one step whose offsets differ by a non-multiple of it
    share no element (a max pool's taps); congruent offsets overlapping in
    range do; disjoint windows whose sizes add up to the output cover it."""
    from tracec.backends.cpu.padsum import _disjoint_cover
    taps = [((0, 0, a, b), (2, 3, 4, 5), (1, 1, 2, 2)) for a in (0, 1) for b in (0, 1)]
    assert _disjoint_cover(taps, (2, 3, 8, 10)) == (True, True)
    assert _disjoint_cover(taps[:3], (2, 3, 8, 10)) == (True, False)
    # offsets 0 and 2 with step 2 meet at element 2, 4, ...
    overlap = [((0, 0), (2, 4), (1, 2)), ((0, 2), (2, 4), (1, 2))]
    assert _disjoint_cover(overlap, (2, 10)) == (False, False)
    # congruent offsets with ranges apart: disjoint (columns 0, 2 and 4, 6 of 8)
    apart = [((0, 0), (2, 2), (1, 2)), ((0, 4), (2, 2), (1, 2))]
    assert _disjoint_cover(apart, (2, 8)) == (True, False)


@pytest.mark.parametrize("shape", [(2, 3, 8, 10), (3, 1, 6, 6)])
def test_interleaved_taps_gradient_is_stored_window_by_window(shape):
    """The gradient of a 2x2 stride-2 tiling's four taps (a max pool's):
    interleaved windows covering the input, stored without a zero fill, the
    same bits as eager."""
    def loss(p, x):
        h = (p * 2.0).relu()
        return sum(((h[:, :, a::2, b::2] * x[2 * a + b]) ** 2).sum()
                   for a in (0, 1) for b in (0, 1))
    eager, comp = _grad_step(loss, shape)
    x = tracec.randn(4, shape[2] // 2, shape[3] // 2)
    np.testing.assert_array_equal(comp(x).numpy(), eager(x).numpy())
    llvm = comp.ir("llvm")
    assert "padsum_blocked" in llvm and "padsum_fill" not in llvm
