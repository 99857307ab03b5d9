"""Differences from torch 2.13 found by a second sweep of torch's own OpInfo
samples (``op_db``: compiled gradients, float64 eager gradients with more
samples, compiled forwards in float64/int64) and of its ``module_db``: each
case below failed before its fix."""
import numpy as np
import pytest
import torch

import tracec

RNG = np.random.default_rng(0)


def _np(v):
    return v.detach().numpy() if hasattr(v, "detach") else np.asarray(v)


def _same(a, b, tol=1e-6):
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(b), _np(a), rtol=tol, atol=tol)


def _grads(fn, arrays, g=None):
    """``fn``'s value and input gradients under torch and tracec (float64)."""
    out = []
    for L in (torch, tracec):
        xs = [L.tensor(a, requires_grad=True) for a in arrays]
        y = fn(L, *xs)
        w = L.tensor(np.ones(tuple(y.shape)) if g is None else g)
        gs = L.autograd.grad((y * w).sum(), xs, allow_unused=True)
        out.append((y, gs))
    return out


def test_diff_order_zero_is_a_copy_ignoring_prepend_append():
    x = RNG.standard_normal((5, 5))
    p, a = RNG.standard_normal((1, 5)), RNG.standard_normal((2, 5))
    (ty, tg), (cy, cg) = _grads(lambda L, x, p, a: L.diff(x, 0, 0, p, a), [x, p, a])
    _same(ty, cy)
    _same(tg[0], cg[0])


def test_diff_prepend_needs_the_inputs_dimensions():
    for L in (torch, tracec):
        with pytest.raises(RuntimeError, match="same dimension as input"):
            L.diff(L.ones(3), 1, prepend=L.ones(()))


def test_group_norm_empty_batch():
    x = np.zeros((0, 2))
    w, b = RNG.standard_normal(2), RNG.standard_normal(2)
    (ty, tg), (cy, cg) = _grads(
        lambda L, x, w, b: L.nn.functional.group_norm(x, 1, w, b), [x, w, b])
    _same(ty, cy)
    for u, v in zip(tg, cg):
        _same(u, v)


def test_pinv_hermitian_reads_the_lower_triangle():
    # the matrix is not symmetric: hermitian=True uses eigh of its lower
    # triangle; the gradient is PyTorch's pinv_backward of the matrix as given
    a = RNG.standard_normal((5, 5))
    g = RNG.standard_normal((5, 5))
    (ty, tg), (cy, cg) = _grads(lambda L, a: L.linalg.pinv(a, hermitian=True), [a], g)
    _same(ty, cy, 1e-9)
    _same(tg[0], cg[0], 1e-9)
    s = a + a.T      # on a symmetric matrix it is the ordinary pseudo-inverse
    _same(torch.linalg.pinv(torch.tensor(s)),
          tracec.linalg.pinv(tracec.tensor(s), hermitian=True), 1e-9)


FILLS = {
    "fill": lambda L, x: L.fill(x, 2.0),
    "fill_tensor": lambda L, x: L.fill(x, L.tensor(3.0, dtype=L.float64)),
    "fill_": lambda L, x: x.clone().fill_(1.0),
    "zero_": lambda L, x: L.zero_(x.clone()),
}


@pytest.mark.parametrize("name", sorted(FILLS))
def test_fill_keeps_the_history(name):
    # PyTorch's fill/zero_ keep requires_grad (the input's gradient is zero);
    # a non-finite input stays out of the result
    x = np.array([1.0, np.inf, np.nan])
    (ty, tg), (cy, cg) = _grads(FILLS[name], [x])
    assert cy.requires_grad and cy.grad_fn.name() == ty.grad_fn.name()
    _same(ty, cy)
    _same(tg[0], cg[0])


def test_fill_compiled_gradient():
    def f(L, a):
        return L.autograd.grad((L.zero_(a.clone()) * 2).sum(), [a])[0]
    x = RNG.standard_normal(4)
    ref = f(torch, torch.tensor(x, requires_grad=True))
    _same(ref, tracec.compile(lambda a: f(tracec, a))(tracec.tensor(x, requires_grad=True)))


HISTORY = {
    "prod_empty": (lambda L, x: L.prod(x), (0,)),
    "prod_empty_dim": (lambda L, x: x.prod(0), (0, 3)),
    "pdist_one_row": (lambda L, x: L.nn.functional.pdist(x), (1, 3)),
    "pdist_p0": (lambda L, x: L.nn.functional.pdist(x, 0.0), (4, 3)),
    "pairwise_distance_p0": (lambda L, x: L.nn.functional.pairwise_distance(x, x * 2, 0.0),
                             (4, 3)),
}


