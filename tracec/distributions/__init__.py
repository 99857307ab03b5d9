"""``tracec.distributions``: probability distributions written with tracec
tensor ops, so ``log_prob`` (and ``rsample``) are differentiable (REINFORCE's
``-m.log_prob(action) * reward``, VAEs' reparameterization)."""
from tracec.distributions import constraints  # noqa: F401
from tracec.distributions.bernoulli import Bernoulli  # noqa: F401
from tracec.distributions.categorical import Categorical, OneHotCategorical  # noqa: F401
from tracec.distributions.distribution import Distribution  # noqa: F401
from tracec.distributions.kl import kl_divergence, register_kl  # noqa: F401
from tracec.distributions.normal import Normal, Uniform  # noqa: F401
from tracec.distributions.multivariate_normal import Independent, MultivariateNormal  # noqa: F401
from tracec.distributions import transforms  # noqa: F401
from tracec.distributions.transformed import (Exponential, Laplace, LogNormal,  # noqa: F401
                                              TransformedDistribution)

__all__ = ["Bernoulli", "Categorical", "Distribution", "Exponential", "Independent", "Laplace",
           "LogNormal", "MultivariateNormal", "Normal", "TransformedDistribution", "transforms",
           "OneHotCategorical", "Uniform", "constraints", "kl_divergence", "register_kl"]
