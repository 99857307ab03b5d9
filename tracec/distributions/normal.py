"""``Normal(loc, scale)`` and ``Uniform(low, high)``: reparameterizable
continuous distributions (``rsample`` is differentiable in the parameters)."""
from __future__ import annotations

import math
import numbers

from tracec import functions as TF
from tracec.creation import rand, randn
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution, _all, _show
from tracec.distributions.utils import broadcast_all

__all__ = ["Normal", "Uniform"]


class Normal(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch = () if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number) \
            else tuple(self.loc.shape)
        super().__init__(batch, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return (-((value - self.loc) ** 2) / (2 * var) - self.scale.log()
                - math.log(math.sqrt(2 * math.pi)))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + TF.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + TF.log(self.scale)


class Uniform(Distribution):
    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        batch = () if isinstance(low, numbers.Number) and isinstance(high, numbers.Number) \
            else tuple(self.low.shape)
        super().__init__(batch, validate_args=validate_args)
        if self._validate_args:
            # PyTorch checks low < high with the constraint LessThan(high).
            if not _all(TF.lt(self.low, self.high)):
                raise ValueError(
                    f"Expected parameter low ({type(self.low).__name__} of shape "
                    f"{tuple(self.low.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint LessThan(upper_bound={_show(self.high)}), but found "
                    f"invalid values:\n{_show(self.low)}")

    @property
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
        u = rand(shape, dtype=self.low.dtype)
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

    def entropy(self):
        return TF.log(self.high - self.low)

