"""``Categorical``: the discrete distribution over
``K`` classes, parameterized by ``probs`` (normalized along the last
dimension) or ``logits`` (normalized by ``logsumexp``), as in PyTorch.

Sampling is written with tensor ops (inverse CDF: the CDF is the
cumulative sum of ``probs``, O(K) memory per row), so it also runs under
``tracec.compile``.
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph
from tracec.creation import arange, default_generator, full, rand
from tracec.sorting import multinomial
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_shape, lazy_property, logits_to_probs, \
    probs_to_logits
from tracec.shape_ops import broadcast_to

__all__ = ["Categorical"]


class Categorical(Distribution):
    """PyTorch's ``torch.distributions.Categorical``, parameterized by ``probs``, ``logits``."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch = tuple(self._param.shape[:-1])
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        param_shape = batch_shape + (self._num_events,)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(param_shape)
                new._param = new.__dict__[name]
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape      # a Size, as PyTorch's

    @property
    def mean(self):
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        k = self._num_events
        with graph.no_grad():
            p = self.probs.detach()
            if default_generator.eager_mt() is not None:
                # PyTorch's draw (its stream, eagerly): multinomial with
                # replacement over the flattened batch, transposed
                n = math.prod(tuple(sample_shape)) if len(tuple(sample_shape)) else 1
                s2 = multinomial(p.reshape(-1, k), n, True).T
                return s2.reshape(shape)
            work = dt.float64 if p.dtype is dt.float64 else dt.float32
            p = p.to(work)
            cdf = p.cumsum(-1)                              # batch + (k,)
            u = rand(shape + (1,), dtype=work) * cdf[..., k - 1:]
            # The class is the number of CDF steps at or below u.
            idx = TF.le(cdf, u).long().sum(-1)
            return TF.clamp(idx, max=k - 1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = broadcast_shape(value.shape[:-1], self.logits.shape[:-1])
        value = broadcast_to(value, shape + (1,))
        log_pmf = broadcast_to(self.logits, shape + (self._num_events,))
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = float(np.finfo(np.float32 if self.logits.dtype is dt.bfloat16
                                  else self.logits.dtype.np).min)
        logits = TF.clamp(self.logits, min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        n = len(self._batch_shape)
        values = arange(self._num_events).reshape((-1,) + (1,) * n)
        if expand:
            values = broadcast_to(values, (self._num_events,) + self._batch_shape)
        return values
