"""``StudentT(df, loc=0, scale=1)``: ``rsample`` is ``X / sqrt(Z / df)``
with ``X`` normal and ``Z ~ Chi2(df)`` (reparameterized through the
gamma draw, so gradients reach ``df`` too)."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.creation import randn
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.chi2 import Chi2
from tracec.distributions.utils import broadcast_all
from tracec.math_special import digamma, lgamma

__all__ = ["StudentT"]


class StudentT(Distribution):
    """PyTorch's ``torch.distributions.StudentT``, parameterized by ``df``, ``loc``, ``scale``."""
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(StudentT, batch_shape, ("df", "loc", "scale"), _instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        m = self.loc.clone()
        return TF.where(TF.le(self.df, 1), math.nan, m)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        m = TF.where(TF.le(df, 2), math.inf, finite)
        return TF.where(TF.le(df, 1), math.nan, m)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        X = randn(shape, dtype=self.df.dtype).to(self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * (Z / self.df).rsqrt()
        return self.loc + self.scale * Y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + lgamma(0.5 * self.df) - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y ** 2.0 / self.df).log1p() - Z

    def entropy(self):
        lbeta = lgamma(0.5 * self.df) + math.lgamma(0.5) - lgamma(0.5 * (self.df + 1))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)

