"""Linear algebra (tracec/linalg.py) against torch 2.13: products and norms
(composites: values, dtypes and gradients), the LAPACK-backed ops (values,
and the gradients tracec implements), error messages, and the composites
inside ``tracec.compile`` (the LAPACK ones raise a TraceError there)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tracec
from tracec import linalg_lapack
from _compiled_check import assert_step_matches_eager
from _torch_ref import assert_same, run_both, torch

FLOATS = ["float32", "float64"]


def _r(shape, d, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(d)


def _spd(n, d, seed=0, batch=()):
    a = _r(batch + (n, n), d, seed)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(d)


def _cases(d):
    A, B, v, w = _r((3, 4), d), _r((4, 2), d, 1), _r((4,), d, 2), _r((3,), d, 3)
    sq = _r((3, 3), d, 4) + 3 * np.eye(3, dtype=d)
    sq_b = _r((2, 3, 3), d, 5) + 3 * np.eye(3, dtype=d)
    x3 = _r((2, 3, 4), d, 6)
    return {
        "mv": (lambda L, a, b: L.mv(a, b), [A, v]),
        "addmv": (lambda L, i, a, b: L.addmv(i, a, b, beta=0.5, alpha=2), [w, A, v]),
        "addmv_beta0": (lambda L, i, a, b: i.addmv(a, b, beta=0), [w, A, v]),
        "addr": (lambda L, i, a, b: L.addr(i, a, b, alpha=-1), [A, w, v]),
        "ger": (lambda L, a, b: L.ger(a, b), [w, v]),
        "inner": (lambda L, a, b: L.inner(a, b), [x3, A]),
        "inner_vec": (lambda L, a, b: a.inner(b), [v, v[::-1].copy()]),
        "kron": (lambda L, a, b: L.kron(a, b), [A, B]),
        "kron_mixed_rank": (lambda L, a, b: L.kron(a, b), [v, x3]),
        "tensordot_int": (lambda L, a, b: L.tensordot(a, b, 1), [A, B]),
        "tensordot_lists": (lambda L, a, b: L.tensordot(a, b, dims=([1, 2], [0, 1])),
                            [x3, _r((3, 4, 5), d, 7)]),
        "trace": (lambda L, a: L.trace(a), [A]),
        "trace_method": (lambda L, a: a.trace(), [sq]),
        "vdot": (lambda L, a, b: L.vdot(a, b), [v, v[::-1].copy()]),
        "chain_matmul": (lambda L, a, b, c: L.chain_matmul(a, b, c), [A, B, _r((2, 5), d, 8)]),
        "multi_dot": (lambda L, a, b, c: L.linalg.multi_dot([a, b, c]), [A, B, _r((2, 5), d, 8)]),
        "matrix_power3": (lambda L, a: L.matrix_power(a, 3), [sq_b]),
        "matrix_power0": (lambda L, a: a.matrix_power(0), [sq]),
        "cross": (lambda L, a, b: L.cross(a, b, dim=1), [_r((4, 3), d, 9), _r((4, 3), d, 10)]),
        "cross_default": (lambda L, a, b: L.cross(a, b), [_r((3, 2), d, 9), _r((3, 2), d, 10)]),
        "linalg_cross": (lambda L, a, b: L.linalg.cross(a, b), [_r((2, 3), d, 9),
                                                                 _r((1, 3), d, 10)]),
        "vecdot": (lambda L, a, b: L.linalg.vecdot(a, b, dim=0), [A, A[::-1].copy()]),
        "cdist": (lambda L, a, b: L.cdist(a, b), [_r((4, 3), d, 11), _r((5, 3), d, 12)]),
        "cdist_p1_batched": (lambda L, a, b: L.cdist(a, b, p=1), [_r((2, 4, 3), d, 11),
                                                                  _r((2, 5, 3), d, 12)]),
        "norm": (lambda L, a: L.norm(a), [x3]),
        "norm_dim": (lambda L, a: a.norm(dim=1, keepdim=True), [x3]),
        "norm_p1": (lambda L, a: L.norm(a, p=1, dim=(0, 2)), [x3]),
        "norm_inf": (lambda L, a: L.norm(a, p=math.inf, dim=-1), [x3]),
        "norm_p3": (lambda L, a: L.norm(a, 3), [x3]),
        "norm_fro_dims": (lambda L, a: L.norm(a, "fro", dim=(1, 2)), [x3]),
        "norm_zero_row": (lambda L, a: L.norm(a * L.tensor([[0.0], [1.0], [1.0]],
                                                          dtype=a.dtype), dim=1), [A]),
        "dist": (lambda L, a, b: L.dist(a, b), [A, A[::-1].copy()]),
        "dist_p0": (lambda L, a, b: L.dist(a, b, 0), [A, A[::-1].copy()]),
        "vector_norm": (lambda L, a: L.linalg.vector_norm(a, ord=-math.inf, dim=(0, 1)), [x3]),
        "vector_norm_0": (lambda L, a: L.linalg.vector_norm(a, 0), [A]),
        "matrix_norm_fro": (lambda L, a: L.linalg.matrix_norm(a), [x3]),
        "matrix_norm_1": (lambda L, a: L.linalg.matrix_norm(a, 1), [x3]),
        "matrix_norm_inf": (lambda L, a: L.linalg.matrix_norm(a, -math.inf, keepdim=True),
                            [x3]),
        "linalg_norm_vec": (lambda L, a: L.linalg.norm(a, 1), [v]),
        "linalg_norm_mat": (lambda L, a: L.linalg.norm(a, math.inf), [A]),
        "linalg_norm_default": (lambda L, a: L.linalg.norm(a), [x3]),
        "linalg_matmul": (lambda L, a, b: L.linalg.matmul(a, b), [A, B]),
        # LAPACK-backed, with gradients
        "inv": (lambda L, a: L.linalg.inv(a), [sq_b]),
        "inverse": (lambda L, a: a.inverse(), [sq]),
        "det": (lambda L, a: L.det(a), [sq_b]),
        "linalg_det": (lambda L, a: L.linalg.det(a), [sq]),
        "slogdet": (lambda L, a: L.linalg.slogdet(a), [sq_b]),
        "logdet": (lambda L, a: L.logdet(a), [_spd(3, d)]),
        "solve": (lambda L, a, b: L.linalg.solve(a, b), [sq, _r((3, 2), d, 13)]),
        "solve_vector": (lambda L, a, b: L.linalg.solve(a, b), [sq_b, _r((2, 3), d, 13)]),
        "solve_broadcast": (lambda L, a, b: L.linalg.solve(a, b), [sq, _r((2, 3, 2), d, 13)]),
        "solve_right": (lambda L, a, b: L.linalg.solve(a, b, left=False),
                        [sq, _r((2, 3), d, 13)]),
        "cholesky": (lambda L, a: L.linalg.cholesky(a), [_spd(3, d, batch=(2,))]),
        "cholesky_upper": (lambda L, a: L.linalg.cholesky(a, upper=True), [_spd(3, d)]),
        "torch_cholesky": (lambda L, a: L.cholesky(a), [_spd(4, d)]),
        "eigvalsh": (lambda L, a: L.linalg.eigvalsh(a), [_spd(3, d, batch=(2,))]),
        "frobenius_norm": (lambda L, a: L.frobenius_norm(a, dim=(0, 2)), [x3]),
        "nuclear_norm": (lambda L, a: L.nuclear_norm(a), [A]),
        "renorm": (lambda L, a: a.renorm(2, 0, 2.5), [x3]),
        "renorm_p1_dim1": (lambda L, a: L.renorm(a, 1, 1, 1.0), [A]),
        "addbmm": (lambda L, i, a, b: L.addbmm(i, a, b, beta=0.5, alpha=2),
                   [sq, _r((2, 3, 4), d, 14), _r((2, 4, 3), d, 15)]),
        "matrix_exp": (lambda L, a: L.linalg.matrix_exp(a), [sq_b]),
        "matrix_exp_method": (lambda L, a: a.matrix_exp(), [_r((3, 3), d, 16) * 0.1]),
        "vander": (lambda L, a: L.linalg.vander(a, N=4), [A]),
        "torch_vander": (lambda L, a: L.vander(a, 3), [v]),
        "cond": (lambda L, a: L.linalg.cond(a, 1), [sq]),
        "tensorinv": (lambda L, a: L.linalg.tensorinv(a, ind=1),
                      [(np.eye(6) + 0.1 * _r((6, 6), d, 17)).reshape(6, 2, 3).astype(d)]),
        "tensorsolve": (lambda L, a, b: L.linalg.tensorsolve(a, b),
                        [(np.eye(6) + 0.1 * _r((6, 6), d, 17)).reshape(2, 3, 6).astype(d),
                         _r((2, 3), d, 18)]),
        "solve_triangular": (lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True),
                             [sq, _r((3, 2), d, 19)]),
        "solve_triangular_right_unit": (
            lambda L, a, b: L.linalg.solve_triangular(a, b, upper=False, left=False,
                                                      unitriangular=True),
            [sq_b, _r((2, 4, 3), d, 19)]),
        "cholesky_solve": (lambda L, b, c: L.cholesky_solve(b, c),
                           [_r((3, 2), d, 20), np.linalg.cholesky(_spd(3, "float64")).astype(d)]),
        "cholesky_inverse_upper": (lambda L, c: L.cholesky_inverse(c, upper=True),
                                   [np.linalg.cholesky(_spd(3, "float64")).T.copy().astype(d)]),
    }


_NAMES = sorted(_cases("float32"))
_TOL = {"float32": dict(rtol=2e-4, atol=2e-4), "float64": dict(rtol=1e-8, atol=1e-9)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", _NAMES)
@pytest.mark.filterwarnings("ignore:.*deprecated")
def test_matches_torch(name, dtype):
    fn, arrays = _cases(dtype)[name]
    # torch's own backward of cond and vander fails (an in-place op on a saved tensor).
    run_both(fn, *arrays, tol=_TOL[dtype],
             grad=name not in ("dist_p0", "cond", "torch_vander", "nuclear_norm"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_factorizations_values(dtype):
    a = _r((4, 3), dtype, 1)
    s = _spd(3, dtype, 2)
    q, r = tracec.linalg.qr(tracec.tensor(a))
    tq, tr = torch.linalg.qr(torch.tensor(a))
    assert_same(q, tq, tol=_TOL[dtype])
    assert_same(r, tr, tol=_TOL[dtype])
    qc, _ = tracec.linalg.qr(tracec.tensor(a), mode="complete")
    assert tuple(qc.shape) == (4, 4)
    u, sv, vh = tracec.linalg.svd(tracec.tensor(a), full_matrices=False)
    np.testing.assert_allclose((u.numpy() * sv.numpy()) @ vh.numpy(), a, rtol=1e-4, atol=1e-5)
    assert_same(sv, torch.linalg.svdvals(torch.tensor(a)), tol=_TOL[dtype])
    assert_same(tracec.linalg.svdvals(tracec.tensor(a)), torch.linalg.svdvals(torch.tensor(a)),
                tol=_TOL[dtype])
    U, S_, V = tracec.svd(tracec.tensor(a))
    np.testing.assert_allclose((U.numpy() * S_.numpy()) @ V.numpy().T, a, rtol=1e-4, atol=1e-5)
    w, vecs = tracec.linalg.eigh(tracec.tensor(s))
    tw, tv = torch.linalg.eigh(torch.tensor(s))
    assert_same(w, tw, tol=_TOL[dtype])
    np.testing.assert_allclose(np.abs(vecs.numpy()), np.abs(tv.numpy()), rtol=1e-4, atol=1e-5)
    assert_same(tracec.linalg.pinv(tracec.tensor(a)), torch.linalg.pinv(torch.tensor(a)),
                tol=_TOL[dtype])
    assert_same(tracec.pinverse(tracec.tensor(a)), torch.pinverse(torch.tensor(a)),
                tol=_TOL[dtype])
    assert_same(tracec.linalg.matrix_norm(tracec.tensor(a), "nuc"),
                torch.linalg.matrix_norm(torch.tensor(a), "nuc"), tol=_TOL[dtype])
    assert_same(tracec.linalg.matrix_norm(tracec.tensor(a), -2),
                torch.linalg.matrix_norm(torch.tensor(a), -2), tol=_TOL[dtype])
    assert_same(tracec.norm(tracec.tensor(a), p="nuc"), torch.norm(torch.tensor(a), p="nuc"),
                tol=_TOL[dtype])
    sol = tracec.linalg.lstsq(tracec.tensor(a), tracec.tensor(a[:, :2].copy()))
    tsol = torch.linalg.lstsq(torch.tensor(a), torch.tensor(a[:, :2].copy()))
    for x, y in zip(sol, tsol):
        assert_same(x, y, tol=_TOL[dtype])
    assert_same(tracec.linalg.matrix_rank(tracec.tensor(a @ a.T)),
                torch.linalg.matrix_rank(torch.tensor(a @ a.T)))
    for name in ("inv_ex", "cholesky_ex"):
        r, info = getattr(tracec.linalg, name)(tracec.tensor(s))
        tr, tinfo = getattr(torch.linalg, name)(torch.tensor(s))
        assert_same(r, tr, tol=_TOL[dtype])
        assert_same(info, tinfo)
    x, info = tracec.linalg.solve_ex(tracec.tensor(s), tracec.tensor(a[:3]))
    assert_same(x, torch.linalg.solve_ex(torch.tensor(s), torch.tensor(a[:3]))[0],
                tol=_TOL[dtype])
    assert_same(tracec.linalg.pinv(tracec.tensor(a), atol=0.5),
                torch.linalg.pinv(torch.tensor(a), atol=0.5), tol=_TOL[dtype])
    linalg_lapack._WARNED_ONCE.clear()      # (PyTorch warns once per process, as tracec)
    with pytest.warns(UserWarning, match="deprecated"):
        tsr = tracec.triangular_solve(tracec.tensor(a[:3]), tracec.tensor(s), transpose=True)
    with warnings.catch_warnings():   # torch warns once per process
        warnings.simplefilter("ignore")
        want = torch.triangular_solve(torch.tensor(a[:3]), torch.tensor(s), transpose=True)
    assert_same(tsr.solution, want.solution, tol=_TOL[dtype])
    assert_same(tsr.cloned_coefficient, want.cloned_coefficient)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (5, 3), (3, 5)])
def test_lu_family(shape):
    a = np.random.default_rng(1).normal(size=shape)
    f, tf = tracec.linalg.lu_factor(tracec.tensor(a)), torch.linalg.lu_factor(torch.tensor(a))
    assert_same(f.LU, tf.LU, tol=_TOL["float64"])
    assert_same(f.pivots, tf.pivots)
    for x, y in zip(tracec.linalg.lu(tracec.tensor(a)), torch.linalg.lu(torch.tensor(a))):
        assert_same(x, y, tol=_TOL["float64"])
    for x, y in zip(tracec.lu_unpack(f.LU, f.pivots), torch.lu_unpack(tf.LU, tf.pivots)):
        assert_same(x, y, tol=_TOL["float64"])
    if shape[-1] == shape[-2]:
        b = np.random.default_rng(2).normal(size=shape[:-1] + (2,))
        for kw in ({}, {"adjoint": True}):
            assert_same(tracec.linalg.lu_solve(f.LU, f.pivots, tracec.tensor(b), **kw),
                        torch.linalg.lu_solve(tf.LU, tf.pivots, torch.tensor(b), **kw),
                        tol=_TOL["float64"])
        bt = np.swapaxes(b, -1, -2).copy()
        assert_same(tracec.linalg.lu_solve(f.LU, f.pivots, tracec.tensor(bt), left=False),
                    torch.linalg.lu_solve(tf.LU, tf.pivots, torch.tensor(bt), left=False),
                    tol=_TOL["float64"])
        with pytest.warns(UserWarning, match="torch.lu is deprecated"):
            factors = tracec.lu(tracec.tensor(a))
        linalg_lapack._WARNED_ONCE.clear()      # (PyTorch warns once per process)
        with pytest.warns(UserWarning, match="torch.lu_solve is deprecated"):
            got = tracec.lu_solve(tracec.tensor(b), *factors)
        np.testing.assert_allclose(got.numpy(), np.linalg.solve(a, b), rtol=1e-10)
    singular = tracec.linalg.lu_factor_ex(tracec.zeros(2, 2))
    assert singular.info.item() == torch.linalg.lu_factor_ex(torch.zeros(2, 2)).info.item()


def test_out_keyword():
    a = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
    out = tracec.zeros(2, 2)
    assert tracec.linalg.inv(tracec.tensor(a), out=out) is out
    assert_same(out, torch.linalg.inv(torch.tensor(a)))
    o1, o2 = tracec.zeros(()), tracec.zeros(())
    r = tracec.linalg.slogdet(tracec.tensor(a), out=(o1, o2))
    # (torch 2.13 names the out= form's tuple linalg_slogdet_out)
    assert r[0] is o1 and r[1] is o2 and type(r).__name__ == "linalg_slogdet"
    assert_same(o2, torch.linalg.slogdet(torch.tensor(a)).logabsdet)
    v, i = tracec.zeros(2), tracec.zeros(2, dtype=tracec.int64)
    tracec.cummax(tracec.tensor(a[0]), 0, out=(v, i))
    assert v.tolist() == [2.0, 2.0] and i.tolist() == [0, 0]
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        tracec.linalg.det(tracec.tensor(a, requires_grad=True), out=tracec.zeros(()))


def test_spectral_gradients_flow():
    """qr, svd, eigh's eigenvectors and pinv are differentiable (values of
    their gradients: test_linalg_spectral_grads.py)."""
    a = tracec.tensor(_r((3, 3), "float64"), requires_grad=True)
    for out in (tracec.linalg.qr(a).Q, tracec.linalg.svd(a).S, tracec.linalg.eigh(a + a.mT)[1],
                tracec.linalg.pinv(a)):
        a.grad = None
        out.abs().sum().backward()
        assert a.grad is not None and np.isfinite(a.grad.numpy()).all()


def test_error_messages():
    with pytest.raises(RuntimeError, match="singular"):
        tracec.linalg.inv(tracec.zeros(2, 2))
    with pytest.raises(RuntimeError, match="singular"):
        tracec.linalg.solve(tracec.zeros(2, 2), tracec.ones(2))
    with pytest.raises(RuntimeError, match="positive-definite"):
        tracec.linalg.cholesky(-tracec.eye(2))
    with pytest.raises(RuntimeError, match="square matrices"):
        tracec.linalg.det(tracec.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        tracec.linalg.inv(tracec.tensor([[1, 0], [0, 1]]))
    with pytest.raises(RuntimeError, match="size mismatch"):
        tracec.mv(tracec.zeros(2, 3), tracec.zeros(2))
    with pytest.raises(RuntimeError, match="must have length 3"):
        tracec.linalg.cross(tracec.zeros(2, 4), tracec.zeros(2, 4))
    with pytest.raises(RuntimeError, match="same number of columns"):
        tracec.cdist(tracec.zeros(2, 3), tracec.zeros(2, 4))
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        tracec.tensordot(tracec.zeros(2, 3), tracec.zeros(2, 3), 1)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_equals_eager(backend):
    w = tracec.tensor(_r((3, 4), "float32", 5), requires_grad=True)

    def step(x):
        loss = (tracec.norm(x @ w.T, dim=1).sum() + tracec.kron(x[:2, :2], w[:2, :2]).sum()
                + tracec.cdist(x, w).sum() + tracec.trace(w @ x.T)
                + tracec.linalg.cross(x[:3, :3], w[:, :3]).sum() + tracec.mv(w, x[0]).sum()
                + tracec.matrix_power(w[:, :3] * 0.3, 3).sum())
        loss.backward()
        return loss

    assert_step_matches_eager(step, w, [tracec.tensor(_r((5, 4), "float32", seed))
                                        for seed in (1, 2)],
                              backend, atol=1e-4)


def test_lapack_ops_raise_inside_compile():
    # (linalg.inv traces: tracec.linalg_gauss_jordan; pinv's SVD does not)
    def f(a):
        return tracec.linalg.pinv(a)
    with pytest.raises(tracec.TraceError, match="eager only"):
        tracec.compile(f)(tracec.eye(3))


def test_return_types_are_named_as_torch_names_them():
    """torch.linalg's named tuples are ``linalg_<name>`` (torch.slogdet's,
    torch.qr's and torch.svd's their own); PyTorch's pickled form
    ``cls(sequence, {})`` constructs them, and a checkpoint holding one
    is a PyTorch file that torch.load reads back as its own type."""
    import io
    import re
    import warnings

    from tracec.torch_save import save_torch
    a = np.array([[2.0, 0.5], [0.5, 1.0]])
    calls = {"linalg.slogdet": lambda L, A: L.linalg.slogdet(A), "linalg.qr": lambda L, A: L.linalg.qr(A),
             "linalg.svd": lambda L, A: L.linalg.svd(A), "linalg.eigh": lambda L, A: L.linalg.eigh(A),
             "linalg.eig": lambda L, A: L.linalg.eig(A), "linalg.inv_ex": lambda L, A: L.linalg.inv_ex(A),
             "linalg.cholesky_ex": lambda L, A: L.linalg.cholesky_ex(A),
             "linalg.solve_ex": lambda L, A: L.linalg.solve_ex(A, A),
             "linalg.lstsq": lambda L, A: L.linalg.lstsq(A, A), "linalg.lu": lambda L, A: L.linalg.lu(A),
             "linalg.lu_factor": lambda L, A: L.linalg.lu_factor(A),
             "linalg.lu_factor_ex": lambda L, A: L.linalg.lu_factor_ex(A),
             "slogdet": lambda L, A: L.slogdet(A), "Tensor.slogdet": lambda L, A: A.slogdet(),
             "qr": lambda L, A: L.qr(A), "svd": lambda L, A: L.svd(A),
             "max": lambda L, A: L.max(A, 0)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # (torch.qr's deprecation)
        for what, f in calls.items():
            got, want = f(tracec, tracec.tensor(a)), f(torch, torch.tensor(a))
            fields = [re.findall(r"^(\w+)=", repr(x), re.M) for x in (got, want)]
            assert (type(got).__name__, fields[0]) == (type(want).__name__, fields[1]), what
    r = tracec.linalg.slogdet(tracec.tensor(a))
    assert type(r)(tuple(r), {}) == r
    buf = io.BytesIO()
    save_torch({"r": r}, buf, "archive")
    buf.seek(0)
    back = torch.load(buf, weights_only=False)["r"]
    assert type(back) is torch.return_types.linalg_slogdet
    np.testing.assert_allclose(back.logabsdet.numpy(), r.logabsdet.numpy())
