"""linalg.solve, cholesky, solve_triangular, cholesky_solve, det, slogdet,
logdet inside ``tracec.compile`` (tracec.linalg_gauss_jordan,
tracec.linalg_substitution, tracec.linalg_det):
values and input gradients against torch 2.13, eager-free traces (no
fallback), two calls with different values (nothing baked into the trace),
PyTorch's errors for singular / not positive-definite inputs at the user's
line, the eager path (and its reason) for matrices above MAX_N, and a small
Kalman filter training step compiled against the same step run eagerly."""
import warnings

import numpy as np
import pytest
import torch

import tracec
from tracec import linalg_gauss_jordan

BACKENDS = ["interp", "cpu"]
TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-11, atol=1e-12)}


def _general(rng, shape, dtype):
    n = shape[-1]
    A = rng.randn(*shape) + 3 * np.eye(n)
    A[..., [0, n - 1], :] = A[..., [n - 1, 0], :]      # (a pivot off the diagonal)
    return A.astype(dtype)


def _spd(rng, shape, dtype):
    M = rng.randn(*shape)
    return (M @ np.swapaxes(M, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _tri(rng, shape, dtype):
    return (rng.randn(*shape) + 3 * np.eye(shape[-1])).astype(dtype)


# name: (function of (lib, A, B), A's maker, A's shape, B's shape)
CASES = {
    "solve": (lambda L, a, b: L.linalg.solve(a, b), _general, (4, 4), (4, 2)),
    "solve_batched_vector": (lambda L, a, b: L.linalg.solve(a, b), _general, (2, 3, 3), (3,)),
    "solve_broadcast": (lambda L, a, b: L.linalg.solve(a, b), _general, (2, 1, 3, 3), (3, 3, 2)),
    "solve_left_false": (lambda L, a, b: L.linalg.solve(a, b, left=False), _general, (3, 3), (2, 3)),
    "solve_ex_checked": (lambda L, a, b: L.linalg.solve_ex(a, b, check_errors=True).result,
                         _general, (3, 3), (3, 1)),
    "cholesky": (lambda L, a, b: L.linalg.cholesky(a), _spd, (2, 4, 4), None),
    "cholesky_upper": (lambda L, a, b: L.linalg.cholesky(a, upper=True), _spd, (3, 3), None),
    "torch_cholesky_upper": (lambda L, a, b: L.cholesky(a, upper=True), _spd, (3, 3), None),
    "cholesky_ex_checked": (lambda L, a, b: L.linalg.cholesky_ex(a, check_errors=True).L,
                            _spd, (2, 3, 3), None),
    "cholesky_ex_upper": (lambda L, a, b: L.linalg.cholesky_ex(a, upper=True).L,
                          _spd, (2, 3, 3), None),
    "solve_triangular": (lambda L, a, b: L.linalg.solve_triangular(a, b, upper=False),
                         _tri, (2, 4, 4), (4, 2)),
    "solve_triangular_right_unit": (
        lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True, left=False,
                                                  unitriangular=True), _tri, (3, 3), (2, 3)),
    "triangular_solve_transpose": (
        lambda L, a, b: L.triangular_solve(b, a, upper=False, transpose=True).solution,
        _tri, (3, 3), (3, 2)),
    "cholesky_solve": (lambda L, a, b: L.cholesky_solve(b, L.linalg.cholesky(a)),
                       _spd, (2, 3, 3), (3, 2)),
    "cholesky_solve_upper_full": (lambda L, a, b: L.cholesky_solve(b, a, upper=True),
                                  _tri, (3, 3), (3, 2)),
    "det": (lambda L, a, b: L.linalg.det(a), _general, (2, 4, 4), None),
    "torch_det": (lambda L, a, b: L.det(a), _general, (3, 3), None),
    "slogdet": (lambda L, a, b: L.linalg.slogdet(a).logabsdet * L.linalg.slogdet(a).sign,
                _general, (2, 4, 4), None),
    "logdet": (lambda L, a, b: L.logdet(a), _spd, (2, 3, 3), None),
}


def _step(fn, lib):
    def step(a, b, w):
        x = fn(lib, a, b)
        (x * w).sum().backward()
        return x
    return step


_COMPILED: dict = {}


def _compiled(name, backend):
    key = (name, backend)
    if key not in _COMPILED:
        _COMPILED[key] = tracec.compile(_step(CASES[name][0], tracec), backend=backend)
    return _COMPILED[key]


@pytest.mark.parametrize("dtype,backend", [("float32", "cpu"), ("float64", "cpu"),
                                           ("float64", "interp")])    # (kept short: interp once)
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_matches_torch(name, dtype, backend):
    fn, make, ashape, bshape = CASES[name]
    rng = np.random.RandomState(len(name))
    compiled = _compiled(name, backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # (torch's deprecations)
        for _ in range(2):                                  # two calls, other values
            A = make(rng, ashape, dtype)
            B = rng.randn(*(bshape or (ashape[-1], 1))).astype(dtype)
            ta, tb = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
            W = np.asarray(rng.randn(*fn(torch, ta.detach(), tb.detach()).shape)).astype(dtype)
            want = _step(fn, torch)(ta, tb, torch.tensor(W))
            a, b = tracec.tensor(A, requires_grad=True), tracec.tensor(B, requires_grad=True)
            got = compiled(a, b, tracec.tensor(W))
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype])
            np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), **TOL[dtype])
            if tb.grad is not None:
                np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), **TOL[dtype])
            assert got.grad_fn.name() == want.grad_fn.name()
    info = compiled.cache_info()
    assert info.eager_signatures == 0


