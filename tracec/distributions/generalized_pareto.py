"""``GeneralizedPareto(loc, scale, concentration)``: reparameterizable by
its inverse CDF; ``concentration`` near 0 is the exponential limit."""
from __future__ import annotations

import math
import numbers

from tracec import functions as TF
from tracec.creation import ones_like, rand, zeros_like
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all
from tracec.math_extra import isclose

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """PyTorch's ``torch.distributions.GeneralizedPareto``, parameterized by ``loc``,
    ``scale``, ``concentration``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        batch = () if all(isinstance(v, numbers.Number) for v in (loc, scale, concentration)) \
            else tuple(self.loc.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(GeneralizedPareto, batch_shape,
                                   ("loc", "scale", "concentration"), _instance)

    def _safe(self):
        eq_zero = isclose(self.concentration, zeros_like(self.concentration))
        return eq_zero, TF.where(eq_zero, ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        return self.icdf(rand(shape, dtype=self.loc.dtype).to(self.loc.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe()
        y = 1 / safe_conc + ones_like(z)
        where_nonzero = TF.where(TF.eq(y, 0), y, y * (safe_conc * z).log1p())
        return -self.scale.log() - TF.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe()
        return TF.where(eq_zero, -z, -(safe_conc * z).log1p() / safe_conc)

    def log_cdf(self, value):
        return (-(self.log_survival_function(value).exp())).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        eq_zero, safe_conc = self._safe()
        logu = (-value).log1p()
        where_nonzero = self.loc + self.scale / safe_conc * (-safe_conc * logu).expm1()
        return TF.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self):
        valid = TF.lt(self.concentration, 1)
        safe_conc = TF.where(valid, self.concentration, 0.5)
        return TF.where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self):
        valid = TF.lt(self.concentration, 0.5)
        safe_conc = TF.where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return TF.where(valid, result, math.nan)

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).expand(tuple(self._batch_shape))

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = TF.where(TF.lt(self.concentration, 0), lower - self.scale / self.concentration,
                         math.inf)
        return constraints.interval(lower, upper)
