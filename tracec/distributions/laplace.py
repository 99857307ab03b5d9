"""``Laplace(loc, scale)``: reparameterizable (inverse CDF)."""
from __future__ import annotations

import numbers

from tracec.creation import rand
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all, finfo_eps

__all__ = ["Laplace"]


class Laplace(Distribution):
    """PyTorch's ``torch.distributions.Laplace``, parameterized by ``loc``, ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch = () if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number) \
            else tuple(self.loc.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Laplace, batch_shape, ("loc", "scale"), _instance)

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
        shape = self._extended_shape(sample_shape)
        eps = finfo_eps(self.loc.dtype)
        # u uniform on [eps - 1, 1), as PyTorch draws it.
        u = rand(shape, dtype=self.loc.dtype).to(self.loc.device) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()
