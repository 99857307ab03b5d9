"""``kl_divergence(p, q)`` and ``register_kl``: closed forms for pairs of
distributions, with PyTorch's formulas (including its infinities where
``q`` gives zero probability to something ``p`` does not)."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.distributions.bernoulli import Bernoulli
from tracec.distributions.categorical import Categorical, OneHotCategorical
from tracec.distributions.normal import Normal
from tracec.distributions.uniform import Uniform
from tracec.nn.functional import softplus

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as the KL divergence of the pair."""
    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def kl_divergence(p, q):
    for tp in type(p).__mro__:
        for tq in type(q).__mro__:
            fn = _KL_REGISTRY.get((tp, tq))
            if fn is not None:
                return fn(p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} "
                              f"and q type {type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = TF.where(TF.eq(q.probs, 0), math.inf, t)
    t = TF.where(TF.eq(p.probs, 0), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = TF.where(TF.eq(p.probs, 0), 0.0, TF.where(TF.eq(q.probs, 0), math.inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = TF.where(TF.eq(p.probs, 1), 0.0, TF.where(TF.eq(q.probs, 1), math.inf, t2))
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = TF.logical_or(TF.gt(q.low, p.low), TF.lt(q.high, p.high))
    return TF.where(outside, math.inf, result)
