"""Reductions beyond the core set (tracec/reductions_extra.py) against torch
2.13: values, indices, dtypes, named-tuple fields and gradients, NaN
handling, options (dim, keepdim, dtype, interpolation, correction), bad
input, and a few inside ``tracec.compile`` equal to eager."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from _compiled_check import assert_step_matches_eager
from _torch_ref import assert_same, run_both, torch

FLOATS = ["float32", "float64"]
NAN = float("nan")


def _r(shape, d, seed=0, distinct=True):
    rng = np.random.default_rng(seed)
    if distinct:  # no ties: order statistics pick unique elements
        n = int(np.prod(shape))
        return (rng.permutation(n).reshape(shape) * 0.37 - n / 7).astype(d)
    return rng.uniform(-2, 2, size=shape).astype(d)


def _cases(d):
    x, x3 = _r((4, 5), d), _r((2, 3, 4), d, 1)
    z = np.array([[1.0, 0.0, 2.0, 3.0], [0.0, 0.0, 1.5, -2.0], [1.1, 0.9, -1.2, 0.7]], d)
    withnan = np.array([[1.0, NAN, 3.0, -2.0, 0.5], [NAN, NAN, NAN, NAN, NAN],
                        [2.0, 4.0, -1.0, 6.0, 0.25]], d)
    ties = np.array([[3.0, 1.0, 2.0, 2.0, 3.0, 5.0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]], d)
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0], d)
    return {
        "prod": (lambda L, a: L.prod(a), [x]),
        "prod_dim": (lambda L, a: a.prod(1, keepdim=True), [x3]),
        "prod_zeros": (lambda L, a: L.prod(a, dim=1), [z]),
        "prod_zeros_all": (lambda L, a: L.prod(a[1]), [z]),
        "prod_dtype": (lambda L, a: L.prod(a, 0, dtype=L.float64), [x]),
        "nansum": (lambda L, a: L.nansum(a, 1), [withnan]),
        "nanmean": (lambda L, a: a.nanmean(dim=0, keepdim=True), [withnan]),
        "var_mean": (lambda L, a: L.var_mean(a, 1, correction=0), [x3]),
        "var_mean_unbiased": (lambda L, a: L.var_mean(a, 0, True), [x]),
        "std_mean": (lambda L, a: L.std_mean(a, dim=(0, 2), keepdim=True), [x3]),
        "std_mean_all": (lambda L, a: L.std_mean(a), [x3]),
        "aminmax": (lambda L, a: L.aminmax(a, dim=1), [x]),
        "aminmax_all": (lambda L, a: a.aminmax(), [x]),
        "median": (lambda L, a: L.median(a), [x]),
        "median_dim": (lambda L, a: a.median(1), [x]),
        "median_dim_keep": (lambda L, a: L.median(a, 0, keepdim=True), [x3]),
        "median_nan": (lambda L, a: L.median(a, 1), [withnan]),
        "median_nan_all": (lambda L, a: L.median(a), [withnan]),
        "nanmedian": (lambda L, a: L.nanmedian(a, 1), [withnan]),
        "nanmedian_all": (lambda L, a: a.nanmedian(), [withnan]),
        "kthvalue": (lambda L, a: L.kthvalue(a, 2, 1), [x]),
        "kthvalue_keep": (lambda L, a: a.kthvalue(2, dim=0, keepdim=True), [x3]),
        "mode": (lambda L, a: L.mode(a, 1), [ties]),
        "mode_keep": (lambda L, a: a.mode(0, keepdim=True), [ties]),
        "quantile": (lambda L, a: L.quantile(a, 0.3), [x]),
        "quantile_dim": (lambda L, a, b: L.quantile(a, b, dim=1, keepdim=True), [x3, q]),
        "quantile_list_lower": (lambda L, a, b: a.quantile(b, 0, interpolation="lower"), [x, q]),
        "quantile_higher": (lambda L, a: L.quantile(a, 0.4, 1, interpolation="higher"), [x]),
        "quantile_midpoint": (lambda L, a: L.quantile(a, 0.4, 1, interpolation="midpoint"),
                              [x]),
        "quantile_nearest": (lambda L, a, b: L.quantile(a, b, 1, interpolation="nearest"),
                             [x, q]),
        "quantile_nan": (lambda L, a: L.quantile(a, 0.5, 1), [withnan]),
        "nanquantile": (lambda L, a, b: L.nanquantile(a, b, 1), [withnan, q]),
        "cummax": (lambda L, a: L.cummax(a, 1), [x]),
        "cummin": (lambda L, a: a.cummin(0), [x3]),
        "cummax_ties_nan": (lambda L, a: L.cummax(a, 1), [np.array(
            [[1.0, 3.0, 2.0, 3.0, NAN, 5.0], [2.0, 2.0, 1.0, 4.0, 4.0, 0.0]], d)]),
        "logcumsumexp": (lambda L, a: L.logcumsumexp(a, 1), [x]),
        "logcumsumexp_far": (lambda L, a: a.logcumsumexp(0), [np.array(
            [-1000.0, 0.0, -float("inf"), 3.0, 900.0], d)]),
        "count_nonzero": (lambda L, a: L.count_nonzero(a, 1), [z]),
        "count_nonzero_all": (lambda L, a: a.count_nonzero(), [z]),
        "diff": (lambda L, a: L.diff(a), [x]),
        "diff_n2_dim0": (lambda L, a: a.diff(n=2, dim=0), [x]),
        "diff_prepend_append": (lambda L, a, p: L.diff(a, dim=1, prepend=p, append=p),
                                [x, _r((4, 2), d, 3)]),
        "histc": (lambda L, a: L.histc(a, bins=7, min=-2, max=3), [x]),
        "histc_auto": (lambda L, a: a.histc(5), [x]),
        "histc_equal": (lambda L, a: L.histc(a * 0 + 1, 3), [x]),
        "histogram": (lambda L, a: L.histogram(a, 4), [x]),
        "histogram_range_density": (lambda L, a, w: L.histogram(a, 3, range=(-1.0, 2.0),
                                                                 weight=w, density=True),
                                    [x, np.abs(_r((4, 5), d, 5, distinct=False))]),
        "histogram_edges": (lambda L, a, e: a.histogram(e), [x, np.array([-3, -1, 0, 2.5, 4], d)]),
        "searchsorted": (lambda L, s_, v: L.searchsorted(s_, v), [np.sort(x[0]), x[1:]]),
        "searchsorted_right_nd": (lambda L, s_, v: L.searchsorted(s_, v, right=True),
                                  [np.sort(x, 1), x[:, ::-1].copy()]),
        "searchsorted_side_int32": (lambda L, s_, v: L.searchsorted(s_, v, side="right",
                                                                    out_int32=True),
                                    [np.sort(x[0]), x[0]]),
        "searchsorted_sorter": (lambda L, s_, v: L.searchsorted(s_, v, sorter=L.argsort(s_)),
                                [x[0], x[2]]),
        "bucketize": (lambda L, v, b: L.bucketize(v, b), [x, np.sort(x[0])]),
        "bucketize_right": (lambda L, v, b: L.bucketize(v, b, right=True),
                            [x, np.sort(x[0][[1, 3]])]),
        "cov": (lambda L, a: L.cov(a), [x]),
        "cov_1d_correction0": (lambda L, a: L.cov(a[0], correction=0), [x]),
        "cov_weights": (lambda L, a, f, w: L.cov(a, fweights=f, aweights=w),
                        [x, np.array([1, 2, 1, 3, 1]), np.abs(_r((5,), d, 6, distinct=False))]),
        "corrcoef": (lambda L, a: a.corrcoef(), [x3[0]]),
        "gradient": (lambda L, a: L.gradient(a), [x3]),
        "gradient_edge2_spacing": (lambda L, a: L.gradient(a, spacing=0.5, dim=1, edge_order=2),
                                   [x]),
        "gradient_coords": (lambda L, a, c: L.gradient(a, spacing=(c,), dim=1), [x, np.cumsum(
            np.abs(_r((5,), d, 8, distinct=False)) + 0.1).astype(d)]),
        "gradient_coords_edge2": (lambda L, a, c, e: L.gradient(a, spacing=(c, e), dim=(1, 0),
                                                                 edge_order=2),
                                  [x, np.cumsum(np.abs(_r((5,), d, 8, distinct=False)) + 0.1
                                                ).astype(d), np.array([0.0, 0.5, 2.0, 2.2], d)]),
        "gradient_int": (lambda L, a: L.gradient(a, spacing=[2.0], dim=[-1]),
                         [np.arange(12).reshape(3, 4)]),
        "trapezoid": (lambda L, a: L.trapezoid(a), [x]),
        "trapezoid_x": (lambda L, a, b: L.trapezoid(a, b, dim=0), [x, np.sort(_r((4,), d, 4))]),
        "trapz_dx": (lambda L, a: L.trapz(a, dx=0.5), [x]),
        "cumulative_trapezoid": (lambda L, a: L.cumulative_trapezoid(a, dim=1), [x]),
    }


_NAMES = sorted(_cases("float32"))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", _NAMES)
def test_matches_torch(name, dtype):
    fn, arrays = _cases(dtype)[name]
    run_both(fn, *arrays, grad=not name.startswith(("histc", "histogram", "searchsorted",
                                                     "bucketize")))


def test_named_tuple_fields():
    x = tracec.tensor([[3.0, 1.0, 2.0]])
    assert x.median(1).values.item() == 2.0 and x.median(1).indices.item() == 2
    assert tracec.aminmax(x).min.item() == 1.0 and tracec.aminmax(x).max.item() == 3.0
    assert type(tracec.cummax(x, 1)).__name__ == "cummax"
    assert tracec.kthvalue(x, 1).indices.item() == 1
    assert tracec.mode(x).values.item() == 1.0


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_inputs(dtype):
    a = np.array([[3, 0, 2, 2], [1, 1, 0, 4]]).astype(dtype)
    for fn in (lambda L, t: L.prod(t), lambda L, t: L.prod(t, 1),
               lambda L, t: L.count_nonzero(t, 0), lambda L, t: L.cummax(t, 1),
               lambda L, t: L.cummin(t, 0), lambda L, t: L.diff(t),
               lambda L, t: L.aminmax(t), lambda L, t: L.nansum(t),
               lambda L, t: L.median(t, 1).values, lambda L, t: L.mode(t, 1),
               lambda L, t: L.kthvalue(t, 2, 1).values):
        try:
            want = fn(torch, torch.tensor(a))
        except RuntimeError:
            with pytest.raises(RuntimeError):
                fn(tracec, tracec.tensor(a))
            continue
        got = fn(tracec, tracec.tensor(a))
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert_same(g, w)


def test_bincount():
    a = np.array([1, 4, 1, 0, 4, 4])
    w = np.array([0.5, 1.0, 2.0, -1.0, 0.25, 3.0], np.float32)
    assert_same(tracec.bincount(tracec.tensor(a)), torch.bincount(torch.tensor(a)))
    assert_same(tracec.tensor(a).bincount(tracec.tensor(w), minlength=8),
                torch.tensor(a).bincount(torch.tensor(w), minlength=8))
    with pytest.raises(RuntimeError, match="non-negative"):
        tracec.bincount(tracec.tensor([-1, 2]))


def test_sum_to_size():
    a = np.arange(24.0).reshape(2, 3, 4)
    assert_same(tracec.tensor(a).sum_to_size(1, 3, 1), torch.tensor(a).sum_to_size(1, 3, 1))
    assert_same(tracec.tensor(a).sum_to_size((3, 4)), torch.tensor(a).sum_to_size((3, 4)))
    with pytest.raises(RuntimeError, match="not expandable"):
        tracec.tensor(a).sum_to_size(2, 4)


def test_bad_input():
    x = tracec.tensor([[1.0, 2.0]])
    with pytest.raises(RuntimeError, match="out of range"):   # (PyTorch 2.13: RuntimeError)
        tracec.kthvalue(x, 3)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\]"):
        tracec.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="float or double"):
        tracec.quantile(tracec.tensor([1, 2]), 0.5)
    with pytest.raises(ValueError, match="interpolation"):
        tracec.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="floating point"):
        tracec.nanmean(tracec.tensor([1, 2]))
    with pytest.raises(IndexError):
        tracec.median(x, 2)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_equals_eager(backend):
    w = tracec.tensor(_r((3, 6), "float32", 7, distinct=False), requires_grad=True)

    def step(x):
        y = x * w
        loss = (tracec.prod(y, 1).sum() + tracec.median(y, 1).values.sum()
                + tracec.quantile(y, 0.3, dim=1).sum() + tracec.cummax(y, 1).values.sum()
                + tracec.logcumsumexp(y, 1).sum() + tracec.nansum(y)
                + tracec.diff(y).pow(2).sum() + tracec.kthvalue(y, 2).values.sum())
        loss.backward()
        return loss

    assert_step_matches_eager(step, w, [tracec.tensor(_r((3, 6), "float32", seed, distinct=False))
                                        for seed in (1, 2)],
                              backend, atol=1e-5)
