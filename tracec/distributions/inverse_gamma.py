"""``InverseGamma(concentration, rate)``: ``1 / Gamma(concentration,
rate)``, reparameterizable through the gamma draw."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.distributions import constraints
from tracec.distributions.gamma import Gamma
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import PowerTransform
from tracec.math_special import digamma, lgamma

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """PyTorch's ``torch.distributions.InverseGamma``, parameterized by ``concentration``,
    ``rate``."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        result = self.rate / (self.concentration - 1)
        return TF.where(TF.gt(self.concentration, 1), result, math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        c = self.concentration
        result = self.rate.pow(2) / ((c - 1).pow(2) * (c - 2))
        return TF.where(TF.gt(c, 2), result, math.inf)

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + lgamma(c) - (1 + c) * digamma(c)