# --- errors ------------------------------------------------------------------------------

def _raises_as_torch(tfn, cfn, A):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(RuntimeError) as want:
            tfn(torch.tensor(A))
        with pytest.raises(RuntimeError) as got:
            cfn(tracec.tensor(A))
    assert str(got.value).endswith(str(want.value)), (got.value, want.value)
    assert "test_compiled_linalg.py" in str(got.value)          # the user's line


NOT_PD = [-np.eye(3), np.array([[1., 2], [2, 1]]), np.stack([np.eye(3), -np.eye(3)]),
          # (element 1 fails at order 2, element 2 at order 1: PyTorch names element 1)
          np.stack([np.eye(2), [[1., 2], [2, 1]], -np.eye(2)]),
          np.array([[np.nan, 0], [0, 1.]]), np.ones((2, 2, 2, 2))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", ["linalg.cholesky", "cholesky", "cholesky_ex"])
def test_not_positive_definite_raises_torch_message(which, backend):
    fns = {"linalg.cholesky": lambda L: L.linalg.cholesky,
           "cholesky": lambda L: L.cholesky,
           "cholesky_ex": lambda L: lambda a: L.linalg.cholesky_ex(a, check_errors=True).L}
    compiled = tracec.compile(lambda a: fns[which](tracec)(a) * 2, backend=backend)
    for A in NOT_PD:
        _raises_as_torch(fns[which](torch), compiled, A.astype(np.float32))
    assert compiled.cache_info().eager_signatures == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_unchecked_info_and_partial_factor_as_torch(upper, backend):
    # (potrf's partial factor where it stops: the failing pivot unrooted, A's lower triangle)
    compiled = tracec.compile(lambda a: tracec.linalg.cholesky_ex(a, upper=upper),
                              backend=backend)
    for A in NOT_PD + [np.array([[4., 1, 2], [1, 3, 0], [2, 0, -5]]),
              _spd(np.random.RandomState(1), (2, 3, 3), "float64")]:
        for dtype in ("float32", "float64"):
            want = torch.linalg.cholesky_ex(torch.tensor(A.astype(dtype)), upper=upper)
            got = compiled(tracec.tensor(A.astype(dtype)))
            np.testing.assert_allclose(got.L.numpy(), want.L.numpy(), **TOL[dtype])
            np.testing.assert_array_equal(got.info.numpy(), want.info.numpy())
            assert got.info.dtype is tracec.int32
    assert compiled.cache_info().eager_signatures == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_solve_raises_torch_message(backend):
    compiled = tracec.compile(lambda a: tracec.linalg.solve(a, tracec.ones(3, 2)) * 2,
                              backend=backend)
    singular = [np.zeros((3, 3)), np.array([[1., 2, 3], [2, 4, 6], [1, 1, 1]]),
                np.stack([np.eye(3), np.zeros((3, 3))])]
    for A in singular:
        _raises_as_torch(lambda a: torch.linalg.solve(a, torch.ones(3, 2)), compiled,
                         A.astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_triangular_solve_gives_infinities_as_torch(backend):
    # (PyTorch's trsm does not check the diagonal: no error, inf/nan)
    A = np.array([[1., 0], [2, 0]], np.float32)
    compiled = tracec.compile(lambda a, b: tracec.linalg.solve_triangular(a, b, upper=False),
                              backend=backend)
    got = compiled(tracec.tensor(A), tracec.ones(2, 1)).numpy()
    want = torch.linalg.solve_triangular(torch.tensor(A), torch.ones(2, 1), upper=False).numpy()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))


