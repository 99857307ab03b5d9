"""The scatter/gather family and selection ops against PyTorch: values,
dtypes, shapes, gradients, in-place forms and error messages."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from _torch_ref import rnd, run_both, torch

R = np.random.default_rng(0)
X34 = rnd(R, (3, 4), "float64")
X3 = rnd(R, (3,), "float64")
I_ROW = np.array([[1, 0, 2, 2], [2, 2, 0, 1]])          # dim 0 into 3 rows, repeats
I_COL = np.array([[3, 3, 0], [1, 2, 2], [0, 0, 0]])     # dim 1, repeats in a row
I_SMALL = np.array([[0, 2], [1, 1]])                    # smaller than self off dim
SRC24 = rnd(R, (2, 4), "float64")
SRC33 = rnd(R, (3, 3), "float64")
SRC35 = rnd(R, (3, 5), "float64")
IDX = np.array([2, 0, 2])
INT34 = R.integers(-6, 7, (3, 4))

NO_GRAD = {"scatter_small_index", "scatter_reduce_add", "scatter_reduce_mul", "scatter_add"}  # torch has none

CASES = {
    "scatter_src_dim0": (lambda L, x, i, s: x.scatter(0, i, s), X34, I_ROW, SRC24),
    "scatter_src_dim1": (lambda L, x, i, s: L.scatter(x, 1, i, s), X34, I_COL, SRC33),
    "scatter_small_index": (lambda L, x, i, s: x.scatter(1, i, s), X34, I_SMALL, SRC35),
    "scatter_value": (lambda L, x, i: x.scatter(1, i, 2.5), X34, I_COL),
    "scatter_value_kw": (lambda L, x, i: L.scatter(x, 0, i, value=-1.0), X34, I_ROW),
    "scatter_reduce_add": (lambda L, x, i, s: x.scatter(0, i, s, reduce="add"),
                           X34, I_ROW, SRC24),
    "scatter_reduce_mul": (lambda L, x, i, s: x.scatter(1, i, s, reduce="multiply"),
                           X34, I_COL, SRC33),
    "scatter_add": (lambda L, x, i, s: L.scatter_add(x, 1, i, s), X34, I_SMALL, SRC35),
    "index_add": (lambda L, x, i, s: x.index_add(0, i, s), X34, IDX, rnd(R, (3, 4), "float64")),
    "index_add_alpha": (lambda L, x, i, s: L.index_add(x, 1, i, s, alpha=-2.0), X34, IDX,
                        rnd(R, (3, 3), "float64")),
    "index_copy": (lambda L, x, i, s: x.index_copy(1, i, s), X34, np.array([3, 0, 1]),
                   rnd(R, (3, 3), "float64")),
    "index_fill": (lambda L, x, i: x.index_fill(1, i, -3.0), X34, IDX),
    "index_fill_tensor_value": (lambda L, x, i, v: L.index_fill(x, 0, i, v), X34,
                                np.array([1]), np.array(0.5)),
    "index_put": (lambda L, x, i, j, v: x.index_put((i, j), v), X34, np.array([0, 2]),
                  np.array([1, 3]), rnd(R, (2,), "float64")),
    "index_put_accumulate": (lambda L, x, i, v: L.index_put(x, (i,), v, accumulate=True),
                             X34, np.array([0, 2, 0]), rnd(R, (3, 4), "float64")),
    "take": (lambda L, x, i: L.take(x, i), X34, np.array([[0, 11], [-1, 5]])),
    "take_along_dim": (lambda L, x, i: L.take_along_dim(x, i, 1), X34,
                       np.array([[0], [3], [2]])),
    "take_along_dim_broadcast": (lambda L, x, i: x.take_along_dim(i, dim=0), X34,
                                 np.array([[2, 0, 1, 1]])),
    "take_along_dim_flat": (lambda L, x, i: L.take_along_dim(x, i), X34, np.array([0, 7, 11])),
    "put": (lambda L, x, i, s: x.put(i, s), X34, np.array([1, -1, 5]), X3),
    "put_accumulate": (lambda L, x, i, s: L.put(x, i, s, accumulate=True), X34,
                       np.array([1, 1, 5]), X3),
    "masked_select": (lambda L, x, m: L.masked_select(x, m), X34, X34 > 0),
    "masked_select_broadcast": (lambda L, x, m: x.masked_select(m), X34,
                                np.array([True, False, True, True])),
    "masked_scatter": (lambda L, x, m, s: x.masked_scatter(m, s), X34, X34 > 0,
                       rnd(R, (12,), "float64")),
    "masked_scatter_broadcast": (lambda L, x, m, s: L.masked_scatter(x, m, s), X34,
                                 np.array([[True], [False], [True]]), rnd(R, (9,), "float64")),
    "select": (lambda L, x: L.select(x, 1, -1), X34),
    "select_scatter": (lambda L, x, s: L.select_scatter(x, s, 0, 1), X34,
                       rnd(R, (4,), "float64")),
    "slice_scatter": (lambda L, x, s: L.slice_scatter(x, s, 1, 0, 4, 2), X34,
                      rnd(R, (3, 2), "float64")),
    "slice_scatter_default": (lambda L, x, s: x.slice_scatter(s, start=1), X34,
                              rnd(R, (2, 4), "float64")),
    "diagonal_scatter": (lambda L, x, s: L.diagonal_scatter(x, s), X34, X3),
    "diagonal_scatter_offset": (lambda L, x, s: x.diagonal_scatter(s, -1), X34,
                                rnd(R, (2,), "float64")),
    "diagonal_scatter_dims": (lambda L, x, s: L.diagonal_scatter(x, s, 1, 1, 0),
                              rnd(R, (4, 3), "float64"), X3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vs_torch(name):
    fn, *arrays = CASES[name]
    run_both(fn, *arrays, grad=name not in NO_GRAD)


def test_scatter_small_index_gradient():
    # torch's backward refuses a src larger than the index; tracec's
    # gradient reaches only the src entries the index reads.
    x = tracec.tensor(X34, requires_grad=True)
    s = tracec.tensor(SRC35, requires_grad=True)
    x.scatter(1, tracec.tensor(I_SMALL), s).sum().backward()
    want = np.zeros((3, 5))
    want[:2, :2] = 1
    np.testing.assert_array_equal(s.grad.numpy(), want)
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0, 1], [1, 0, 1, 1], [1, 1, 1, 1]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    # Distinct values so amax/amin have no ties; a zero factor for prod.
    x = (np.arange(12, dtype=np.float64).reshape(3, 4) - 5.5) / 3
    src = (np.arange(8, dtype=np.float64).reshape(2, 4) * 0.7 - 2.3)
    src[0, 1] = 0.0
    run_both(lambda L, x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self),
             x, I_ROW, src)
    ints = INT34.copy()
    run_both(lambda L, x, i, s: L.scatter_reduce(x, 1, i, s, reduce,
                                                 include_self=include_self),
             ints, I_COL, R.integers(-6, 7, (3, 3)), grad=False)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce):
    src = rnd(R, (3, 4), "float64")
    for include_self in (True, False):
        run_both(lambda L, x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self),
                 X34, np.array([0, 2, 0]), src)


def test_scatter_amax_ties_share_the_gradient():
    x = np.array([1.0, 3.0, 3.0])
    src = np.array([3.0, 3.0, 2.0])
    run_both(lambda L, x, i, s: x.scatter_reduce(0, i, s, "amax"), x, np.array([1, 1, 0]), src)


def test_one_hot_scatter_inplace():
    labels = np.array([2, 0, 3])
    run_both(lambda L, y: L.zeros(3, 4).scatter_(1, y.unsqueeze(1), 1), labels, grad=False)
    t = tracec.zeros(3, 4)
    assert t.scatter_(1, tracec.tensor(labels).unsqueeze(1), 1.0) is t


@pytest.mark.parametrize("method,args", [
    ("scatter_", (1, I_COL, SRC33)), ("scatter_add_", (0, I_ROW, SRC24)),
    ("scatter_reduce_", (0, I_ROW, SRC24, "amax")), ("index_add_", (0, IDX, X34[:, :][[0, 1, 2]])),
    ("index_copy_", (0, np.array([2, 1, 0]), X34[::-1].copy())), ("index_fill_", (1, IDX, 7.0)),
    ("index_put_", ((np.array([0, 1]), np.array([2, 2])), np.array([9.0, 8.0]))),
    ("index_reduce_", (1, IDX, SRC33, "amin")), ("put_", (np.array([0, 4]), X3[:2].copy())),
    ("masked_scatter_", (X34 > 0.5, rnd(R, (12,), "float64"))),
])
def test_inplace_forms_write_and_return_self(method, args):
    def conv(L, a):
        if isinstance(a, np.ndarray):
            return L.tensor(a.copy())
        if isinstance(a, tuple):
            return tuple(conv(L, b) for b in a)
        return a
    outs = []
    for L in (tracec, torch):
        x = L.tensor(X34.copy())
        view = x[1:]
        r = getattr(x, method)(*[conv(L, a) for a in args])
        assert r is x
        outs.append((x.numpy().copy(), view.numpy().copy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0])
    np.testing.assert_allclose(outs[0][1], outs[1][1])  # a view sees the write


def test_inplace_scatter_gradient_through_nonleaf():
    run_both(lambda L, x, i, s: (x * 2).scatter_(0, i, s * 3), X34, I_ROW, SRC24)


def test_nonzero_argwhere():
    m = np.array([[0, 1.5, 0], [2, 0, -1]])
    run_both(lambda L, x: L.nonzero(x), m, grad=False)
    run_both(lambda L, x: x.nonzero(as_tuple=True), m, grad=False)
    run_both(lambda L, x: L.argwhere(x), m, grad=False)
    for v in (np.array(3), np.array(0)):
        run_both(lambda L, x: L.nonzero(x), v, grad=False)
        run_both(lambda L, x: L.nonzero(x, as_tuple=True), v, grad=False)


def test_select_is_a_view():
    x = tracec.zeros(3, 4)
    x.select(0, 1).fill_(2.0)
    assert x[1].tolist() == [2.0] * 4


ERRORS = [
    (lambda L: L.zeros(3, 4).scatter(1, L.tensor([[5]]), 1.0), "index 5 is out of bounds"),
    (lambda L: L.zeros(3, 4).scatter(1, L.tensor([0]), 1.0),
     "Index tensor must have the same number of dimensions as self tensor"),
    (lambda L: L.zeros(3, 4).scatter(1, L.tensor([[0, 1]]), L.ones(1, 1)),
     "Expected index [1, 2] to be no larger than self [3, 4] apart from dimension 1"),
    (lambda L: L.zeros(3, 4).scatter(1, L.tensor([[0, 1]]), L.ones(1, 2).double()),
     "scatter(): Expected self.dtype to be equal to src.dtype"),
    (lambda L: L.zeros(3, 4).scatter(1, L.tensor([[0]]), 2.0, reduce="max"),
     "reduce argument must be either add or multiply."),
    (lambda L: L.zeros(3, 4).scatter_reduce(1, L.tensor([[0]]), L.ones(1, 1), "add"),
     "reduce argument must be either sum, prod, mean, amax or amin, got add"),
    (lambda L: L.zeros(3, 4).index_add(0, L.tensor([0, 1]), L.ones(2, 4).double()),
     "index_add_(): self (Float) and source (Double) must have the same scalar type"),
    (lambda L: L.zeros(3, 4).index_add(0, L.tensor([0, 1]), L.ones(2, 3)),
     "source tensor shape must match self tensor shape, excluding the specified dimension"),
    (lambda L: L.zeros(3, 4).index_copy(0, L.tensor([0, 5]), L.ones(2, 4)),
     "index_copy_(): index 5 is out of bounds for dimension 0 with size 3"),
    (lambda L: L.zeros(3, 4).index_reduce(0, L.tensor([0]), L.ones(1, 4), "sum"),
     "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got sum."),
    (lambda L: L.zeros(3, 4).take(L.tensor([12])),
     "out of range: tried to access index 12 on a tensor of 12 elements."),
    (lambda L: L.zeros(3, 4).select(0, 5),
     "select(): index 5 out of range for tensor of size [3, 4] at dimension 0"),
    (lambda L: L.zeros(3, 4).masked_scatter(L.zeros(3, 4) > -1, L.ones(3)),
     "Number of elements of source < number of ones in mask"),
    (lambda L: L.zeros(3, 4).masked_select(L.ones(3, 4)),
     "masked_select: expected BoolTensor for mask"),
    (lambda L: L.select_scatter(L.zeros(3, 4), L.ones(3), 0, 0),
     "expected src to have a size equal to the slice of self. src size = [3], slice size = [4]"),
    (lambda L: L.slice_scatter(L.zeros(3, 4), L.ones(3, 3), 1, 0, 3, 2),
     "src size = [3, 3], slice size = [3, 2]"),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_match_torch(i):
    fn, msg = ERRORS[i]
    for L in (torch, tracec):
        with pytest.raises((RuntimeError, IndexError)) as e:
            fn(L)
        assert msg in str(e.value), f"{L.__name__}: {e.value}"


def test_index_reduce_warns_once_that_it_is_beta(monkeypatch):
    # PyTorch's TORCH_WARN_ONCE, at the caller's line (method and function alike)
    import warnings
    from tracec import scatter_ops
    monkeypatch.setattr(scatter_ops, "_BETA_WARNED", [])
    x = tracec.zeros(3)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        x.index_reduce_(0, tracec.tensor([0]), tracec.tensor([1.0]), "amax")
        tracec.index_reduce(x, 0, tracec.tensor([0]), tracec.tensor([1.0]), "amax")
    assert [str(w.message)[:57] for w in got] == \
        ["index_reduce() is in beta and the API may change at any t"]
    assert got[0].filename == __file__ and got[0].category is UserWarning
