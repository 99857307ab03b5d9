"""Sampling: draws use tracec's generator (seeded by tracec.manual_seed),
so they are checked statistically against the distributions' own moments
and against torch's; implicit reparameterization gradients of Gamma /
Beta / Dirichlet against torch's _standard_gamma_grad, finite differences
of the CDF and Monte Carlo; and the common distributions inside
tracec.compile equal eager."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as TD

import tracec
import tracec.distributions as D
from tracec.distributions.gamma_sampling import standard_gamma_grad
from tracec.math_igamma import _density, _p_and_q

N = 20000


def _np(t):
    return np.asarray(t.detach().tolist(), dtype=np.float64)


CASES = [
    lambda M, lib: M.Normal(lib.tensor([0.5, -1.0]), lib.tensor([1.0, 2.0])),
    lambda M, lib: M.Uniform(lib.tensor([0.0, -2.0]), lib.tensor([1.0, 3.0])),
    lambda M, lib: M.Exponential(lib.tensor([0.5, 3.0])),
    lambda M, lib: M.Laplace(lib.tensor([0.5, -1.0]), lib.tensor([1.0, 0.3])),
    lambda M, lib: M.Gumbel(lib.tensor([0.5, -1.0]), lib.tensor([1.0, 0.3])),
    lambda M, lib: M.LogNormal(lib.tensor([0.0, 0.5]), lib.tensor([0.3, 0.5])),
    lambda M, lib: M.HalfNormal(lib.tensor([1.0, 0.3])),
    lambda M, lib: M.Gamma(lib.tensor([0.3, 4.0]), lib.tensor([1.0, 2.0])),
    lambda M, lib: M.Chi2(lib.tensor([1.0, 5.0])),
    lambda M, lib: M.Beta(lib.tensor([0.5, 3.0]), lib.tensor([0.5, 1.5])),
    lambda M, lib: M.Dirichlet(lib.tensor([0.5, 1.0, 3.0])),
    lambda M, lib: M.StudentT(lib.tensor([5.0, 9.0])),
    lambda M, lib: M.Poisson(lib.tensor([0.5, 30.0])),
    lambda M, lib: M.Binomial(10, lib.tensor([0.2, 0.9])),
    lambda M, lib: M.Geometric(lib.tensor([0.3, 0.8])),
    lambda M, lib: M.NegativeBinomial(lib.tensor([3.0, 0.5]), lib.tensor([0.4, 0.2])),
    lambda M, lib: M.Bernoulli(lib.tensor([0.2, 0.7])),
    lambda M, lib: M.Categorical(lib.tensor([[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]])),
    lambda M, lib: M.Multinomial(5, lib.tensor([0.2, 0.3, 0.5])),
    lambda M, lib: M.MultivariateNormal(lib.tensor([1.0, -1.0]),
                                        lib.tensor([[2.0, 0.5], [0.5, 1.0]])),
    lambda M, lib: M.RelaxedBernoulli(lib.tensor(0.5), lib.tensor([0.2, 0.7])),
    lambda M, lib: M.RelaxedOneHotCategorical(lib.tensor(0.5), lib.tensor([0.2, 0.3, 0.5])),
    lambda M, lib: M.VonMises(lib.tensor([0.5, -2.0]), lib.tensor([0.5, 8.0])),
    lambda M, lib: M.FisherSnedecor(lib.tensor([5.0, 10.0]), lib.tensor([12.0, 20.0])),
    lambda M, lib: M.InverseGamma(lib.tensor([3.0, 5.0]), lib.tensor([1.0, 2.0])),
    lambda M, lib: M.Weibull(lib.tensor([1.0, 2.0]), lib.tensor([0.8, 3.0])),
    lambda M, lib: M.Pareto(lib.tensor([1.0, 2.0]), lib.tensor([4.0, 6.0])),
    lambda M, lib: M.Kumaraswamy(lib.tensor([0.5, 2.0]), lib.tensor([2.0, 0.7])),
    lambda M, lib: M.ContinuousBernoulli(lib.tensor([0.2, 0.5, 0.9])),
    lambda M, lib: M.GeneralizedPareto(lib.tensor([0.0, 1.0]), lib.tensor([1.0, 0.5]),
                                       lib.tensor([0.1, -0.2])),
    lambda M, lib: M.LowRankMultivariateNormal(lib.tensor([1.0, -1.0]),
                                               lib.tensor([[1.0], [0.5]]), lib.tensor([0.5, 1.0])),
    lambda M, lib: M.LogisticNormal(lib.tensor([0.5, -1.0]), lib.tensor([0.5, 1.0])),
    lambda M, lib: M.MixtureSameFamily(M.Categorical(lib.tensor([0.3, 0.7])),
                                       M.Normal(lib.tensor([-2.0, 2.0]), lib.tensor([0.5, 1.0]))),
]


@pytest.mark.parametrize("make", CASES)
def test_sample_moments_match_torch(make):
    tracec.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = make(D, tracec), make(TD, torch)
    a, b = _np(ours.sample((N,))), theirs.sample((N,)).double().numpy()
    assert a.shape == b.shape
    # Same support, and means / spreads within a few standard errors of
    # torch's draws (the variances of both sample means add).
    assert bool(theirs.support.check(torch.tensor(a).to(theirs.sample().dtype)).all())
    se = np.sqrt((a.var(0) + b.var(0)) / N)
    np.testing.assert_array_less(np.abs(a.mean(0) - b.mean(0)), 5 * se + 1e-9)
    np.testing.assert_allclose(a.std(0), b.std(0), rtol=0.08, atol=1e-3)


def test_manual_seed_fixes_every_sampler():
    for make in CASES:
        tracec.manual_seed(3)
        x = _np(make(D, tracec).sample((4,)))
        tracec.manual_seed(3)
        np.testing.assert_array_equal(x, _np(make(D, tracec).sample((4,))))


@pytest.mark.parametrize("alpha", [0.05, 0.4, 1.0, 3.0, 12.0, 150.0])
def test_standard_gamma_grad_matches_torch_and_the_cdf(alpha):
    x = np.random.default_rng(0).gamma(alpha, size=400)
    ours = standard_gamma_grad(np.full_like(x, alpha), x)
    theirs = torch._standard_gamma_grad(torch.tensor(np.full_like(x, alpha)),
                                        torch.tensor(x)).numpy()
    # torch's is an approximation (about 1e-3 relative at worst)...
    np.testing.assert_allclose(ours, theirs, rtol=3e-3, atol=1e-6)
    # ... ours is -dP/dalpha / density to float64: central differences of P
    # (the reference igamma is slow: a few points).
    x, ours = x[:25], ours[:25]
    h = 1e-5 * alpha
    p1, _ = _p_and_q(np.full_like(x, alpha + h), x)
    p0, _ = _p_and_q(np.full_like(x, alpha - h), x)
    fd = -(p1 - p0) / (2 * h) / _density(np.full_like(x, alpha), x)
    np.testing.assert_allclose(ours, fd, rtol=1e-5, atol=1e-9)


def test_reparameterized_gradients_match_the_expected_gradient():
    tracec.manual_seed(0)
    c = tracec.tensor([0.5, 2.0, 7.0], requires_grad=True)
    r = tracec.tensor([1.0, 2.0, 0.5], requires_grad=True)
    D.Gamma(c, r).rsample((N,)).mean(0).sum().backward()
    # d E[x] / dc = 1 / r and d E[x] / dr = -c / r^2.
    np.testing.assert_allclose(_np(c.grad), [1.0, 0.5, 2.0], rtol=0.05)
    np.testing.assert_allclose(_np(r.grad), [-0.5, -0.5, -28.0], rtol=0.05)
    a = tracec.tensor([2.0, 0.7], requires_grad=True)
    b = tracec.tensor([3.0, 0.4], requires_grad=True)
    D.Beta(a, b).rsample((N,)).mean(0).sum().backward()
    # d/da a/(a+b) = b/(a+b)^2.
    np.testing.assert_allclose(_np(a.grad), [3 / 25, 0.4 / 1.21], rtol=0.08)
    np.testing.assert_allclose(_np(b.grad), [-2 / 25, -0.7 / 1.21], rtol=0.08)
    conc = tracec.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = D.Dirichlet(conc).rsample((N,))
    assert abs(_np(s.sum(-1)) - 1).max() < 1e-5
    s[:, 0].mean().backward()
    np.testing.assert_allclose(_np(conc.grad), [5 / 36, -1 / 36, -1 / 36], atol=0.01)


def test_rsample_gradients_of_location_scale_families():
    for make in (lambda l, s: D.Normal(l, s), lambda l, s: D.Laplace(l, s),
                 lambda l, s: D.Cauchy(l, s),
                 lambda l, s: D.MultivariateNormal(l, scale_tril=tracec.diag_embed(s))):
        loc = tracec.tensor([0.5, -1.0], requires_grad=True)
        scale = tracec.tensor([1.0, 2.0], requires_grad=True)
        tracec.manual_seed(0)
        x = make(loc, scale).rsample((8,))
        x.sum().backward()
        np.testing.assert_allclose(_np(loc.grad), [8.0, 8.0])
        eps = (_np(x) - [0.5, -1.0]) / [1.0, 2.0]
        np.testing.assert_allclose(_np(scale.grad), eps.sum(0), rtol=1e-5)


def test_sampling_without_rsample_is_detached():
    p = tracec.tensor([0.3, 0.6], requires_grad=True)
    assert not D.Bernoulli(p).sample((3,)).requires_grad
    assert not D.Poisson(p).sample((3,)).requires_grad
    with pytest.raises(NotImplementedError):
        D.Poisson(p).rsample()


def test_distributions_inside_compile_equal_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))
    tracec.manual_seed(0)
    W = tracec.nn.Linear(4, 3)

    def step(x, a, L):
        mu = W(x)
        # Validation (on by default) is skipped while the trace records.
        n = D.Normal(mu, mu.exp())
        c = D.Categorical(logits=mu)
        m = D.MultivariateNormal(mu, scale_tril=L, validate_args=False)
        m2 = D.MultivariateNormal(mu, covariance_matrix=L @ L.T + tracec.diag_embed(mu.exp()),
                                  validate_args=False)
        i = D.Independent(D.Normal(mu, 1.0), 1)
        loss = -(n.log_prob(a).sum() + c.log_prob(a[:, 0].long().clamp(0, 2)).sum()
                 + m.log_prob(a).sum() + m2.log_prob(a).sum() + i.log_prob(a).sum())
        loss = loss + n.entropy().sum() + c.entropy().sum() + m2.entropy().sum()
        loss = loss + D.kl_divergence(m, m2).sum()
        loss.backward()
        return loss

    x, a = tracec.randn(5, 4), tracec.randn(5, 3)
    L = tracec.tensor(np.linalg.cholesky(np.eye(3) * 2 + 0.5).astype(np.float32))
    eager = step(x, a, L)
    grads = [_np(p.grad) for p in W.parameters()]
    for p in W.parameters():
        p.grad = None
    compiled = tracec.compile(step)(x, a, L)
    np.testing.assert_allclose(float(compiled), float(eager), rtol=1e-6)
    for p, g in zip(W.parameters(), grads):
        np.testing.assert_allclose(_np(p.grad), g, rtol=1e-5, atol=1e-6)


def test_op_by_op_cholesky_and_solve_match_torch(monkeypatch):
    """The tensor-op factorization used while compiling, forced in eager:
    values and gradients (symmetric, as torch's cholesky backward) agree."""
    from tracec.distributions import triangular
    monkeypatch.setattr(triangular, "_use_ops", lambda n: True)
    r = np.random.default_rng(2)
    a = r.standard_normal((2, 4, 4))
    cov = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    loc, v = r.standard_normal((2, 4)), r.standard_normal((3, 2, 4))
    res = []
    for lib, M in ((tracec, D), (torch, TD)):
        c = lib.tensor(cov, requires_grad=True)
        p = lib.tensor(np.linalg.inv(cov), requires_grad=True)
        m1 = M.MultivariateNormal(lib.tensor(loc), covariance_matrix=c)
        m2 = M.MultivariateNormal(lib.tensor(loc), precision_matrix=p)
        out = m1.log_prob(lib.tensor(v)) + m2.log_prob(lib.tensor(v)) + \
            M.kl_divergence(m1, m2)
        out.sum().backward()
        res.append((out, c.grad, p.grad))
    for x, y in zip(*res):
        np.testing.assert_allclose(_np(x), _np(y), rtol=1e-9, atol=1e-9)
