"""``Gumbel(loc, scale)``: a uniform pushed through ``-log(-log u)``
then scaled, as PyTorch builds it."""
from __future__ import annotations

import math

from tracec.distributions import constraints
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import AffineTransform, ExpTransform
from tracec.distributions.uniform import Uniform
from tracec.distributions.utils import broadcast_all, finfo_eps, finfo_tiny

__all__ = ["Gumbel"]

_EULER_GAMMA = 0.57721566490153286060


class Gumbel(TransformedDistribution):
    """PyTorch's ``torch.distributions.Gumbel``, parameterized by ``loc``, ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        d = self.loc.dtype
        base_dist = Uniform(self.loc.new_full(tuple(self.loc.shape), finfo_tiny(d)),
                            self.loc.new_full(tuple(self.loc.shape), 1 - finfo_eps(d)),
                            validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-1),
                      ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(tuple(batch_shape))
        new.scale = self.scale.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
