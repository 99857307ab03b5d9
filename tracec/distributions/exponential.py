"""``Exponential(rate)``: reparameterizable (inverse CDF of a uniform)."""
from __future__ import annotations

import numbers

from tracec.creation import default_generator, empty, rand
from tracec.graph import no_grad
from tracec.distributions import constraints
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.utils import broadcast_all, finfo_tiny

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """PyTorch's ``torch.distributions.Exponential``, parameterized by ``rate``."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch = () if isinstance(rate, numbers.Number) else tuple(self.rate.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Exponential, batch_shape, ("rate",), _instance)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return self.rate.new_zeros(tuple(self.rate.shape))

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        if default_generator.eager_mt() is not None:
            # PyTorch's draw, eagerly its stream: new(shape).exponential_() / rate
            with no_grad():
                e = empty(shape, dtype=self.rate.dtype, device=self.rate.device).exponential_()
            return e / self.rate
        u = rand(shape, dtype=self.rate.dtype).to(self.rate.device)
        # -log(u) with u in (0, 1]: a standard exponential draw.
        e = -(1 - u).clamp(min=finfo_tiny(self.rate.dtype)).log()
        return e / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -(-x).log()
