"""Transforms, TransformedDistribution, biject_to/transform_to and the KL
registry against torch.distributions 2.13 (values and gradients with the
same inputs)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.distributions as TD
import torch.distributions.transforms as TT

import tracec
import tracec.distributions as D
import tracec.distributions.transforms as T

RNG = np.random.default_rng(1)


def _np(t):
    return np.asarray(t.detach().tolist(), dtype=np.float64)


def _close(a, b, rtol=1e-10):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=rtol)


TRANSFORMS = [
    ("ExpTransform", (), lambda: RNG.standard_normal((2, 3))),
    ("SigmoidTransform", (), lambda: RNG.standard_normal((2, 3))),
    ("TanhTransform", (), lambda: RNG.standard_normal((2, 3))),
    ("SoftplusTransform", (), lambda: RNG.standard_normal((2, 3))),
    ("AffineTransform", (0.5, -2.0), lambda: RNG.standard_normal((2, 3))),
    ("PowerTransform", (2.5,), lambda: RNG.uniform(0.5, 2, (2, 3))),
    ("StickBreakingTransform", (), lambda: RNG.standard_normal((2, 3))),
    ("LowerCholeskyTransform", (), lambda: RNG.standard_normal((2, 3, 3))),
    ("CorrCholeskyTransform", (), lambda: RNG.standard_normal((2, 6))),
]


@pytest.mark.parametrize("name, args, draw", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transform_matches_torch(name, args, draw):
    x = draw()
    ours, theirs = getattr(T, name)(*args), getattr(TT, name)(*args)
    a, b = tracec.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = ours(a), theirs(b)
    _close(ya, yb)
    _close(ours.inv(ya), theirs.inv(yb), 1e-8)
    assert repr(ours) == repr(theirs)
    assert repr(ours.domain) == repr(theirs.domain)
    assert repr(ours.codomain) == repr(theirs.codomain)
    assert ours.bijective == theirs.bijective
    assert tuple(ours.forward_shape(x.shape)) == tuple(theirs.forward_shape(x.shape))
    if name != "LowerCholeskyTransform":      # torch has no Jacobian for it either
        ja, jb = ours.log_abs_det_jacobian(a, ya), theirs.log_abs_det_jacobian(b, yb)
        _close(ja, jb)
        (ya.sum() + ja.sum()).backward()
        (yb.sum() + jb.sum()).backward()
        _close(a.grad, b.grad)


def test_softmax_and_compose_and_independent_transforms():
    x = RNG.standard_normal((2, 3))
    _close(T.SoftmaxTransform()(tracec.tensor(x)), TT.SoftmaxTransform()(torch.tensor(x)))
    parts = lambda M: [M.AffineTransform(1.0, 2.0), M.ExpTransform(),  # noqa: E731
                       M.IndependentTransform(M.AffineTransform(0.0, 3.0), 1)]
    ours, theirs = T.ComposeTransform(parts(T)), TT.ComposeTransform(parts(TT))
    a, b = tracec.tensor(x), torch.tensor(x)
    _close(ours(a), theirs(b))
    _close(ours.log_abs_det_jacobian(a, ours(a)), theirs.log_abs_det_jacobian(b, theirs(b)))
    assert repr(ours.domain) == repr(theirs.domain)
    assert repr(ours.codomain) == repr(theirs.codomain)
    _close(ours.inv(ours(a)), b, 1e-8)
    r = T.ReshapeTransform((6,), (2, 3))
    assert tuple(r(tracec.zeros(4, 6)).shape) == (4, 2, 3)
    assert tuple(r.inverse_shape((4, 2, 3))) == (4, 6)


def test_cached_tanh_inverts_exactly():
    # SAC: log_prob of the squashed sample it just drew (tanh(20) rounds to 1).
    t = T.TanhTransform(cache_size=1)
    x = tracec.tensor([20.0, 0.3])
    y = t(x)
    assert t.inv(y) is x
    assert not np.isfinite(_np(T.TanhTransform().inv(y))[0])


def test_tanh_normal_policy_matches_torch():
    loc, scale, u = RNG.standard_normal(4), RNG.uniform(0.5, 1.5, 4), RNG.standard_normal((3, 4))
    vals = []
    for lib, M, MT in ((tracec, D, T), (torch, TD, TT)):
        lo, sc = lib.tensor(loc, requires_grad=True), lib.tensor(scale, requires_grad=True)
        d = M.TransformedDistribution(M.Normal(lo, sc), [MT.TanhTransform(cache_size=1)])
        y = MT.TanhTransform()(lib.tensor(u))
        lp = d.log_prob(y)
        lp.sum().backward()
        vals.append((lp, lo.grad, sc.grad, d))
        assert d.has_rsample and tuple(d.rsample((5,)).shape) == (5, 4)
    for a, b in zip(vals[0][:3], vals[1][:3]):
        _close(a, b, 1e-9)
    assert repr(vals[0][3].support) == repr(vals[1][3].support)


def test_transformed_distribution_cdf_icdf_and_event_dims():
    loc, v = RNG.standard_normal(3), RNG.uniform(0.2, 0.8, (2, 3))
    mk = lambda lib, M, MT: M.TransformedDistribution(  # noqa: E731
        M.Normal(lib.tensor(loc), 1.0), [MT.SigmoidTransform(), MT.AffineTransform(0.0, -1.0)])
    a, b = mk(tracec, D, T), mk(torch, TD, TT)
    _close(a.cdf(tracec.tensor(-v)), b.cdf(torch.tensor(-v)))
    _close(a.icdf(tracec.tensor(v)), b.icdf(torch.tensor(v)))
    sb = lambda lib, M, MT: M.TransformedDistribution(  # noqa: E731
        M.Normal(lib.zeros(2, 3, dtype=lib.float64), 1.0), MT.StickBreakingTransform())
    a, b = sb(tracec, D, T), sb(torch, TD, TT)
    assert tuple(a.batch_shape) == tuple(b.batch_shape) == (2,)
    assert tuple(a.event_shape) == tuple(b.event_shape) == (4,)
    s = np.asarray(b.sample((5,)).tolist())
    _close(a.log_prob(tracec.tensor(s)), b.log_prob(torch.tensor(s)), 1e-8)


CONSTRAINTS = ["real", "positive", "nonnegative", "unit_interval", "simplex", "real_vector",
               "lower_cholesky", "positive_definite", "corr_cholesky"]


@pytest.mark.parametrize("name", CONSTRAINTS)
def test_biject_to_and_transform_to_match_torch(name):
    c, tc = getattr(D.constraints, name), getattr(TD.constraints, name)
    assert repr(c) == repr(tc)
    for ours, theirs in ((D.transform_to, TD.transform_to), (D.biject_to, TD.biject_to)):
        try:
            tt = theirs(tc)
        except NotImplementedError:
            with pytest.raises(NotImplementedError, match="Cannot transform"):
                ours(c)
            continue
        t = ours(c)
        assert repr(t) == repr(tt)
        x = RNG.standard_normal((2, 3, 3) if name in ("lower_cholesky", "positive_definite")
                                else (2, 3))
        _close(t(tracec.tensor(x)), tt(torch.tensor(x)), 1e-9)
    for lo, hi in ((0.0, 1.0), (-1.0, 2.0)):
        assert repr(D.biject_to(D.constraints.interval(lo, hi))) == \
            repr(TD.biject_to(TD.constraints.interval(lo, hi)))


def _pairs():
    r, p = (lambda *s: RNG.standard_normal(s)), (lambda *s: RNG.uniform(0.5, 2.0, s))
    s = RNG.uniform(0.2, 1.0, (2, 3))
    s = s / s.sum(-1, keepdims=True)
    a = RNG.standard_normal((3, 3))
    cov = a @ a.T + 3 * np.eye(3)
    return [
        ("Normal", dict(loc=r(3), scale=p(3)), dict(loc=r(3), scale=p(3))),
        ("Bernoulli", dict(probs=RNG.uniform(0.1, 0.9, 3)), dict(logits=r(3))),
        ("Categorical", dict(probs=s), dict(logits=r(2, 3))),
        ("OneHotCategorical", dict(probs=s), dict(logits=r(2, 3))),
        ("Beta", dict(concentration1=p(3), concentration0=p(3)),
         dict(concentration1=p(3), concentration0=p(3))),
        ("Gamma", dict(concentration=p(3), rate=p(3)), dict(concentration=p(3), rate=p(3))),
        ("Dirichlet", dict(concentration=p(2, 3)), dict(concentration=p(2, 3))),
        ("Exponential", dict(rate=p(3)), dict(rate=p(3))),
        ("Laplace", dict(loc=r(3), scale=p(3)), dict(loc=r(3), scale=p(3))),
        ("Uniform", dict(low=-p(3), high=p(3)), dict(low=-p(3) - 2, high=p(3) + 2)),
        ("Poisson", dict(rate=p(3)), dict(rate=p(3))),
        ("Gumbel", dict(loc=r(3), scale=p(3)), dict(loc=r(3), scale=p(3))),
        ("Geometric", dict(probs=RNG.uniform(0.1, 0.9, 3)), dict(probs=RNG.uniform(0.1, 0.9, 3))),
        ("HalfNormal", dict(scale=p(3)), dict(scale=p(3))),
        ("Cauchy", dict(loc=r(3), scale=p(3)), dict(loc=r(3), scale=p(3))),
        ("Binomial", dict(total_count=4, probs=RNG.uniform(0.1, 0.9, 3)),
         dict(total_count=4, probs=RNG.uniform(0.1, 0.9, 3))),
        ("LogNormal", dict(loc=r(3), scale=p(3)), dict(loc=r(3), scale=p(3))),
        ("MultivariateNormal", dict(loc=r(2, 3), covariance_matrix=cov),
         dict(loc=r(3), scale_tril=np.linalg.cholesky(cov + np.eye(3)))),
    ]


PAIRS = _pairs()


@pytest.mark.parametrize("name, pk, qk", PAIRS, ids=[p[0] for p in PAIRS])
def test_kl_matches_torch(name, pk, qk):
    def build(lib, M, kw):
        leaves = {k: lib.tensor(v, requires_grad=True) for k, v in kw.items()
                  if isinstance(v, np.ndarray)}
        return getattr(M, name)(**{**kw, **leaves}), list(leaves.values())
    (p1, l1), (q1, m1) = build(tracec, D, pk), build(tracec, D, qk)
    (p2, l2), (q2, m2) = build(torch, TD, pk), build(torch, TD, qk)
    a, b = D.kl_divergence(p1, q1), TD.kl_divergence(p2, q2)
    _close(a, b, 1e-9)
    a.sum().backward()
    b.sum().backward()
    for x, y in zip(l1 + m1, l2 + m2):
        _close(x.grad, y.grad, 1e-8)


def test_kl_independent_and_infinities():
    mk = lambda lib, M, lo: M.Independent(M.Normal(lib.tensor(lo), 1.0), 1)  # noqa: E731
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    _close(D.kl_divergence(mk(tracec, D, a), mk(tracec, D, b)),
           TD.kl_divergence(mk(torch, TD, a), mk(torch, TD, b)))
    u = D.kl_divergence(D.Uniform(0.0, 2.0), D.Uniform(0.5, 3.0))
    assert float(u) == float("inf")


def test_register_kl_dispatch_like_torch():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    _close(D.kl_divergence(p, q), TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)))

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return tracec.tensor(42.0)

    assert float(D.kl_divergence(p, q)) == 42.0
    assert float(D.kl_divergence(q, p)) != 42.0

    class A(D.Normal):
        pass

    class B(D.Normal):
        pass

    @D.register_kl(A, D.Normal)
    def _a(p, q):
        return tracec.tensor(1.0)

    @D.register_kl(D.Normal, B)
    def _b(p, q):
        return tracec.tensor(2.0)

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        D.kl_divergence(A(0.0, 1.0), B(0.0, 1.0))
    assert any("Ambiguous kl_divergence" in str(x.message) for x in w)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(tracec.tensor([0.5, 0.5])))


def _examples():
    """One instance maker per family: ``fn(lib, M) -> (dist, leaves)``."""
    r = np.random.default_rng(5)

    def mk(name, **kw):
        arrays = {k: v for k, v in kw.items() if isinstance(v, np.ndarray)}

        def build(lib, M):
            leaves = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
            return getattr(M, name)(**{**kw, **leaves}), list(leaves.values())
        return build
    u = lambda lo, hi: r.uniform(lo, hi, 3)  # noqa: E731
    return {
        "Normal": mk("Normal", loc=u(-1, 1), scale=u(0.5, 2)),
        "Bernoulli": mk("Bernoulli", probs=u(0.1, 0.9)),
        "Binomial": mk("Binomial", total_count=3, probs=u(0.1, 0.9)),
        "Poisson": mk("Poisson", rate=u(0.5, 3)),
        "Beta": mk("Beta", concentration1=u(0.5, 3), concentration0=u(0.5, 3)),
        "Gamma": mk("Gamma", concentration=u(0.5, 3), rate=u(0.5, 3)),
        "Exponential": mk("Exponential", rate=u(0.5, 3)),
        "Gumbel": mk("Gumbel", loc=u(-1, 1), scale=u(0.5, 2)),
        "Laplace": mk("Laplace", loc=u(-1, 1), scale=u(0.5, 2)),
        "Uniform": mk("Uniform", low=u(0.1, 0.3), high=u(0.6, 0.9)),
        "Pareto": mk("Pareto", scale=u(0.5, 1), alpha=u(2.5, 4)),
        "ContinuousBernoulli": mk("ContinuousBernoulli", probs=u(0.1, 0.9)),
        "LowRankMultivariateNormal": mk("LowRankMultivariateNormal", loc=u(-1, 1),
                                        cov_factor=r.standard_normal((3, 2)),
                                        cov_diag=u(0.5, 2)),
        "MultivariateNormal": mk("MultivariateNormal", loc=u(-1, 1),
                                 scale_tril=np.tril(r.uniform(0.2, 0.5, (3, 3))) + np.eye(3)),
    }


EXAMPLES = _examples()
CROSS = sorted((a.__name__, b.__name__) for a, b in TD.kl._KL_REGISTRY
               if a.__name__ in EXAMPLES and b.__name__ in EXAMPLES)


@pytest.mark.parametrize("pq", CROSS, ids=["-".join(x) for x in CROSS])
def test_every_registered_kl_pair_matches_torch(pq):
    (p1, l1), (q1, m1) = EXAMPLES[pq[0]](tracec, D), EXAMPLES[pq[1]](tracec, D)
    (p2, l2), (q2, m2) = EXAMPLES[pq[0]](torch, TD), EXAMPLES[pq[1]](torch, TD)
    b = TD.kl_divergence(p2, q2)
    a = D.kl_divergence(p1, q1)
    _close(a, b, 1e-8)
    if b.requires_grad and np.isfinite(_np(b)).all():
        a.sum().backward()
        b.sum().backward()
        for x, y in zip(l1 + m1, l2 + m2):
            if y.grad is not None:
                _close(x.grad, y.grad, 1e-7)


def test_lkj_cholesky_matches_torch():
    conc = np.array([0.5, 2.0])
    ours = D.LKJCholesky(4, tracec.tensor(conc, requires_grad=True))
    theirs = TD.LKJCholesky(4, torch.tensor(conc, requires_grad=True))
    v = theirs.sample((3,))
    a, b = ours.log_prob(tracec.tensor(v.numpy())), theirs.log_prob(v)
    _close(a, b)
    a.sum().backward()
    b.sum().backward()
    _close(ours.concentration.grad, theirs.concentration.grad)
    tracec.manual_seed(0)
    s = ours.sample((4000,))
    assert tuple(s.shape) == (4000, 2, 4, 4)
    assert bool(theirs.support.check(torch.tensor(_np(s))).all())
    # Off-diagonal correlations: variance 1 / (2 eta + d - 1) for LKJ(eta) in d dims.
    corr = _np(s @ s.transpose(-1, -2))[..., 0, 1]
    np.testing.assert_allclose(corr.var(0), [1 / 4.0, 1 / 7.0], rtol=0.1)
    with pytest.raises(ValueError, match="Expected dim to be an integer greater than"):
        D.LKJCholesky(1)


def test_cat_and_stack_transforms_match_torch():
    x = RNG.standard_normal((2, 5))

    def mk_cat(MT):
        return MT.CatTransform([MT.ExpTransform(), MT.AffineTransform(1.0, 3.0)], dim=1,
                               lengths=[2, 3])

    def mk_stack(MT):
        return MT.StackTransform([MT.ExpTransform(), MT.TanhTransform()], dim=0)
    for mk in (mk_cat, mk_stack):
        ours, theirs = mk(T), mk(TT)
        a, b = tracec.tensor(x), torch.tensor(x)
        ya, yb = ours(a), theirs(b)
        _close(ya, yb)
        _close(ours.inv(ya), b, 1e-9)
        _close(ours.log_abs_det_jacobian(a, ya), theirs.log_abs_det_jacobian(b, yb))
        assert ours.bijective == theirs.bijective
        assert bool(ours.codomain.check(ya).all()) and bool(theirs.codomain.check(yb).all())
