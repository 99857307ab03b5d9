"""``Gamma(concentration, rate)``: ``rsample`` draws on the host and
differentiates implicitly in ``concentration`` (see ``gamma_sampling``) and
exactly in ``rate``."""
from __future__ import annotations

import numbers

from tracec.distributions import constraints
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.gamma_sampling import standard_gamma
from tracec.distributions.utils import broadcast_all, finfo_tiny
from tracec.math_igamma import igamma
from tracec.math_extra import xlogy
from tracec.math_special import digamma, lgamma

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    """PyTorch's ``torch.distributions.Gamma``, parameterized by ``concentration``, ``rate``."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch = () if isinstance(concentration, numbers.Number) and \
            isinstance(rate, numbers.Number) else tuple(self.concentration.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gamma, batch_shape, ("concentration", "rate"), _instance)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=finfo_tiny(value.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value)
                - self.rate * value - lgamma(self.concentration))

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + lgamma(c) + (1.0 - c) * digamma(c)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return lgamma(x + 1) + (x + 1) * (-y.reciprocal()).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return igamma(self.concentration, self.rate * value)

