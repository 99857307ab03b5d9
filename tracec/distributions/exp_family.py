"""``ExponentialFamily``: distributions with density
``exp(<t(x), theta> - F(theta) + k(x))``; the entropy follows from the log
normalizer ``F`` and its gradient (the Bregman divergence, as in PyTorch)."""
from __future__ import annotations

from tracec import autograd
from tracec.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """The base of distributions in the exponential family (PyTorch's ``ExponentialFamily``:
    entropy by the Bregman divergence of the log normalizer)."""
    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with autograd.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