@pytest.mark.parametrize("name", sorted(HISTORY))
def test_constant_results_keep_the_history(name):
    # PyTorch's result requires grad (a zero gradient): backward works
    fn, shape = HISTORY[name]
    (ty, tg), (cy, cg) = _grads(fn, [RNG.standard_normal(shape)])
    assert cy.requires_grad
    if not name.startswith("pairwise"):   # torch's is a NormBackward1
        assert cy.grad_fn.name() == ty.grad_fn.name()
    _same(ty, cy)
    _same(torch.zeros(shape, dtype=torch.float64) if tg[0] is None else tg[0], cg[0])


BLAS_INT = {
    "addmm": lambda L, a, b: L.addmm(a, a, a, beta=2.7, alpha=1.7),
    "addmv": lambda L, a, b: L.addmv(a[0], a, a[1], beta=0.2, alpha=0.6),
    "baddbmm": lambda L, a, b: L.baddbmm(b, b, b, beta=2.7, alpha=1.7),
    "addbmm": lambda L, a, b: L.addbmm(a, b, b, beta=2.7, alpha=1.7),
    "addr": lambda L, a, b: L.addr(a, a[0], a[1], beta=2, alpha=3),
}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name", sorted(BLAS_INT))
def test_blas_ops_truncate_float_scalars_for_integers(name, compiled):
    # integer operands: beta and alpha become integers, the result stays int64
    a = np.arange(4).reshape(2, 2) * 5
    b = np.stack([a, a + 1])
    fn = BLAS_INT[name]
    ref = fn(torch, torch.tensor(a), torch.tensor(b))
    f = tracec.compile(lambda x, y: fn(tracec, x, y)) if compiled else (
        lambda x, y: fn(tracec, x, y))
    got = f(tracec.tensor(a), tracec.tensor(b))
    assert got.dtype == tracec.int64
    np.testing.assert_array_equal(_np(got), ref.numpy())


def test_addr_float_scalar_on_integers_is_an_error():
    a = np.arange(4).reshape(2, 2)
    for L in (torch, tracec):
        with pytest.raises(RuntimeError, match="argument alpha must not be a floating point"):
            L.addr(L.tensor(a), L.tensor(a[0]), L.tensor(a[1]), alpha=1.5)


def test_fractional_max_pool_reads_the_first_rows_of_random_samples():
    # module_db's unbatched sample passes 2 rows of samples for a batch of 1
    x = RNG.standard_normal((4, 5, 5, 5))
    s = RNG.random((2, 4, 3))
    ref = torch.nn.functional.fractional_max_pool3d(
        torch.tensor(x), 2, output_ratio=0.5, _random_samples=torch.tensor(s))
    got = tracec.nn.functional.fractional_max_pool3d(
        tracec.tensor(x), 2, output_ratio=0.5, _random_samples=tracec.tensor(s))
    _same(ref, got)
    for L, bad, msg in ((L, b, m) for L in (torch, tracec) for b, m in (
            ((2, 3, 3), "size\\(1\\) equals to input channel size"),
            ((1, 4, 3), "size\\(0\\) no less then input batch size"))):
        with pytest.raises(RuntimeError, match=msg):
            L.nn.functional.fractional_max_pool3d(L.tensor(RNG.standard_normal((2, 4, 5, 5, 5))),
                                                  2, output_ratio=0.5,
                                                  _random_samples=L.tensor(RNG.random(bad)))


@pytest.mark.parametrize("ord_", [0.5, 0.3, -1.0, -0.5])
@pytest.mark.parametrize("xs", [[0.0] * 4, [0.0, 1.0, -2.0, 0.0], [0.5, 1.0, -2.0, 4.0]])
def test_vector_norm_below_one_subgradient_at_zero(ord_, xs):
    # PyTorch's norm_backward masks the zero entries (|x| ** (p - 1) = inf): no NaN
    (ty, tg), (cy, cg) = _grads(lambda L, x: L.linalg.vector_norm(x, ord_), [np.array(xs)])
    _same(ty, cy)
    _same(tg[0], cg[0])


def test_vector_norm_zero_order_with_inf_keeps_its_count():
    x = np.array([np.inf, 1.0, 0.0])
    (ty, _), (cy, cg) = _grads(lambda L, x: L.linalg.vector_norm(x, 0), [x])
    _same(ty, cy)
    _same(torch.zeros(3, dtype=torch.float64), cg[0])


@pytest.mark.parametrize("driver", [None, "gelsy", "gels", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((4, 3), (4, 2)), ((4, 3), (4,)), ((2, 3), (2, 2)),
                                    ((2, 4, 3), (2, 4, 2))])
