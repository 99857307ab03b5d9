"""``ContinuousBernoulli(probs= | logits=, lims=(0.499, 0.501))``: the
normalized ``p^x (1-p)^(1-x)`` on ``[0, 1]`` (Loaiza-Ganem & Cunningham
2019); near ``p = 1/2`` the normalizer, mean and variance use PyTorch's
Taylor expansions. Reparameterizable by its inverse CDF."""
from __future__ import annotations

import math
import numbers

from tracec import functions as TF
from tracec import graph
from tracec.creation import ones_like, rand, zeros_like
from tracec.distributions import constraints
from tracec.distributions.distribution import _all, _recording
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.utils import broadcast_all, clamp_probs, lazy_property, \
    logits_to_probs, probs_to_logits
from tracec.nn.functional import binary_cross_entropy_with_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """PyTorch's ``torch.distributions.ContinuousBernoulli``, parameterized by ``probs``,
    ``logits``."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
            # Checked before the clamp below would hide invalid values.
            if validate_args is not None and not _recording() and \
                    not _all(self.arg_constraints["probs"].check(self.probs)):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(() if is_scalar else tuple(self._param.shape),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(ContinuousBernoulli, batch_shape, ("probs", "logits"),
                                  _instance)
        new._lims = self._lims
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    def _outside_unstable_region(self):
        return TF.logical_or(TF.le(self.probs, self._lims[0]), TF.gt(self.probs, self._lims[1]))

    def _cut_probs(self):
        return TF.where(self._outside_unstable_region(), self.probs,
                        self._lims[0] * ones_like(self.probs))

    def _cont_bern_log_norm(self):
        cut = self._cut_probs()
        below = TF.where(TF.le(cut, 0.5), cut, zeros_like(cut))
        above = TF.where(TF.ge(cut, 0.5), cut, ones_like(cut))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - TF.where(
            TF.le(cut, 0.5), (-2.0 * below).log1p(), (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return TF.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return TF.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        cut = self._cut_probs()
        vs = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + \
            1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return TF.where(self._outside_unstable_region(), vs, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.shape

    def sample(self, sample_shape=()):
        with graph.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        return self.icdf(rand(shape, dtype=self.probs.dtype).to(self.probs.device))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + \
            self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = TF.where(self._outside_unstable_region(), cdfs, value)
        return TF.where(TF.le(value, 0.0), zeros_like(value),
                        TF.where(TF.ge(value, 1.0), ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        inner = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / \
            (cut.log() - (-cut).log1p())
        return TF.where(self._outside_unstable_region(), inner, value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        out = TF.logical_or(TF.le(x, self._lims[0] - 0.5), TF.gt(x, self._lims[1] - 0.5))
        cut = TF.where(out, x, (self._lims[0] - 0.5) * ones_like(x))
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return TF.where(out, log_norm, taylor)
