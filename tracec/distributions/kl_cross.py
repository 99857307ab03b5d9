"""KL divergences between different families (and the ones involving
ContinuousBernoulli, Pareto and LowRankMultivariateNormal), PyTorch's
closed forms; infinite where ``q``'s support misses part of ``p``'s.
Registered on import (``kl`` imports this module)."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.distributions.bernoulli import Bernoulli
from tracec.distributions.beta import Beta
from tracec.distributions.binomial import Binomial
from tracec.distributions.continuous_bernoulli import ContinuousBernoulli
from tracec.distributions.exponential import Exponential
from tracec.distributions.gamma import Gamma
from tracec.distributions.gumbel import Gumbel
from tracec.distributions.kl import _EULER_GAMMA, infinite_like, register_kl
from tracec.distributions.laplace import Laplace
from tracec.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal, \
    lowrank_logdet, lowrank_mahalanobis
from tracec.distributions.multivariate_normal import MultivariateNormal, batch_mahalanobis
from tracec.distributions.normal import Normal
from tracec.distributions.pareto import Pareto
from tracec.distributions.poisson import Poisson
from tracec.distributions.triangular import solve_lower
from tracec.distributions.uniform import Uniform
from tracec.distributions.utils import broadcast_shape
from tracec.math_extra import xlogy
from tracec.math_special import digamma, lgamma
from tracec.shape_extra import diag_embed

_INF = math.inf


def _x_log_x(t):
    return xlogy(t, t)


def _trace_xxt(m):
    return m.pow(2).reshape(tuple(m.shape[:-2]) + (-1,)).sum(-1)


def _inf_where(mask, result):
    return TF.where(mask, _INF, result)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p, q):
    return infinite_like(p.concentration1)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    c1, c0 = p.concentration1, p.concentration0
    return -p.entropy() - q.rate.log() + q.rate * (c1 / (c1 + c0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    c1, c0 = p.concentration1, p.concentration0
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (digamma(c1) - digamma(c1 + c0))
    t4 = q.rate * c1 / (c1 + c0)
    return -p.entropy() + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    c1, c0 = p.concentration1, p.concentration0
    E = c1 / (c1 + c0)
    var_normal = q.scale.pow(2)
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E * (1 - E) / (c1 + c0 + 1) + E.pow(2)) * 0.5
    return -p.entropy() + t2 + (t3 - q.loc * E + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where(TF.logical_or(TF.gt(q.low, 0.0), TF.lt(q.high, 1.0)), result)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p, q):
    return infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return -p.entropy() + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where(TF.logical_or(TF.ge(q.low, 0.0), TF.le(q.high, 1.0)), result)


@register_kl(Exponential, Beta)
@register_kl(Exponential, ContinuousBernoulli)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + ratio + lgamma(q.concentration)
            + q.concentration * _EULER_GAMMA - (1 + _EULER_GAMMA))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    srp = p.rate * q.scale
    lsr = q.loc / q.scale
    return srp.log() - 1 - lsr + lsr.exp() * srp / (srp + 1) + srp.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
    return t1 - 1 + (rate_sqr.reciprocal() - q.loc / p.rate + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Gamma, Beta)
@register_kl(Gamma, ContinuousBernoulli)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    c = p.concentration
    bsp = p.rate * q.scale
    lsr = q.loc / q.scale
    t1 = (c - 1) * digamma(c) - lgamma(c) - c
    t2 = bsp.log() + c / bsp
    t3 = lsr.exp() * (1 + bsp.reciprocal()).pow(-c) - lsr
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    c = p.concentration
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - c - lgamma(c)
    t2 = 0.5 * (c.pow(2) + c) / beta_sqr
    t3 = q.loc * c / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (c - 1) * digamma(c) + (t2 - t3 + t4) / var_normal


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    t1 = (ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER_GAMMA - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER_GAMMA + 1)


@register_kl(Laplace, Beta)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    return infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    ssvr = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * ssvr / math.pi).log()
    t2 = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -t1 + ssvr + t2 / var_normal - 1


@register_kl(Normal, Beta)
@register_kl(Normal, ContinuousBernoulli)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return infinite_like(p.loc)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    msr = p.loc / q.scale
    vssr = (p.scale / q.scale).pow(2)
    lsr = q.loc / q.scale
    return (-vssr.log() * 0.5 + msr - lsr + (-msr + 0.5 * vssr + lsr).exp()
            - 0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    ldsr = loc_diff / p.scale
    t1 = (p.scale / q.scale).log()
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * ldsr.pow(2)).exp()
    t3 = loc_diff * TF.erf(math.sqrt(0.5) * ldsr)
    return -t1 + (t2 + t3) / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))


@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    srp = p.scale * q.rate
    result = (p.alpha / srp).log() - p.alpha.reciprocal() + p.alpha * srp / (p.alpha - 1) - 1
    return _inf_where(TF.le(p.alpha, 1), result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(TF.le(p.alpha, 1), t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    result = t1 - p.alpha.reciprocal() + (t3 + t4) / var_normal - 1
    return _inf_where(TF.le(p.alpha, 2), result)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _inf_where(TF.lt(p.scale, q.scale), result)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    return infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    common = p.high - p.low
    t1 = common.log()
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common) / common
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common) / common
    t4 = lgamma(q.concentration1) + lgamma(q.concentration0) - \
        lgamma(q.concentration1 + q.concentration0)
    return _inf_where(TF.logical_or(TF.gt(p.high, 1.0), TF.lt(p.low, 0.0)), t3 + t4 - t1 - t2)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    return _inf_where(TF.logical_or(TF.ge(p.high, 1.0), TF.le(p.low, 0.0)), result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(TF.lt(p.low, 0.0), result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common = p.high - p.low
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common) / common
    t4 = q.rate * (p.high + p.low) / 2
    return _inf_where(TF.lt(p.low, 0.0), -common.log() + t2 + t3 + t4)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    hi = (p.high - q.loc) / q.scale
    lo = (p.low - q.loc) / q.scale
    return common.log() + 0.5 * (hi + lo) - common * ((-hi).exp() - (-lo).exp())


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common).log()
    t2 = common.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return _inf_where(TF.lt(p.low, q.scale), t2 * (q.alpha + 1) - t1)


def _check_events(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    _check_events(p, q)
    pW, pD, qW, qD = (p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag,
                      q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag)
    term1 = lowrank_logdet(qW, qD, q._capacitance_tril) - \
        lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    # inv(qcov) @ pcov = [inv(qD) - A^T A] @ (pD + pW pW^T)
    A = solve_lower(q._capacitance_tril, qW.transpose(-2, -1) / qD.unsqueeze(-2))
    term21 = (pD / qD).sum(-1)
    term22 = _trace_xxt(pW * qD.rsqrt().unsqueeze(-1))
    term23 = _trace_xxt(A * pD.sqrt().unsqueeze(-2))
    term24 = _trace_xxt(TF.matmul(A, pW))
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_multivariatenormal(p, q):
    _check_events(p, q)
    pW, pD, qL = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, \
        q._unbroadcasted_scale_tril
    term1 = 2 * qL.diagonal(dim1=-2, dim2=-1).log().sum(-1) - \
        lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = batch_mahalanobis(qL, q.loc - p.loc)
    batch = broadcast_shape(tuple(qL.shape[:-2]), tuple(pW.shape[:-2]))
    n = p.event_shape[0]
    qLb = qL.expand(batch + (n, n))
    term21 = _trace_xxt(solve_lower(qLb, pW.expand(batch + (n, pW.shape[-1]))))
    term22 = _trace_xxt(solve_lower(qLb, diag_embed(pD.sqrt()).expand(batch + (n, n))))
    return 0.5 * (term1 + term21 + term22 + term3 - n)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrank(p, q):
    _check_events(p, q)
    qW, qD, pL = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, \
        p._unbroadcasted_scale_tril
    term1 = lowrank_logdet(qW, qD, q._capacitance_tril) - \
        2 * pL.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    term3 = lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    A = solve_lower(q._capacitance_tril, qW.transpose(-2, -1) / qD.unsqueeze(-2))
    term21 = _trace_xxt(pL * qD.rsqrt().unsqueeze(-1))
    term22 = _trace_xxt(TF.matmul(A, pL))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])
