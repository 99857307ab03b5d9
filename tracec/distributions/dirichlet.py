"""``Dirichlet(concentration)``: on the simplex. ``rsample`` normalizes
independent ``Gamma(concentration_i, 1)`` draws; its gradient flows
through their implicit reparameterization (a valid pathwise gradient; it
is not PyTorch's ``_dirichlet_grad`` formula per sample, but has the same
expectation)."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import functions as TF
from tracec.distributions import constraints
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.gamma_sampling import standard_gamma
from tracec.distributions.utils import finfo_eps, finfo_tiny
from tracec.math_extra import xlogy
from tracec.math_special import digamma, lgamma
from tracec.nn.functional import one_hot

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """PyTorch's ``torch.distributions.Dirichlet``, parameterized by ``concentration``."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(tuple(concentration.shape[:-1]), tuple(concentration.shape[-1:]),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Dirichlet, batch_shape, ("concentration",), _instance)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        # PyTorch's _sample_dirichlet: gamma draws and their normalization
        # in float64, then the dtype, kept inside (0, 1)
        c = self.concentration.expand(shape)
        g = standard_gamma(c.to(dt.float64), dirichlet=True)
        x = (g / g.sum(-1, True)).to(c.dtype)
        return x.clamp(min=finfo_tiny(x.dtype), max=1 - finfo_eps(x.dtype) / 2)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        # All concentrations below one: the mass piles at the largest vertex.
        mask = TF.lt(self.concentration, 1).all(-1, keepdim=True)
        vertex = one_hot(mode.argmax(-1), cm1.shape[-1]).to(mode.dtype)
        return TF.where(mask, vertex, mode)

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        c0 = c.sum(-1)
        return (lgamma(c).sum(-1) - lgamma(c0) - (k - c0) * digamma(c0)
                - ((c - 1.0) * digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return lgamma(x).sum(-1) - lgamma(x.sum(-1))
