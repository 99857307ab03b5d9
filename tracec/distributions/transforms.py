"""``torch.distributions.transforms``: invertible maps with the log of
their Jacobian's absolute determinant (elementwise ones: ``ExpTransform``,
``TanhTransform``, ``SigmoidTransform``, ``AffineTransform``), PyTorch's
formulas.  Invariant: with ``cache_size=1`` a transform remembers its last
``(x, y)``, so ``inv(y)`` of a value it produced returns that ``x``
exactly (SAC's ``log_prob(rsample())`` through a tanh never calls atanh).
"""
from __future__ import annotations

import math
import numbers

from tracec import functions as TF
from tracec.creation import full_like
from tracec.distributions import constraints
from tracec.distributions.utils import finfo_eps, finfo_tiny
from tracec.nn.functional import softplus

__all__ = ["Transform", "ExpTransform", "TanhTransform", "SigmoidTransform", "AffineTransform",
           "ComposeTransform"]


class Transform:
    bijective = True
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None

    @property
    def event_dim(self):
        return self.domain.event_dim

    @property
    def inv(self):
        return _InverseTransform(self)

    def _through_cache(self, value, compute, forward: bool):
        if self._cache_size == 0:
            return compute(value)
        pair = self._cached_x_y
        if value is pair[0 if forward else 1]:
            return pair[1 if forward else 0]
        out = compute(value)
        self._cached_x_y = (value, out) if forward else (out, value)
        return out

    def __call__(self, x):
        return self._through_cache(x, self._call, True)

    def _inv_call(self, y):
        return self._through_cache(y, self._inverse, False)

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform
        self.domain, self.codomain = transform.codomain, transform.domain

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x


class ExpTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(Transform):
    codomain = constraints.unit_interval

    def _call(self, x):
        return TF.clamp(x.sigmoid(), min=finfo_tiny(x.dtype), max=1.0 - finfo_eps(x.dtype))

    def _inverse(self, y):
        y = TF.clamp(y, min=finfo_tiny(y.dtype), max=1.0 - finfo_eps(y.dtype))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2), written stably (PyTorch's formula)
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AffineTransform(Transform):
    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Real):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self._event_dim:
            result = result.reshape(tuple(result.shape[:-self._event_dim]) + (-1,)).sum(-1)
            shape = shape[:-self._event_dim]
        return result.expand(shape)