def test_lstsq_outputs_per_driver(driver, shapes):
    # rank empty for gels, singular values for gelsd/gelss, residuals when
    # m > n and the driver is not gelsy (differentiable, as PyTorch's)
    a, b = (RNG.standard_normal(s) for s in shapes)
    t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    c = tracec.linalg.lstsq(tracec.tensor(a), tracec.tensor(b), driver=driver)
    for u, v in zip(t, c):
        _same(u, v, 1e-9)
    if t.residuals.numel():
        (_, tg), (_, cg) = _grads(lambda L, a, b: L.linalg.lstsq(a, b, driver=driver).residuals,
                                  [a, b])
        for u, v in zip(tg, cg):
            _same(u, v, 1e-9)


def test_lstsq_unknown_driver():
    for L in (torch, tracec):
        with pytest.raises(RuntimeError, match="parameter `driver` should be one of"):
            L.linalg.lstsq(L.ones(3, 3), L.ones(3, 1), driver="foo")


@pytest.mark.parametrize("ish,xsh,d", [((2, 0), (5,), 0), ((0,), (3, 4), 1), ((0, 7), (2, 3), 1)])
def test_gather_with_an_empty_index_checks_no_shape(ish, xsh, d):
    (ty, tg), (cy, cg) = _grads(
        lambda L, x: L.gather(x, d, L.zeros(ish, dtype=L.int64)), [RNG.standard_normal(xsh)])
    assert cy.grad_fn.name() == ty.grad_fn.name()
    _same(ty, cy)
    _same(tg[0], cg[0])


@pytest.mark.parametrize("ash,dims", [((1, 1, 1), ([0, 1], [2, 0])), ((3, 1, 1), ([1, 2], [1, 0])),
                                      ((3, 2, 1), ([1, 2], [0, 2]))])
def test_tensordot_size_one_contracted_dimension_sums_the_other(ash, dims):
    a, b = RNG.standard_normal(ash), RNG.standard_normal((2, 1, 2))
    (ty, tg), (cy, cg) = _grads(lambda L, a, b: L.tensordot(a, b, dims=dims), [a, b])
    _same(ty, cy, 1e-9)
    for u, v in zip(tg, cg):
        _same(u, v, 1e-9)


