"""``Bernoulli(probs=None, logits=None)``: 0/1 outcomes, parameterized as
in PyTorch; ``log_prob`` and ``entropy`` are binary cross-entropies with
logits (stable, and differentiable in the parameter)."""
from __future__ import annotations

import math
import numbers

from tracec import functions as TF
from tracec import graph
from tracec.creation import arange, rand
from tracec.distributions import constraints
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.utils import broadcast_all, lazy_property, logits_to_probs, \
    probs_to_logits
from tracec.nn.functional import binary_cross_entropy_with_logits
from tracec.shape_ops import broadcast_to

__all__ = ["Bernoulli"]


class Bernoulli(ExponentialFamily):
    """PyTorch's ``torch.distributions.Bernoulli``, parameterized by ``probs``, ``logits``."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(() if is_scalar else tuple(self._param.shape),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(Bernoulli, batch_shape, ("probs", "logits"), _instance)
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape      # a Size, as PyTorch's

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        return TF.where(TF.eq(p, 0.5), math.nan, TF.ge(p, 0.5).to(p.dtype))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with graph.no_grad():
            p = self.probs.detach()
            return TF.lt(rand(shape, dtype=p.dtype), p).to(p.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = arange(2, dtype=self._param.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = broadcast_to(values, (2,) + self._batch_shape)
        return values

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        return x.exp().log1p()
