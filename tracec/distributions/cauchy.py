"""``Cauchy(loc, scale)``: reparameterizable (inverse CDF); no mean or
variance (NaN and inf, as in PyTorch)."""
from __future__ import annotations

import math
import numbers

from tracec.creation import default_generator, empty, full, rand
from tracec.graph import no_grad
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    """PyTorch's ``torch.distributions.Cauchy``, parameterized by ``loc``, ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch = () if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number) \
            else tuple(self.loc.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Cauchy, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self):
        return full(self._extended_shape(), math.nan, dtype=self.loc.dtype)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return full(self._extended_shape(), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        if default_generator.eager_mt() is not None:
            # PyTorch's draw, eagerly its stream: new(shape).cauchy_()
            with no_grad():
                eps = empty(shape, dtype=self.loc.dtype, device=self.loc.device).cauchy_()
        else:
            u = rand(shape, dtype=self.loc.dtype).to(self.loc.device)
            eps = (math.pi * (u - 0.5)).tan()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
