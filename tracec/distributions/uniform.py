"""``Uniform(low, high)``: the half-open interval ``[low, high)``,
reparameterizable."""
from __future__ import annotations

import numbers

from tracec import functions as TF
from tracec.creation import rand
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """PyTorch's ``torch.distributions.Uniform``."""
    # PyTorch's: low must be below high (checked as LessThan(high)).
    has_rsample = True

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        batch = () if isinstance(low, numbers.Number) and isinstance(high, numbers.Number) \
            else tuple(self.low.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Uniform, batch_shape, ("low", "high"), _instance)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return TF.mul(self.high, float("nan"))

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.low.dtype).to(self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = TF.le(self.low, value).to(self.low.dtype)
        ub = TF.gt(self.high, value).to(self.low.dtype)
        return TF.log(lb * ub) - TF.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return TF.clamp(result, min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return TF.log(self.high - self.low)
