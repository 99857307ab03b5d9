"""Ops whose code needed a size as a number keep one symbolic trace.

Under ``dynamic=True`` each of these specialized the sizes it met (an index
table made with NumPy, ``int(shift)``, ``np.eye(n)``, a loop ``while k <
n``, the piece count of a split), so every new size retraced.  Each now
builds what it needs from symbolic-capable primitives (iota arithmetic,
slices, ``take``) or guards on a count instead of the sizes: one trace over
odd and even sizes, values and gradients equal to eager on both backends;
where a guard flips, a new trace gives eager's answer (or its error)."""
import numpy as np
import pytest

import tracec
import tracec.nn.functional as F

T = tracec


def _x2(n):   # [B, T] = [n, n + 3]
    return np.random.RandomState(n).randn(n, n + 3).astype(np.float32)


def _x3(n):   # [2, 3, n]
    return np.random.RandomState(n).randn(2, 3, n).astype(np.float32)


def _x4(n):   # [2, 2, n, n + 3]
    return np.random.RandomState(n).randn(2, 2, n, n + 3).astype(np.float32)


CASES = {
    # 1. padding modes over a symbolic dimension
    "pad reflect": (_x3, lambda x: F.pad(x, (2, 1), mode="reflect")),
    "pad replicate": (_x3, lambda x: F.pad(x, (3, 2), mode="replicate")),
    "pad circular": (_x3, lambda x: F.pad(x, (2, 4), mode="circular")),
    "pad reflect 2d": (_x4, lambda x: F.pad(x, (2, 1, 1, 3), mode="reflect")),
    "pad replicate crop": (_x3, lambda x: F.pad(x, (-1, 2), mode="replicate")),
    # 2. interpolate by a scale factor, or to sizes made of sizes
    "interpolate linear x2": (_x3, lambda x: F.interpolate(x, scale_factor=2, mode="linear")),
    "interpolate linear x1.5 aligned": (_x3, lambda x: F.interpolate(
        x, scale_factor=1.5, mode="linear", align_corners=True)),
    "interpolate nearest x2": (_x3, lambda x: F.interpolate(x, scale_factor=2, mode="nearest")),
    "interpolate nearest x0.5": (_x3, lambda x: F.interpolate(x, scale_factor=0.5)),
    "interpolate nearest-exact x1.5": (_x3, lambda x: F.interpolate(
        x, scale_factor=1.5, mode="nearest-exact")),
    "interpolate bilinear x2": (_x4, lambda x: F.interpolate(x, scale_factor=2,
                                                             mode="bilinear")),
    "interpolate bilinear size": (_x4, lambda x: F.interpolate(
        x, size=(2 * x.shape[2], x.shape[3] + 3), mode="bilinear")),
    "interpolate bilinear size aligned": (_x4, lambda x: F.interpolate(
        x, size=(x.shape[2] + 1, x.shape[3] // 2), mode="bilinear", align_corners=True)),
    "interpolate nearest size": (_x4, lambda x: F.interpolate(
        x, size=(2 * x.shape[2], x.shape[3] + 3), mode="nearest")),
    # 3. cumulative extrema
    "cummax": (_x2, lambda x: x.cummax(0).values),
    "cummax indices": (_x2, lambda x: x.cummax(1).indices.float() * x),
    "cummin": (_x2, lambda x: x.cummin(1).values),
    # 4. constant index tensors, negative ones among them
    "x[[0, -1]]": (_x2, lambda x: x[T.tensor([0, -1])]),
    "x[:, [-2, 1, -1]]": (_x2, lambda x: x[:, T.tensor([-2, 1, -1])]),
    "index_select": (_x2, lambda x: x.index_select(1, T.tensor([0, 3, 1]))),
    # 5. creation and masks from sizes
    "eye(B)": (_x2, lambda x: T.eye(x.shape[0]) * x[:, :x.shape[0]]),
    "eye(B, T)": (_x2, lambda x: T.eye(x.shape[0], x.shape[1]) + x),
    "linspace(0, 1, T)": (_x2, lambda x: T.linspace(0, 1, x.shape[1]) * x),
    "linspace(-2, 3, B)": (_x2, lambda x: T.linspace(-2.0, 3, x.shape[0])[:, None] * x),
    "roll(x, T // 2, 1)": (_x2, lambda x: T.roll(x, x.shape[1] // 2, 1)),
    "roll(x, (B - 1, -T), (0, 1))": (_x2, lambda x: T.roll(x, (x.shape[0] - 1, -x.shape[1]),
                                                           (0, 1))),
    "roll(x, B) flat": (_x2, lambda x: T.roll(x, x.shape[0])),
    "triu(x, B // 3)": (_x2, lambda x: T.triu(x, diagonal=x.shape[0] // 3)),
    "tril(x, -(B // 2))": (_x2, lambda x: T.tril(x, -(x.shape[0] // 2))),
    # 6. a piece count that is the same at every size
    "chunk(2, 0)": (_x2, lambda x: T.cat([c.sum(0, keepdim=True) * (i + 1)
                                          for i, c in enumerate(x.chunk(2, 0))])),
    "chunk(2, 1)": (_x2, lambda x: T.cat([c * (i + 1) for i, c in enumerate(x.chunk(2, 1))],
                                         1)),
    "split(B // 2 + 1)": (_x2, lambda x: T.cat([c * (i + 1) for i, c in enumerate(
        x.split(x.shape[0] // 2 + 1, 0))])),
    "tensor_split(3, 1)": (_x2, lambda x: T.cat([c * (i + 1) for i, c in enumerate(
        x.tensor_split(3, 1))], 1)),
    "tensor_split(2, 0)": (_x2, lambda x: T.cat([c.sum(0, keepdim=True) * (i + 1)
                                                 for i, c in enumerate(x.tensor_split(2, 0))])),
}

SIZES = (5, 6, 9, 12)


def _weights(shape):
    return np.cos(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape) \
        .astype(np.float32)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("name", list(CASES))
def test_one_trace_over_sizes_equal_to_eager(backend, name):
    make, fn = CASES[name]
    f = tracec.compile(fn, dynamic=True, backend=backend)
    for n in SIZES:
        data = make(n)
        x, xe = T.tensor(data, requires_grad=True), T.tensor(data, requires_grad=True)
        y, ye = f(x), fn(xe)
        assert tuple(y.shape) == tuple(ye.shape), n
        np.testing.assert_allclose(y.detach().numpy(), ye.detach().numpy(), rtol=1e-6,
                                   atol=1e-6, err_msg=f"n={n}")
        w = T.tensor(_weights(tuple(ye.shape)))
        (y * w).sum().backward()
        (ye * w).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=f"gradient, n={n}")
    info = f.cache_info()
    assert info.traces == 1 and not info.size_notes, (info.reasons, info.size_notes)


def _same(f, fn, data):
    y, ye = f(T.tensor(data)), fn(T.tensor(data))
    np.testing.assert_allclose(y.numpy(), ye.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_piece_count_that_changes_is_a_new_trace(backend):
    """chunk(3) of 5 and 6 rows is 3 pieces, of 4 rows 2: the count is a
    guard (not the size), and where it flips the new trace is eager's."""
    fn = lambda x: T.cat([c.sum(0, keepdim=True) * (i + 1)        # noqa: E731
                          for i, c in enumerate(x.chunk(3, 0))])
    f = tracec.compile(fn, dynamic=True, backend=backend)
    for n in (5, 6, 7, 9):                   # 3 pieces each
        _same(f, fn, _x2(n))
    assert f.cache_info().traces == 1
    _same(f, fn, _x2(4))                      # 2 pieces
    assert f.cache_info().traces == 2
    # split by a size: the count is ceil(n / 4), 3 for 10..12, 2 for 6 (a
    # last piece of one row would be a size 1: specialized, as every size 1)
    g = lambda x: [c * 2 for c in x.split(4, 0)]                  # noqa: E731
    f = tracec.compile(g, dynamic=True, backend=backend)
    for n in (10, 11, 12, 6):
        out, ref = f(T.tensor(_x2(n))), g(T.tensor(_x2(n)))
        assert len(out) == len(ref)
        for a, b in zip(out, ref):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert f.cache_info().traces == 2


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_guards_that_flip_give_eager_answers_and_errors(backend):
    # a scan traced at 5 serves lengths up to its limit; past it, a new trace
    f = tracec.compile(lambda x: x.cummax(0).values, dynamic=True, backend=backend)
    for n in (5, 12, 40):
        _same(f, lambda x: x.cummax(0).values, _x2(n))
    assert f.cache_info().traces == 2
    # an index in range at 6 rows, out of range at 4: eager's error
    fn = lambda x: x[T.tensor([0, 4, -5])]                        # noqa: E731
    f = tracec.compile(fn, dynamic=True, backend=backend)
    for n in (6, 7, 9):
        _same(f, fn, _x2(n))
    assert f.cache_info().traces == 1
    with pytest.raises(IndexError, match="out of bounds"):
        f(T.tensor(_x2(4)))
    # reflect padding needs the size above the pad
    fn = lambda x: F.pad(x, (3, 3), mode="reflect")               # noqa: E731
    f = tracec.compile(fn, dynamic=True, backend=backend)
    for n in (5, 8):
        _same(f, fn, _x3(n))
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        f(T.tensor(_x3(3)))
    # tensor_split into parts of 2 or more is symbolic; parts of one or
    # none (7 or 4 rows in 6 parts) take static traces, as eager
    fn = lambda x: [p * 1 for p in x.tensor_split(6, 0)]          # noqa: E731
    f = tracec.compile(fn, dynamic=True, backend=backend)
    for n in (12, 13, 17, 7, 4):
        out, ref = f(T.tensor(_x2(n))), fn(T.tensor(_x2(n)))
        assert [tuple(p.shape) for p in out] == [tuple(p.shape) for p in ref]
        for a, b in zip(out, ref):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert f.cache_info().traces == 3


def test_a_scale_that_is_no_short_binary_fraction_still_specializes():
    """floor(n * 0.3) in double is no floor division of n: the size is
    needed as a number (one trace per size), and every answer is eager's."""
    fn = lambda x: F.interpolate(x, scale_factor=0.3, mode="nearest")  # noqa: E731
    f = tracec.compile(fn, dynamic=True)
    for n in (7, 10, 13):
        _same(f, fn, _x3(n))
    info = f.cache_info()
    assert info.traces == 3 and info.size_notes


def test_detach_keeps_symbolic_sizes():
    """``x.detach().shape`` in a symbolic trace is ``x``'s symbolic shape
    (it was the traced numbers, which specialized every size it met)."""
    def fn(x):
        d = x.detach()
        return d[:, : d.shape[1] - 1] * 2 + d.shape[0]
    f = tracec.compile(fn, dynamic=True)
    for n in (5, 6, 9):
        _same(f, fn, _x2(n))
    info = f.cache_info()
    assert info.traces == 1 and not info.size_notes, (info.reasons, info.size_notes)
