"""``Kumaraswamy(concentration1, concentration0)``: a Beta-like law on
``[0, 1]`` with a closed-form inverse CDF (reparameterizable)."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.creation import full_like
from tracec.distributions import constraints
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import AffineTransform, PowerTransform
from tracec.distributions.uniform import Uniform
from tracec.distributions.utils import broadcast_all
from tracec.math_special import digamma, lgamma

__all__ = ["Kumaraswamy"]

_EULER_GAMMA = 0.57721566490153286060


def _moments(a, b, n):
    """The ``n``th moment: ``b B(1 + n/a, b)``."""
    arg1 = 1 + n / a
    return b * (lgamma(arg1) + lgamma(b) - lgamma(arg1 + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """PyTorch's ``torch.distributions.Kumaraswamy``, parameterized by ``concentration1``,
    ``concentration0``."""
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(full_like(self.concentration0, 0), full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        c0, c1 = self.concentration0, self.concentration1
        log_mode = c0.reciprocal() * (-c0).log1p() - (-c0 * c1).log1p()
        bad = TF.logical_or(TF.lt(c0, 1), TF.lt(c1, 1))
        return TF.where(bad, math.nan, log_mode).exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        H0 = digamma(self.concentration0 + 1) + _EULER_GAMMA
        return t0 + t1 * H0 - self.concentration1.log() - self.concentration0.log()
