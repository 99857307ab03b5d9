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
from tracec.distributions.dirichlet import Dirichlet
from tracec.distributions.distribution import Distribution
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.exponential import Exponential
from tracec.distributions.gamma import Chi2, Gamma
from tracec.distributions.geometric import Geometric
from tracec.distributions.gumbel import Gumbel
from tracec.distributions.half_cauchy import HalfCauchy
from tracec.distributions.half_normal import HalfNormal
from tracec.distributions.independent import Independent
from tracec.distributions.kl import kl_divergence, register_kl
from tracec.distributions.laplace import Laplace
from tracec.distributions.log_normal import LogNormal
from tracec.distributions.mixture_same_family import MixtureSameFamily
from tracec.distributions.multinomial import Multinomial
from tracec.distributions.multivariate_normal import MultivariateNormal
from tracec.distributions.negative_binomial import NegativeBinomial
from tracec.distributions.normal import Normal
from tracec.distributions.one_hot_categorical import OneHotCategorical, \
    OneHotCategoricalStraightThrough
from tracec.distributions.poisson import Poisson
from tracec.distributions.relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from tracec.distributions.relaxed_categorical import ExpRelaxedCategorical, \
    RelaxedOneHotCategorical
from tracec.distributions.studentT import StudentT
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import *  # noqa: F401,F403
from tracec.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet",
           "Distribution", "Exponential", "ExponentialFamily", "Gamma", "Geometric", "Gumbel",
           "HalfCauchy", "HalfNormal", "Independent", "Laplace", "LogNormal",
           "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial",
           "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Poisson",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT",
           "TransformedDistribution", "Uniform", "biject_to", "constraints", "kl_divergence",
           "register_kl", "transform_to", "transforms"]
__all__ += transforms.__all__
