"""``FisherSnedecor(df1, df2)``: the F distribution, a ratio of scaled
gamma draws (reparameterizable through them)."""
from __future__ import annotations

import math
import numbers

from tracec import functions as TF
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.gamma import Gamma
from tracec.distributions.utils import broadcast_all, finfo_tiny
from tracec.math_special import lgamma

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """PyTorch's ``torch.distributions.FisherSnedecor``, parameterized by ``df1``, ``df2``."""
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        batch = () if isinstance(df1, numbers.Number) and isinstance(df2, numbers.Number) \
            else tuple(self.df1.shape)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(FisherSnedecor, batch_shape, ("df1", "df2"), _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = TF.where(TF.le(self.df2, 2), math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return TF.where(TF.le(self.df1, 2), math.nan, mode)

    @property
    def variance(self):
        df2 = TF.where(TF.le(self.df2, 4), math.nan, self.df2)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        # X1 ~ Gamma(df1 / 2, df1), X2 ~ Gamma(df2 / 2, df2): X1 / X2 ~ F(df1, df2).
        tiny = finfo_tiny(self.df1.dtype)
        X1 = self._gamma1.rsample(sample_shape)
        X2 = self._gamma2.rsample(sample_shape).clamp(min=tiny)
        return (X1 / X2).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
