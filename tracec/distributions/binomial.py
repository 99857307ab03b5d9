"""``Binomial(total_count, probs= | logits=)``: successes in
``total_count`` trials; ``log_prob`` in the stable logits form PyTorch
uses; draws by ``tracec.random.binomial`` (eagerly PyTorch's sampler)."""
from __future__ import annotations

from tracec import graph
from tracec.creation import arange
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all, lazy_property, logits_to_probs, \
    probs_to_logits
from tracec.math_special import lgamma

__all__ = ["Binomial"]


def clamp_by_zero(x):
    # max(x, 0) with gradient 1/2 at 0, as PyTorch's _clamp_by_zero.
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """PyTorch's ``torch.distributions.Binomial``, parameterized by ``total_count``, ``probs``,
    ``logits``."""
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
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
        new = self._expand_params(Binomial, batch_shape, ("total_count", "probs", "logits"),
                                  _instance)
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

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
        shape = tuple(self._extended_shape(sample_shape))
        from tracec.random import binomial
        with graph.no_grad():     # torch.binomial's draws (eagerly PyTorch's numbers)
            n = self.total_count.expand(shape).to(self.probs.dtype)
            return binomial(n.detach(), self.probs.expand(shape).detach()).to(self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        normalize_term = (n * clamp_by_zero(self.logits)
                          + n * (-self.logits.abs()).exp().log1p() - lgamma(n + 1))
        return (value * self.logits - lgamma(value + 1) - lgamma(n - value + 1)
                - normalize_term)

    def _homogeneous_count(self, what):
        total = int(self.total_count.max())
        if not int(self.total_count.min()) == total:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total = self._homogeneous_count("enumerate_support")
        values = arange(1 + total, dtype=self._param.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((1 + total,) + tuple(self._batch_shape))
        return values
