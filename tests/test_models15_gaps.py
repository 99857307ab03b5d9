"""What the public programs of ``tests/programs/models15`` needed, checked
against torch 2.13 (the oracle)."""
import warnings

import numpy as np
import pytest
import torch

import tracec
from tracec import linalg_lapack
from tracec import sparse as tsparse


def _caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, w


# --- the legacy torch.sparse.FloatTensor / DoubleTensor / ... constructors (GIN's
# powerful-gnns builds its adjacency and pooling matrices with them) ---------------

@pytest.mark.parametrize("ctor", ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor"])
@pytest.mark.parametrize("vdtype", ["float32", "float64", "int64"])
def test_legacy_sparse_constructor_keeps_the_values_dtype(ctor, vdtype):
    i = [[0, 1, 1], [2, 0, 2]]
    v = np.array([1, 2, 3]).astype(vdtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = getattr(torch.sparse, ctor)(torch.tensor(i), torch.from_numpy(v), torch.Size([2, 3]))
        t = getattr(tracec.sparse, ctor)(tracec.tensor(i), tracec.from_numpy(v), tracec.Size([2, 3]))
        r2 = getattr(torch.sparse, ctor)(torch.tensor(i), torch.from_numpy(v))
        t2 = getattr(tracec.sparse, ctor)(tracec.tensor(i), tracec.from_numpy(v))
    for a, b in ((t, r), (t2, r2)):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert tuple(a.shape) == tuple(b.shape) and a.is_sparse and a._nnz() == b._nnz()
        np.testing.assert_array_equal(a.to_dense().numpy(), b.to_dense().numpy())


@pytest.mark.parametrize("ctor", ["FloatTensor", "DoubleTensor", "LongTensor", "ByteTensor"])
@pytest.mark.parametrize("size", [(2, 3), (4,), ()])
def test_legacy_sparse_constructor_from_a_size_is_empty_of_its_dtype(ctor, size):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = getattr(torch.sparse, ctor)(*size)
        t = getattr(tracec.sparse, ctor)(*size)
    assert str(t.dtype).split(".")[-1] == str(r.dtype).split(".")[-1]
    assert tuple(t.shape) == tuple(r.shape) and t._nnz() == r._nnz() == 0
    assert t.layout == tracec.sparse_coo


def test_legacy_sparse_constructor_rejects_what_torch_rejects():
    i = [[0, 1], [1, 0]]
    for args in ((i, [1.0, 2.0], (2, 2)), ("x",)):
        targs = tuple(tracec.tensor(a) if a is i else a for a in args)
        rargs = tuple(torch.tensor(a) if a is i else a for a in args)
        with pytest.raises(TypeError) as r:
            torch.sparse.FloatTensor(*rargs)
        with pytest.raises(TypeError) as t:
            tracec.sparse.FloatTensor(*targs)
        assert str(t.value).splitlines()[0] == str(r.value).splitlines()[0]


def test_legacy_sparse_constructor_warns_its_deprecation_once_from_the_caller(monkeypatch):
    monkeypatch.setattr(tsparse, "_LEGACY_WARNED", set())
    i, v = tracec.tensor([[0], [1]]), tracec.ones(1)
    _, w = _caught(lambda: [tracec.sparse.FloatTensor(i, v, (2, 2)) for _ in range(2)])
    assert [str(x.message).split(" is deprecated")[0] for x in w] == [
        "torch.sparse.SparseTensor(indices, values, shape, *, device=)"]
    assert w[0].filename == __file__         # not tracec's sparse.py
    _, w = _caught(lambda: tracec.sparse.DoubleTensor(2, 2))
    assert [str(x.message).split(" is deprecated")[0] for x in w] == [
        "torch.sparse.SparseTensor(shape, *, device=)"]
    # (sparse_coo_tensor's own invariants warning is not the legacy constructor's)
    assert not any("invariant" in str(x.message) for x in w)


def test_spmm_over_a_legacy_sparse_block_matches_torch():
    rng = np.random.default_rng(0)
    idx = np.array([[0, 1, 2, 2, 3], [1, 0, 3, 2, 0]])
    vals = rng.standard_normal(5).astype(np.float32)
    h = rng.standard_normal((4, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = torch.spmm(torch.sparse.FloatTensor(torch.from_numpy(idx), torch.from_numpy(vals),
                                                torch.Size([4, 4])), torch.from_numpy(h))
        t = tracec.spmm(tracec.sparse.FloatTensor(tracec.from_numpy(idx), tracec.from_numpy(vals),
                                                  tracec.Size([4, 4])), tracec.from_numpy(h))
    np.testing.assert_allclose(t.numpy(), r.numpy(), rtol=1e-6, atol=1e-6)


# --- a matmul through inf / nan is silent, as in PyTorch (GradScaler's skipped step
# backpropagates an inf loss) ---------------------------------------------------------

@pytest.mark.parametrize("op", ["matmul", "mm", "linear"])
def test_matmul_with_non_finite_values_does_not_warn(op):
    a = np.array([[np.inf, 1.0], [np.nan, 2.0]], np.float32)
    b = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)

    def run(lib, x, y):
        if op == "linear":
            return lib.nn.functional.linear(x, y)
        return getattr(lib, op)(x, y)
    (t, w) = _caught(lambda: run(tracec, tracec.from_numpy(a), tracec.from_numpy(b)))
    r = run(torch, torch.from_numpy(a), torch.from_numpy(b))
    assert not [x for x in w if issubclass(x.category, RuntimeWarning)]
    np.testing.assert_array_equal(t.numpy(), r.numpy())


def test_inf_loss_backward_is_silent():
    x = tracec.ones(2, 3, requires_grad=True)
    lin = tracec.nn.Linear(3, 2)
    _, w = _caught(lambda: (lin(x).sum() * float("inf")).backward())
    assert not [x for x in w if issubclass(x.category, RuntimeWarning)]


# --- torch.triangular_solve / torch.cholesky / torch.lu_solve warn their deprecation
# once per process, naming the caller's line (the GP's older solves) -------------------

@pytest.mark.parametrize("call", [
    lambda L, b: tracec.triangular_solve(b, L, upper=False),
    lambda L, b: b.triangular_solve(L, upper=False),
    lambda L, b: tracec.cholesky(L @ L.mT),
])
def test_linalg_deprecations_warn_once_from_the_caller(call, monkeypatch):
    monkeypatch.setattr(linalg_lapack, "_WARNED_ONCE", set())
    L = tracec.tensor([[2.0, 0.0], [1.0, 3.0]])
    b = tracec.ones(2, 1)
    _, w = _caught(lambda: [call(L, b) for _ in range(3)])
    assert len(w) == 1 and "is deprecated in favor of" in str(w[0].message)
    assert w[0].filename == __file__


def test_triangular_solve_values_match_torch():
    L = np.array([[2.0, 0.0], [1.0, 3.0]])
    b = np.array([[1.0], [2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = tracec.triangular_solve(tracec.tensor(b), tracec.tensor(L), upper=False)
        r = torch.triangular_solve(torch.tensor(b), torch.tensor(L), upper=False)
    np.testing.assert_allclose(t.solution.numpy(), r.solution.numpy())
    np.testing.assert_array_equal(t.cloned_coefficient.numpy(), r.cloned_coefficient.numpy())