DRAWS = {
    "uniform_": lambda L, y: y.uniform_(),
    "normal_": lambda L, y: y.normal_(),
    "bernoulli_": lambda L, y: y.bernoulli_(0.5),
    "exponential_": lambda L, y: y.exponential_(),
    "geometric_": lambda L, y: y.geometric_(0.5),
    "cauchy_": lambda L, y: y.cauchy_(),
    "log_normal_": lambda L, y: y.log_normal_(),
    "random_": lambda L, y: y.random_(),
    "bernoulli": lambda L, y: L.bernoulli(y.clamp(0, 1)),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_random_draws_into_a_tensor_give_it_a_zero_gradient(name):
    # the draws replace the values: the old graph node must not pass the
    # gradient on (it did, as an identity, before)
    x = RNG.random(4)
    names = []
    for L in (torch, tracec):
        a = L.tensor(x, requires_grad=True)
        y = DRAWS[name](L, a.clone())
        assert y.requires_grad
        names.append(y.grad_fn.name())
        g, = L.autograd.grad((y * a).sum(), [a])
        np.testing.assert_array_equal(_np(g), _np(y))     # d(y * a)/da = y only
    assert names[0] == names[1]


def test_copy_of_a_constant_into_a_tensor_that_requires_grad_keeps_it():
    x, v = RNG.random(3), RNG.random(3)
    out = []
    for L in (torch, tracec):
        a, b = L.tensor(x, requires_grad=True), L.tensor(v, requires_grad=True)
        y = a.clone()
        y.copy_(L.ones(3, dtype=L.float64))
        z = a.clone()
        z.copy_(b * 2)
        assert y.requires_grad and y.grad_fn.name().endswith("CopyBackwards")
        out.append(L.autograd.grad(y.sum() + (z * a).sum(), [a, b]))
    for u, w in zip(*out):
        _same(u, w)


def test_batch_norm_one_dimensional_input():
    # an empty 1-D input passes through (op_db's sample), a non-empty one has no dim 1
    for L in (torch, tracec):
        x = L.zeros(0, dtype=L.float64, requires_grad=True)
        y = L.nn.functional.batch_norm(x, None, None, training=True)
        assert tuple(y.shape) == (0,) and y.requires_grad
        with pytest.raises(IndexError, match="Dimension out of range"):
            L.nn.functional.batch_norm(L.ones(3), None, None, training=True)


def test_ctc_loss_traced_lengths_name_the_op():
    # compiled with traced targets/lengths: a TraceError that names ctc_loss
    # (it said "numpy()"); with constant ones it compiles
    T, N, C, S = 6, 2, 4, 3
    lp = tracec.tensor(RNG.standard_normal((T, N, C))).log_softmax(2)
    tg = tracec.tensor(RNG.integers(1, C, (N, S)))
    il, tl = tracec.full((N,), T, dtype=tracec.int64), tracec.full((N,), S, dtype=tracec.int64)
    ref = tracec.nn.functional.ctc_loss(lp, tg, il, tl)
    with pytest.raises(tracec.TraceError, match="ctc_loss\\(\\) \\(eager only"):
        tracec.compile(lambda a, b, c, d: tracec.nn.functional.ctc_loss(a, b, c, d))(
            lp, tg, il, tl)
    got = tracec.compile(lambda a: tracec.nn.functional.ctc_loss(a, tg, [T, T], [S, S]))(lp)
    _same(ref, got, 1e-9)


def test_integer_division_is_exact_beyond_two_to_the_53():
    # eager int64 division went through a float64 quotient (op_db's
    # unravel_index sample with a dimension of 2**63 - 1)
    big = 2 ** 63 - 2
    i, j = [big, -big, 7, -7, 7, -7, 0], [1, 3, 2, 2, -2, -2, 5]
    for fn in (lambda L, a, b: a // b, lambda L, a, b: L.div(a, b, rounding_mode="trunc"),
               lambda L, a, b: a % b, lambda L, a, b: L.fmod(a, b)):
        ref = fn(torch, torch.tensor(i), torch.tensor(j))
        got = fn(tracec, tracec.tensor(i), tracec.tensor(j))
        assert got.dtype == tracec.int64
        assert got.tolist() == ref.tolist()
    ref = torch.unravel_index(torch.tensor(big), (1, 2 ** 63 - 1))
    got = tracec.unravel_index(tracec.tensor(big), (1, 2 ** 63 - 1))
    assert [int(v) for v in got] == [int(v) for v in ref]


@pytest.mark.parametrize("x,idx", [(3.0, [0]), (3.0, [0, 0]), ([3.0, 4.0], 1), (3.0, 0)])
def test_gather_reads_a_zero_dim_tensor_as_one_dimensional(x, idx):
    (ty, tg), (cy, cg) = _grads(
        lambda L, a: L.gather(a, 0, L.tensor(idx)), [np.array(x)])
    _same(ty, cy)
    _same(tg[0], cg[0])
    f = tracec.compile(lambda a: tracec.gather(a, 0, tracec.tensor(idx)) * 2)
    _same(ty * 2, f(tracec.tensor(np.array(x))))


@pytest.mark.parametrize("steps", [0, 1, 4, 50])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_linspace_tensor_end_points_compile(steps, dtype):
    # op_db's tensor_overload: traced start/end compiled (it raised a
    # TraceError about np.asarray)
    ref = torch.linspace(torch.tensor(-3.0), torch.tensor(7.0), steps, dtype=getattr(torch, dtype))
    f = tracec.compile(lambda a, b: tracec.linspace(a, b, steps, dtype=getattr(tracec, dtype)))
    for got in (f(tracec.tensor(-3.0), tracec.tensor(7.0)),
                tracec.linspace(tracec.tensor(-3.0), 7.0, steps, dtype=getattr(tracec, dtype))):
        assert str(got.dtype).split(".")[-1] == dtype
        np.testing.assert_allclose(_np(got), ref.numpy(), rtol=1e-6, atol=1e-6)


def test_linspace_end_points_must_be_zero_dim():
    for L in (torch, tracec):
        with pytest.raises(RuntimeError, match="only supports 0-dimensional start and end"):
            L.linspace(L.ones(2), 3.0, 4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("t", [0, -1])
def test_multilabel_margin_loss_zero_dim(reduction, t):
    (ty, tg), (cy, cg) = _grads(
        lambda L, x: L.nn.functional.multilabel_margin_loss(x, L.tensor(t), reduction=reduction),
        [np.array(0.5)])
    _same(ty, cy)
    _same(tg[0], cg[0])


@pytest.mark.parametrize("shapes", [((2,), (2,)), ((), (2,)), ((2, 1), (3,))])
def test_nextafter_gradient(shapes):
    # PyTorch's: input's gradient passes as is (summed to its shape), other's is zero
    a = RNG.standard_normal(shapes[0])
    b = RNG.standard_normal(shapes[1])
    (ty, tg), (cy, cg) = _grads(lambda L, a, b: L.nextafter(a, b), [a, b],
                                RNG.standard_normal(np.broadcast_shapes(*shapes)))
    assert cy.grad_fn.name() == ty.grad_fn.name()
    _same(ty, cy, 0)
    for u, v in zip(tg, cg):
        _same(u, v)