SINGULAR = [np.zeros((3, 3)), np.array([[0., 1], [0, 1]]), np.stack([np.eye(2), [[1., 2], [2, 4]]]),
            np.array([[0., 1], [1, 0]]), np.array([[-1., 0], [0, 2]])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_det_slogdet_of_singular_matrices_as_torch(backend):
    values = tracec.compile(lambda a: (tracec.linalg.det(a), *tracec.linalg.slogdet(a),
                                       tracec.logdet(a)), backend=backend)

    def lad_grad(lib, a):
        lib.linalg.slogdet(a).logabsdet.sum().backward()
    lad_compiled = tracec.compile(lambda a: lad_grad(tracec, a), backend=backend)
    det_grad = tracec.compile(lambda a: tracec.linalg.det(a).sum().backward(), backend=backend)
    for A in SINGULAR:
        ta = torch.tensor(A, requires_grad=True)
        want = (torch.linalg.det(ta), *torch.linalg.slogdet(ta), torch.logdet(ta))
        got = values(tracec.tensor(A))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.detach().numpy())
        a = tracec.tensor(A, requires_grad=True)
        lad_compiled(a)
        lad_grad(torch, ta)
        np.testing.assert_array_equal(np.isfinite(a.grad.numpy()), np.isfinite(ta.grad.numpy()))
        if want[0].detach().eq(0).any():
            # (PyTorch's gradient of det at a singular matrix goes through an SVD)
            with pytest.raises(RuntimeError, match="differentiates det of invertible matrices"):
                det_grad(tracec.tensor(A, requires_grad=True))
        else:
            det_grad(tracec.tensor(A, requires_grad=True))
    assert values.cache_info().eager_signatures == 0


def test_unchecked_ex_and_large_matrices_stay_eager_and_say_why():
    # (solve_ex's info and solution without raising: LAPACK's, eager only)
    with pytest.raises(tracec.TraceError, match=r"solve_ex\(check_errors=False\)"):
        tracec.compile(lambda a: tracec.linalg.solve_ex(a, a).result)(tracec.eye(3))
    n = linalg_gauss_jordan.MAX_N + 1
    with pytest.raises(tracec.TraceError, match=f"larger than 64x64, here {n}x{n}"):
        tracec.compile(lambda a: tracec.linalg.cholesky(a))(tracec.eye(n))
    fn = tracec.compile(lambda a, b: tracec.linalg.solve(a, b), fallback="eager")
    with pytest.warns(UserWarning, match="running eagerly"):
        got = fn(tracec.eye(n) * 2, tracec.ones(n, 1))
    np.testing.assert_array_equal(got.numpy(), np.full((n, 1), 0.5, np.float32))
    assert "larger than 64x64" in fn.cache_info().eager_reasons[0]


# --- a Kalman filter's training step ----------------------------------------------------

def _kalman_step(lib, q, r, ys):
    """The negative log-likelihood of a 2-state constant-velocity Kalman
    filter over ``ys`` (T, 1), its noise scales ``q`` and ``r`` learned."""
    F = lib.tensor([[1., 1.], [0., 1.]], dtype=lib.float64)
    H = lib.tensor([[1., 0.]], dtype=lib.float64)
    x = lib.zeros(2, 1, dtype=lib.float64)
    P = lib.eye(2, dtype=lib.float64)
    Q = q.exp() * lib.eye(2, dtype=lib.float64)
    R = r.exp() * lib.eye(1, dtype=lib.float64)
    nll = lib.zeros((), dtype=lib.float64)
    for t in range(ys.shape[0]):
        x, P = F @ x, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        Ls = lib.linalg.cholesky(S)
        v = ys[t].reshape(1, 1) - H @ x
        K = lib.linalg.solve(S, H @ P).T                       # P H^T S^-1 (S symmetric)
        z = lib.linalg.solve_triangular(Ls, v, upper=False)
        nll = nll + 0.5 * (z * z).sum() + Ls.diagonal().log().sum()
        x, P = x + K @ v, P - K @ S @ K.T
    nll.backward()
    return nll


@pytest.mark.parametrize("backend", BACKENDS)
def test_kalman_filter_training_step_compiles_and_equals_eager(backend):
    compiled = tracec.compile(lambda q, r, ys: _kalman_step(tracec, q, r, ys), backend=backend)
    rng = np.random.RandomState(5)
    for _ in range(2):
        ys = np.cumsum(rng.randn(6, 1), 0)
        qv, rv = rng.randn(), rng.randn()
        got_in = [tracec.tensor(v, dtype=tracec.float64, requires_grad=True) for v in (qv, rv)]
        want_in = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (qv, rv)]
        eager_in = [tracec.tensor(v, dtype=tracec.float64, requires_grad=True) for v in (qv, rv)]
        got = compiled(*got_in, tracec.tensor(ys))
        want = _kalman_step(torch, *want_in, torch.tensor(ys))
        eager = _kalman_step(tracec, *eager_in, tracec.tensor(ys))
        for ref, ref_in in ((want, want_in), (eager, eager_in)):
            np.testing.assert_allclose(got.item(), ref.item(), rtol=1e-12)
            for g, w in zip(got_in, ref_in):
                np.testing.assert_allclose(g.grad.numpy(), w.grad.numpy(), rtol=1e-10)
    assert compiled.cache_info().eager_signatures == 0
