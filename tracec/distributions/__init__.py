"""``tracec.distributions``: probability distributions written with tracec
tensor ops, so ``log_prob`` (and ``rsample``) are differentiable (REINFORCE's
``-m.log_prob(action) * reward``, VAEs' reparameterization), with PyTorch's
classes, module names (``tracec.distributions.normal`` ...), shapes,
validation, transforms and KL registry."""
from tracec.distributions import constraints, transforms  # noqa: F401
from tracec.distributions.bernoulli import Bernoulli
from tracec.distributions.beta import Beta
from tracec.distributions.binomial import Binomial
from tracec.distributions.categorical import Categorical
from tracec.distributions.cauchy import Cauchy
from tracec.distributions.constraint_registry import biject_to, transform_to
from tracec.distributions.continuous_bernoulli import ContinuousBernoulli
from tracec.distributions.dirichlet import Dirichlet
from tracec.distributions.distribution import Distribution
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.exponential import Exponential
from tracec.distributions.fishersnedecor import FisherSnedecor
from tracec.distributions.chi2 import Chi2
from tracec.distributions.gamma import Gamma
from tracec.distributions.generalized_pareto import GeneralizedPareto
from tracec.distributions.geometric import Geometric
from tracec.distributions.gumbel import Gumbel
from tracec.distributions.half_cauchy import HalfCauchy
from tracec.distributions.half_normal import HalfNormal
from tracec.distributions.independent import Independent
from tracec.distributions.inverse_gamma import InverseGamma
from tracec.distributions.kl import kl_divergence, register_kl
from tracec.distributions.kumaraswamy import Kumaraswamy
from tracec.distributions.laplace import Laplace
from tracec.distributions.lkj_cholesky import LKJCholesky
from tracec.distributions.log_normal import LogNormal
from tracec.distributions.logistic_normal import LogisticNormal
from tracec.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from tracec.distributions.mixture_same_family import MixtureSameFamily
from tracec.distributions.multinomial import Multinomial
from tracec.distributions.multivariate_normal import MultivariateNormal
from tracec.distributions.negative_binomial import NegativeBinomial
from tracec.distributions.normal import Normal
from tracec.distributions.one_hot_categorical import OneHotCategorical, \
    OneHotCategoricalStraightThrough
from tracec.distributions.pareto import Pareto
from tracec.distributions.poisson import Poisson
from tracec.distributions.relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from tracec.distributions.relaxed_categorical import ExpRelaxedCategorical, \
    RelaxedOneHotCategorical
from tracec.distributions.studentT import StudentT
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import *  # noqa: F401,F403
from tracec.distributions.uniform import Uniform
from tracec.distributions.von_mises import VonMises
from tracec.distributions.weibull import Weibull
from tracec.distributions.wishart import Wishart

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ContinuousBernoulli", "Dirichlet", "Distribution", "ExpRelaxedCategorical",
           "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma", "GeneralizedPareto",
           "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "InverseGamma",
           "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal",
           "LogitRelaxedBernoulli", "LowRankMultivariateNormal", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "StudentT", "TransformedDistribution", "Uniform",
           "VonMises", "Weibull", "Wishart", "biject_to", "constraints", "kl_divergence",
           "register_kl", "transform_to", "transforms"]
__all__ += transforms.__all__
