"""``tracec.distributions``: probability distributions written with tracec
tensor ops, so ``log_prob`` (and ``rsample``) are differentiable (REINFORCE's
``-m.log_prob(action) * reward``, VAEs' reparameterization), with PyTorch's
classes, module names, shapes, validation and KL registry."""
from tracec.distributions import constraints, transforms  # noqa: F401
from tracec.distributions.bernoulli import Bernoulli
from tracec.distributions.categorical import Categorical, OneHotCategorical
from tracec.distributions.cauchy import Cauchy
from tracec.distributions.distribution import Distribution
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.exponential import Exponential
from tracec.distributions.gumbel import Gumbel
from tracec.distributions.half_cauchy import HalfCauchy
from tracec.distributions.half_normal import HalfNormal
from tracec.distributions.independent import Independent
from tracec.distributions.kl import kl_divergence, register_kl
from tracec.distributions.laplace import Laplace
from tracec.distributions.log_normal import LogNormal
from tracec.distributions.multivariate_normal import MultivariateNormal
from tracec.distributions.normal import Normal
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import *  # noqa: F401,F403
from tracec.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Cauchy", "Distribution", "Exponential",
           "ExponentialFamily", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "Laplace",
           "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical",
           "TransformedDistribution", "Uniform", "constraints", "kl_divergence", "register_kl"]
__all__ += transforms.__all__
