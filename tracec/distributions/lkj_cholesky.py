"""``LKJCholesky(dim, concentration=1)``: Cholesky factors of correlation
matrices with density proportional to ``det(C) ** (concentration - 1)``
(Lewandowski, Kurowicka & Joe 2009); sampling by the onion method through
``Beta`` draws, as in PyTorch."""
from __future__ import annotations

import math

from tracec.creation import arange, randn, zeros
from tracec.distributions import constraints
from tracec.distributions.beta import Beta
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all, finfo_tiny
from tracec.math_special import lgamma, mvlgamma
from tracec.shape_extra import diag_embed
from tracec.shape_ops import cat

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """PyTorch's ``torch.distributions.LKJCholesky``, parameterized by ``concentration``."""
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = cat([zeros(1, dtype=offset.dtype), offset])
        self._beta = Beta(offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(tuple(self.concentration.shape), (dim, dim), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        new.dim = self.dim
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u_normal = randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype).tril(-1)
        norm = u_normal.pow(2).sum(-1, keepdim=True).sqrt()
        # The first row is all zeros (0 / 0): it stays zero.
        u_hypersphere = (u_normal / norm.clamp(min=finfo_tiny(y.dtype))).detach()
        w = y.sqrt() * u_hypersphere
        diag = (1 - w.pow(2).sum(-1)).clamp(min=finfo_tiny(w.dtype)).sqrt()
        return w + diag_embed(diag)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = lgamma(alpha) * dm1
        numerator = mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized - (pi_constant + numerator - denominator)
