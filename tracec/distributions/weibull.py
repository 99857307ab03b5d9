"""``Weibull(scale, concentration)``: ``scale * E^(1/concentration)`` for a
standard exponential ``E``."""
from __future__ import annotations

from tracec.creation import ones_like
from tracec.distributions import constraints
from tracec.distributions.exponential import Exponential
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import AffineTransform, PowerTransform
from tracec.distributions.utils import broadcast_all
from tracec.math_special import lgamma

__all__ = ["Weibull"]

_EULER_GAMMA = 0.57721566490153286060


class Weibull(TransformedDistribution):
    """PyTorch's ``torch.distributions.Weibull``, parameterized by ``scale``, ``concentration``."""
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal),
                      AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        shape = tuple(batch_shape)
        new.scale = self.scale.expand(shape)
        new.concentration = self.concentration.expand(shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        transforms = [PowerTransform(exponent=new.concentration_reciprocal),
                      AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, self.base_dist.expand(shape), transforms,
                                         validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self):
        c = self.concentration
        return self.scale * ((c - 1) / c) ** c.reciprocal()

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale.pow(2) * (lgamma(1 + 2 * r).exp() - (2 * lgamma(1 + r)).exp())

    def entropy(self):
        r = self.concentration_reciprocal
        return _EULER_GAMMA * (1 - r) + (self.scale * r).log() + 1
