"""``Poisson(rate)``: counts drawn by ``tracec.random.poisson`` (eagerly
PyTorch's sampler and numbers), no ``rsample``."""
from __future__ import annotations

import numbers

from tracec import graph
from tracec.distributions import constraints
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.utils import broadcast_all
from tracec.math_extra import xlogy
from tracec.math_special import lgamma

__all__ = ["Poisson"]


def host_poisson(rate):
    """Poisson draws with ``rate``'s shape, dtype and device
    (``torch.poisson``'s: eagerly PyTorch's numbers)."""
    from tracec.random import poisson
    with graph.no_grad():
        return poisson(rate.detach()).to(rate.device)


class Poisson(ExponentialFamily):
    """PyTorch's ``torch.distributions.Poisson``, parameterized by ``rate``."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch = () if isinstance(rate, numbers.Number) else tuple(self.rate.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, ("rate",), _instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        return host_poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - lgamma(value + 1)

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
