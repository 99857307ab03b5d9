"""Gaps the models44 programs (tests/programs/models44: a PyG-free GCN /
GraphSAGE over sparse COO and CSR adjacencies) found in tracec, each
against torch: the compressed layouts torch.sparse_csr / sparse_csc
(to_sparse_csr / to_sparse_csc from strided, COO and each other,
crow_indices / col_indices / ccol_indices / row_indices / values / _nnz,
torch.sparse_csr_tensor with gradients into its values, printing,
to_dense, products, to_sparse back to COO, and the layout errors);
torch.sparse.mm's SparseAddmmBackward0 node."""
import numpy as np
import pytest
import torch as real_torch

import tracec as torch

A = np.array([[0., 1.5, 0., 0.], [2., 0., 3., 0.], [0., 0., 0., 4.]], np.float32)


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type and message are compared
        return type(e).__name__, str(e)
    return None


def _text(t):
    """``repr(t)`` with tracec's module name as torch's (run in-process,
    tracec's dtypes print as ``tracec.float64``; under ``tracec run``, as torch's)."""
    return repr(t).replace("tracec.", "torch.")


def _both(fn):
    return fn(torch), fn(real_torch)


@pytest.mark.parametrize("source", ["dense", "coo", "csc"])
def test_to_sparse_csr_indices_values_and_text_match_torch(source):
    def make(m):
        x = m.tensor(A)
        if source == "coo":
            x = x.to_sparse()
        elif source == "csc":
            x = x.to_sparse_csc()
        return x.to_sparse_csr()
    t, r = _both(make)
    assert t.layout is torch.sparse_csr and repr(t.layout) == repr(r.layout)
    assert t.crow_indices().tolist() == r.crow_indices().tolist()
    assert t.col_indices().tolist() == r.col_indices().tolist()
    assert t.values().tolist() == r.values().tolist()
    assert t._nnz() == r._nnz() and tuple(t.shape) == tuple(r.shape)
    assert (t.is_sparse, t.is_sparse_csr) == (r.is_sparse, r.is_sparse_csr) == (False, True)
    assert _text(t) == _text(r)
    assert np.array_equal(t.to_dense().numpy(), r.to_dense().numpy())
    assert t.to_dense().layout is torch.strided


def test_to_sparse_csc_order_and_text_match_torch():
    # a non-symmetric matrix: CSC lists values column by column
    t, r = _both(lambda m: m.tensor(A).to_sparse_csc())
    assert t.ccol_indices().tolist() == r.ccol_indices().tolist()
    assert t.row_indices().tolist() == r.row_indices().tolist()
    assert t.values().tolist() == r.values().tolist()
    assert _text(t) == _text(r)
    t2, r2 = _both(lambda m: m.tensor(A).to_sparse(layout=m.sparse_csc).to_sparse())
    assert _text(t2) == _text(r2)


def test_sparse_csr_tensor_text_copies_and_casts_match_torch():
    def make(m):
        return m.sparse_csr_tensor(m.tensor([0, 2, 3]), m.tensor([0, 2, 1]), m.tensor([1., 2., 3.]))
    t, r = _both(make)
    assert _text(t) == _text(r)
    assert _text(t.double()) == _text(r.double())
    assert _text(t.clone()) == _text(r.clone()) and t.detach().layout is torch.sparse_csr
    t, r = _both(lambda m: m.sparse_csr_tensor([0, 1, 1], [3], [5.], size=(2, 4), dtype=m.float64))
    assert _text(t) == _text(r)
    t, r = _both(lambda m: m.zeros(2, 2).to_sparse_csr())     # empty: sizes shown
    assert _text(t) == _text(r)


def test_compressed_layout_errors_match_torch():
    cases = [lambda m: m.tensor(A).to_sparse_csr().indices(),
             lambda m: m.tensor(A).to_sparse().crow_indices(),
             lambda m: m.tensor(A).crow_indices(),
             lambda m: m.tensor(A).to_sparse_csc().col_indices(),
             lambda m: m.tensor(A).to_sparse_csr().row_indices(),
             lambda m: m.sparse_csr_tensor(m.tensor([0, 1, 2]), m.tensor([1, 7]), m.tensor([5., 6.]),
                                           (2, 3), check_invariants=True)]
    for f in cases:
        got, want = _both(lambda m: _err(lambda: f(m)))
        assert want is not None and got == want


