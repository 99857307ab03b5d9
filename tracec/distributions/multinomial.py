"""``Multinomial(total_count, probs= | logits=)``: counts of
``total_count`` categorical draws."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.creation import tensor
from tracec.distributions import constraints
from tracec.distributions.binomial import Binomial
from tracec.distributions.categorical import Categorical
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_all
from tracec.math_special import lgamma
from tracec.nn.functional import one_hot

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """PyTorch's ``torch.distributions.Multinomial``, parameterized by ``probs``, ``logits``."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = tuple(self._categorical.param_shape[-1:])
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        new.total_count = self.total_count
        batch_shape = tuple(batch_shape)
        param_shape = batch_shape + tuple(self._event_shape)
        if "probs" in self._categorical.__dict__:
            new._categorical = Categorical(probs=self._categorical.probs.expand(param_shape),
                                           validate_args=False)
        else:
            new._categorical = Categorical(logits=self._categorical.logits.expand(param_shape),
                                           validate_args=False)
        new._binomial = Binomial(total_count=self.total_count, probs=new.probs,
                                 validate_args=False)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=()):
        samples = self._categorical.sample((self.total_count,) + tuple(sample_shape))
        counts = one_hot(samples, self._event_shape[0]).sum(0)
        return counts.to(self.probs.dtype)

    def entropy(self):
        # An integer tensor, as PyTorch makes it: lgamma(n + 1) is in the
        # default float dtype.
        n = tensor(self.total_count)
        term1 = n * self._categorical.entropy() - lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = lgamma(support + 1)
        return term1 + (binomial_probs * weights).sum(0).sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        # A class of probability zero counted zero times adds nothing.
        logits = TF.where(TF.logical_and(TF.eq(value, 0), TF.eq(logits, -math.inf)), 0.0, logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
