"""``TransformedDistribution(base, transforms)`` and the distributions
PyTorch builds on it (``LogNormal``), plus ``Exponential`` and ``Laplace``:
PyTorch's formulas for values, ``log_prob`` (change of variables through
each transform's log-det-Jacobian, summed over the event dims) and
``rsample`` (differentiable in the parameters)."""
from __future__ import annotations

import numbers

from tracec import functions as TF
from tracec import graph
from tracec.creation import rand
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.multivariate_normal import _sum_rightmost
from tracec.distributions.normal import Normal
from tracec.distributions.transforms import ExpTransform, Transform
from tracec.distributions.utils import broadcast_all, finfo_eps

__all__ = ["TransformedDistribution", "LogNormal", "Exponential", "Laplace"]


class TransformedDistribution(Distribution):
    arg_constraints: dict = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        if any(t.event_dim for t in self.transforms):
            raise NotImplementedError("TransformedDistribution: tracec supports elementwise "
                                      "transforms (event_dim 0)")
        self.base_dist = base_distribution
        super().__init__(base_distribution.batch_shape, base_distribution.event_shape,
                         validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def sample(self, sample_shape=()):
        with graph.no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            log_prob = log_prob - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim)
            y = x
        return log_prob + _sum_rightmost(self.base_dist.log_prob(y),
                                         event_dim - len(self.base_dist.event_shape))

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        value = self.base_dist.cdf(value)
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        return value if isinstance(sign, int) and sign == 1 else sign * (value - 0.5) + 0.5


class LogNormal(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


def _batch(*params):
    return () if all(isinstance(p, numbers.Number) for p in params) else None


class Exponential(Distribution):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch = _batch(rate)
        super().__init__(tuple(self.rate.shape) if batch is None else batch,
                         validate_args=validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return TF.mul(self.rate, 0.0)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        u = rand(self._extended_shape(sample_shape), dtype=self.rate.dtype)
        return -TF.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - TF.exp(-self.rate * value)

    def icdf(self, value):
        return -TF.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - TF.log(self.rate)


class Laplace(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch = _batch(loc, scale)
        super().__init__(tuple(self.loc.shape) if batch is None else batch,
                         validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=()):
        eps = finfo_eps(self.loc.dtype)
        u = rand(self._extended_shape(sample_shape), dtype=self.loc.dtype) * (2 - eps) \
            + (eps - 1)
        return self.loc - self.scale * u.sign() * TF.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -TF.log(2 * self.scale) - TF.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * TF.expm1(
            -(value - self.loc).abs() / self.scale)

    def entropy(self):
        return 1 + TF.log(2 * self.scale)