def test_products_with_csr_and_gradients_into_values_match_torch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)

    def run(m):
        base = m.tensor(A).to_sparse_csr()
        v = m.tensor(rng_vals, requires_grad=True)
        w = m.tensor(x, requires_grad=True)
        s = m.sparse_csr_tensor(base.crow_indices(), base.col_indices(), v * 2, base.size())
        y = (s @ w).tanh() + m.sparse.mm(s, w) + m.spmm(s, w) + m.mm(s, w)
        y.pow(2).sum().backward()
        return y.detach().numpy(), v.grad.numpy(), w.grad.numpy(), m.sparse.mm(s, w).grad_fn.name()
    rng_vals = rng.standard_normal(4).astype(np.float32)
    t, r = _both(run)
    for a, b in zip(t[:3], r[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert t[3] == r[3] == "SparseAddmmBackward0"


def test_sparse_mm_of_a_coo_tensor_names_sparse_addmm_as_torch():
    def run(m):
        s = m.sparse_coo_tensor(m.tensor([[0, 1], [1, 0]]), m.tensor([1., 2.], requires_grad=True), (2, 2))
        return m.sparse.mm(s, m.ones(2, 2)).grad_fn.name(), m.spmm(s, m.ones(2, 2)).grad_fn.name()
    t, r = _both(run)
    assert t == r


# --- torch.quasirandom.SobolEngine (tests/programs/models44/bayesopt_sobol.py) ---

@pytest.mark.parametrize("dim", [1, 2, 7, 200, 21201])
def test_sobol_engine_direction_numbers_equal_torch(dim):
    t = torch.quasirandom.SobolEngine(dim)
    r = real_torch.quasirandom.SobolEngine(dim)
    assert np.array_equal(t.sobolstate.numpy(), r.sobolstate.numpy())
    assert t.sobolstate.dtype is torch.int64


@pytest.mark.parametrize("dim,scramble,seed", [(1, False, None), (3, False, None), (2, True, 0),
                                               (5, True, 123), (40, True, 7)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sobol_engine_draws_equal_torch_bit_for_bit(dim, scramble, seed, dtype):
    t = torch.quasirandom.SobolEngine(dim, scramble=scramble, seed=seed)
    r = real_torch.quasirandom.SobolEngine(dim, scramble=scramble, seed=seed)
    assert np.array_equal(t.shift.numpy(), r.shift.numpy())
    assert np.array_equal(t.sobolstate.numpy(), r.sobolstate.numpy())
    steps = [lambda e, m: e.draw(1, dtype=getattr(m, dtype)),       # the float32 first point
             lambda e, m: e.draw(7, dtype=getattr(m, dtype)),
             lambda e, m: e.fast_forward(5).draw(4, dtype=getattr(m, dtype)),
             lambda e, m: e.reset().fast_forward(3).draw(2, dtype=getattr(m, dtype)),
             lambda e, m: e.reset().draw(3, dtype=getattr(m, dtype)),
             lambda e, m: e.reset().draw_base2(3, dtype=getattr(m, dtype))]
    for f in steps:
        a, b = f(t, torch), f(r, real_torch)
        assert a.dtype.itemsize == b.dtype.itemsize
        assert np.array_equal(a.numpy(), b.numpy())
        assert t.num_generated == r.num_generated
        assert np.array_equal(t.quasi.numpy(), r.quasi.numpy())


def test_sobol_engine_without_seed_draws_from_the_default_generator_as_torch():
    torch.manual_seed(3)
    real_torch.manual_seed(3)
    t = torch.quasirandom.SobolEngine(3, scramble=True)
    r = real_torch.quasirandom.SobolEngine(3, scramble=True)
    assert np.array_equal(t.draw(5).numpy(), r.draw(5).numpy())
    assert np.array_equal(torch.rand(4).numpy(), real_torch.rand(4).numpy())
    assert repr(t) == repr(r) == "SobolEngine(dimension=3, scramble=True)"


def test_sobol_engine_draw_into_out_matches_torch():
    t, r = _both(lambda m: (m.quasirandom.SobolEngine(3, scramble=True, seed=5), m.empty(0)))
    a, b = t[0].draw(4, out=t[1]), r[0].draw(4, out=r[1])
    assert a is t[1] and np.array_equal(t[1].numpy(), r[1].numpy())


def test_sobol_engine_errors_match_torch():
    for f in (lambda m: m.quasirandom.SobolEngine(2).draw(0),
              lambda m: m.quasirandom.SobolEngine(2).draw(3, dtype=m.float16),
              lambda m: m.quasirandom.SobolEngine(0), lambda m: m.quasirandom.SobolEngine(21202),
              lambda m: m.quasirandom.SobolEngine(2).draw(3) and None or
              m.quasirandom.SobolEngine(2).fast_forward(3).draw_base2(2)):
        got, want = _both(lambda m: _err(lambda: f(m)))
        assert want is not None and got == want


# --- torch.special Bessel functions and orthogonal polynomials
#     (tests/programs/models44/chebykan_dimenet.py) ---

BESSEL = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
          "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
          "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"]
POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
         "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
         "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
_BX = np.concatenate([np.linspace(-30, 30, 241), [0., 1e-6, -1e-6, 1e-3, 0.3, 1.9999, 2.0, 2.0001,
                                                  4.9999, 5.0, 5.0001, 7.99, 8.0, 8.01, 50., 100.,
                                                  700., np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", BESSEL)
def test_special_bessel_functions_match_torch(name, dtype):
    x = _BX.astype(dtype)
    with np.errstate(all="ignore"):
        got = getattr(torch.special, name)(torch.tensor(x)).numpy()
        want = getattr(real_torch.special, name)(real_torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    # float32: the same Cephes rules in float32 (a cancellation near a zero of Y1 excepted)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-13,
                               atol=1e-8 if dtype == "float32" else 1e-300, equal_nan=True)


@pytest.mark.parametrize("name", POLYS)
def test_special_polynomials_match_torch(name):
    xs = np.concatenate([np.linspace(-1.5, 1.5, 31), [-1., 1., 0., 0.5, 0.25, 0.75, 1e-3]])
    for dtype in ("float32", "float64"):
        x = xs.astype(dtype)
        for n in list(range(-1, 14)) + [2.7]:
            got = getattr(torch.special, name)(torch.tensor(x), n).numpy()
            want = getattr(real_torch.special, name)(real_torch.tensor(x), n).numpy()
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-12,
                                       atol=1e-5 if dtype == "float32" else 1e-12)
    # a tensor of degrees, a scalar x; integer x; a float64 x with a float n
    t, r = _both(lambda m: getattr(m.special, name)(0.3, m.arange(-1, 12)).numpy())
    np.testing.assert_allclose(t, r, rtol=1e-4, atol=1e-5)      # (float32 trigonometric forms)
    t, r = _both(lambda m: getattr(m.special, name)(m.tensor([0, 1, 2]), 3))
    assert t.dtype.itemsize == r.dtype.itemsize == 4
    np.testing.assert_allclose(t.numpy(), r.numpy(), rtol=1e-6)
    t, r = _both(lambda m: getattr(m.special, name)(m.tensor([0.3], dtype=m.float64), 2.0).dtype)
    assert str(t).split(".")[-1] == str(r).split(".")[-1] == "float64"


def test_special_bessel_and_polynomials_have_no_gradient_as_torch():
    for m in (torch, real_torch):
        x = m.tensor([0.25, 0.7], requires_grad=True)
        assert not m.special.bessel_j0(x).requires_grad
        assert m.special.chebyshev_polynomial_t(x, 3).grad_fn is None


def test_special_bessel_and_chebyshev_compile():
    x = torch.tensor(np.linspace(0.1, 12, 40).astype(np.float32))

    def f(x):
        return torch.special.bessel_j0(x) + torch.special.modified_bessel_k1(x) + \
            torch.special.chebyshev_polynomial_t(torch.tanh(x), 4)
    got = torch.compile(f)(x).numpy()
    want = f(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_compressed_transpose_swaps_the_layout_as_torch():
    t, r = _both(lambda m: m.tensor(A).to_sparse_csr().t())
    assert t.layout is torch.sparse_csc and _text(t) == _text(r)
    t, r = _both(lambda m: m.tensor(A).to_sparse_csc().transpose(0, 1))
    assert t.layout is torch.sparse_csr and _text(t) == _text(r)
    for f in (lambda m: m.tensor(A).to_sparse_csr().is_coalesced(),
              lambda m: m.tensor(A).to_sparse_csr().coalesce()):
        got, want = _both(lambda m: _err(lambda: f(m)))
        assert want is not None and got == want


def test_sparse_addmm_matches_torch():
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    for conv in (lambda t: t.to_sparse(), lambda t: t.to_sparse_csr()):
        t, r = _both(lambda m: m.sparse.addmm(m.ones(3, 2), conv(m.tensor(A)), m.tensor(x), beta=0.5,
                                              alpha=2.0).numpy())
        np.testing.assert_allclose(t, r)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_sparse_softmax_over_specified_entries_matches_torch(log, dim):
    # an explicit zero entry counts; a row without entries stays empty
    idx = np.array([[0, 0, 1, 1, 3], [0, 2, 1, 2, 3]])
    val = np.array([0.5, -1.0, 0.0, 2.0, 1.5], np.float32)
    w = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)

    def run(m):
        v = m.tensor(val, requires_grad=True)
        s = m.sparse_coo_tensor(m.tensor(idx), v, (4, 4))
        y = (m.sparse.log_softmax if log else m.sparse.softmax)(s, dim)
        (y.to_dense() * m.tensor(w)).sum().backward()
        yc = y.coalesce()
        return y.layout, yc.indices().tolist(), yc.values().detach().numpy(), v.grad.numpy()
    t, r = _both(run)
    assert repr(t[0]) == repr(r[0]) and t[1] == r[1]
    np.testing.assert_allclose(t[2], r[2], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(t[3], r[3], rtol=1e-5, atol=1e-6)


def test_special_functions_refuse_bad_input_as_torch():
    cases = [lambda m: m.special.bessel_j0(2.5),
             lambda m: m.special.airy_ai(m.tensor([0.5], dtype=m.float16)),
             lambda m: m.special.modified_bessel_k0(m.tensor([0.5j])),
             lambda m: m.special.chebyshev_polynomial_t(0.3, 2),
             lambda m: m.special.hermite_polynomial_h(m.tensor([0.5], dtype=m.float16), 2),
             lambda m: m.special.legendre_polynomial_p(m.tensor([0.3j]), 2)]
    for f in cases:
        got, want = _both(lambda m: _err(lambda: f(m)))
        assert want is not None and got == want
    got, want = _both(lambda m: _err(lambda: m.special.chebyshev_polynomial_t(m.tensor([0.3, 0.5]),
                                                                              m.tensor([1, 2, 3]))))
    assert got[1] == want[1]
    # bool and integer inputs compute in the default dtype, as in torch
    t, r = _both(lambda m: m.special.bessel_j0(m.tensor([True, False])).numpy())
    np.testing.assert_allclose(t, r)


def test_compressed_times_a_number_and_sums_keep_the_layout_as_torch():
    B = np.array([[1., 0., 0., 0.], [2., 0., 0., 5.], [0., 0., 0., 0.]], np.float32)
    for conv in ("to_sparse_csr", "to_sparse_csc"):
        for f in (lambda m, c: c(m.tensor(A)) * 2, lambda m, c: 0.5 * c(m.tensor(A)),
                  lambda m, c: c(m.tensor(A)).mul(m.tensor(3.0))):
            t, r = _both(lambda m: f(m, lambda x: getattr(x, conv)()))
            assert _text(t) == _text(r)
        if conv == "to_sparse_csr":      # add with alpha=-1 is not a difference
            f = lambda m, c: m.add(c(m.tensor(A)), c(m.tensor(B)), alpha=-1)  # noqa: E731
            t, r = _both(lambda m: f(m, lambda x: getattr(x, conv)()))
            assert _text(t) == _text(r)
        # a division or a difference is refused, and a sum of CSC matrices
        for f in (lambda m, c: c(m.tensor(A)) / 4, lambda m, c: c(m.tensor(A)) - c(m.tensor(B)),
                  lambda m, c: c(m.tensor(A)) + c(m.tensor(B))):
            got, want = _both(lambda m: _err(lambda: f(m, lambda x: getattr(x, conv)())))
            if want is None:       # CSR + CSR: over the union of the entries
                t, r = _both(lambda m: f(m, lambda x: getattr(x, conv)()))
                assert _text(t) == _text(r)
            else:
                assert got == want


@pytest.mark.parametrize("conv", ["to_sparse", "to_sparse_csr", "to_sparse_csc"])
def test_zero_preserving_unary_ops_keep_a_sparse_layout_as_torch(conv):
    ops_ = {"neg": lambda m, s: -s, "abs": lambda m, s: s.abs(), "relu": lambda m, s: m.relu(s),
            "sqrt": lambda m, s: m.sqrt(s.abs()), "tanh": lambda m, s: m.tanh(s),
            "sin": lambda m, s: s.sin(), "sign": lambda m, s: s.sign(),
            "square": lambda m, s: s.square(), "pow": lambda m, s: s.pow(2),
            "exp": lambda m, s: s.exp(), "sigmoid": lambda m, s: m.sigmoid(s)}
    for name, f in ops_.items():
        got, want = _both(lambda m: _err(lambda: f(m, getattr(m.tensor(A), conv)())))
        if want is not None:
            assert got[0] == want[0] and got[1] == want[1].split(" This")[0], name
            continue
        t, r = _both(lambda m: f(m, getattr(m.tensor(A), conv)()))
        assert _text(t) == _text(r), name


def test_neg_of_an_uncoalesced_coo_tensor_keeps_its_entries_as_torch():
    def make(m):
        s = m.sparse_coo_tensor(m.tensor([[1, 0, 1], [2, 0, 2]]), m.tensor([1., 2., 3.]), (2, 3))
        return -s, s.abs()
    (tn, ta), (rn, ra) = _both(make)
    assert _text(tn) == _text(rn) and _text(ta) == _text(ra)


def test_sparse_sum_of_a_compressed_tensor_fails_as_torch():
    for f in (lambda m: m.sparse.sum(m.tensor(A).to_sparse_csr()),
              lambda m: m.sparse.sum(m.tensor(A).to_sparse_csc(), dim=1),
              lambda m: m.sparse.sum(m.tensor(A))):
        got, want = _both(lambda m: _err(lambda: f(m)))
        assert want is not None and got[0] == want[0] and got[1] == want[1].split(" This")[0]
