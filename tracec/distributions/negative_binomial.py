"""``NegativeBinomial(total_count, probs= | logits=)``: successes before
``total_count`` failures; drawn as a gamma-Poisson mixture."""
from __future__ import annotations

from tracec import functions as TF
from tracec import graph
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.gamma import Gamma
from tracec.distributions.poisson import host_poisson
from tracec.distributions.utils import broadcast_all, lazy_property, logits_to_probs, \
    probs_to_logits
from tracec.math_special import lgamma
from tracec.nn.functional import logsigmoid

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    """PyTorch's ``torch.distributions.NegativeBinomial``, parameterized by ``total_count``,
    ``probs``, ``logits``."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(NegativeBinomial, batch_shape,
                                  ("total_count", "probs", "logits"), _instance)
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / TF.sigmoid(-self.logits)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape

    def sample(self, sample_shape=()):
        with graph.no_grad():
            rate = Gamma(self.total_count, (-self.logits).exp(),
                         validate_args=False).sample(sample_shape)
            return host_poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_unnormalized = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = -lgamma(n + value) + lgamma(1.0 + value) + lgamma(n)
        # n + value = 0: the mass at zero successes of zero failures is one.
        log_normalization = TF.where(TF.eq(n + value, 0.0), 0.0, log_normalization)
        return log_unnormalized - log_normalization
