"""``Geometric(probs= | logits=)``: failures before the first success
(support ``{0, 1, ...}``); inverse-CDF sampling with tracec's generator."""
from __future__ import annotations

import numbers

from tracec import functions as TF
from tracec import graph
from tracec.creation import rand
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution, _all, _recording
from tracec.distributions.utils import broadcast_all, finfo_tiny, lazy_property, \
    logits_to_probs, probs_to_logits
from tracec.nn.functional import binary_cross_entropy_with_logits

__all__ = ["Geometric"]


class Geometric(Distribution):
    """PyTorch's ``torch.distributions.Geometric``, parameterized by ``probs``, ``logits``."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        given = probs if probs is not None else logits
        batch = () if isinstance(given, numbers.Number) else tuple(given.shape)
        super().__init__(batch, validate_args=validate_args)
        if self._validate_args and probs is not None and not _recording():
            value = self.probs
            valid = TF.gt(value, 0)
            if not _all(valid):
                raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape "
                                 f"{tuple(value.shape)}) of distribution {self!r} to be "
                                 f"positive but found invalid values:\n"
                                 f"{value.detach()[TF.logical_not(valid)]}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Geometric, batch_shape, ("probs", "logits"), _instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return self.probs * 0

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with graph.no_grad():
            p = self.probs
            u = rand(shape, dtype=p.dtype).to(p.device).clamp(min=finfo_tiny(p.dtype))
            return (u.log() / (-p).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 and k = 0: log(1 - p) * 0 would be nan; the mass is one.
        probs = TF.where(TF.logical_and(TF.eq(probs, 1), TF.eq(value, 0)), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs,
                                                reduction="none") / self.probs
