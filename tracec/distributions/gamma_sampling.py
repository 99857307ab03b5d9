"""Standard gamma draws with implicit reparameterization gradients.

``standard_gamma(alpha)`` draws ``x ~ Gamma(alpha, 1)`` on the host
(PyTorch's Marsaglia-Tsang sampler on its stream, ``torch_rng.standard_gamma``,
so the numbers are PyTorch's; under ``torch_rng.counter_draws`` NumPy's,
seeded from tracec's generator: ``utils.host_generator``) and
differentiates it implicitly: with ``F`` the
CDF, ``F(x; alpha) = u`` fixed gives ``dx/dalpha = -(dF/dalpha) / f(x; alpha)``
(Figurnov et al. 2018; PyTorch's ``_standard_gamma_grad`` is the same
quantity, approximated). Here it is evaluated to float64 accuracy:

* ``x < alpha + 1``, or ``alpha > 10`` and ``x`` within six standard
  deviations above the mean: the power series of ``P(alpha, x)``
  differentiated term by term gives
  ``dx/dalpha = (x / alpha) (S_H - S (log x - psi(alpha + 1)))`` with
  ``S = sum t_n``, ``S_H = sum t_n H_n``, ``t_n = x^n / ((alpha+1)...(alpha+n))``
  and ``H_n = sum_{k<=n} 1/(alpha+k)``;
* otherwise (the upper tail, where that difference cancels):
  ``dQ/dalpha / f = int_0^inf e^-s (1 + s/x)^(alpha-1) (log(x + s) - psi(alpha)) ds``,
  a positive integrand, by Gauss-Laguerre quadrature after rescaling ``s``
  to the integrand's decay rate.

Eager only (draws and gradients read values).
"""
from __future__ import annotations

import numpy as np

from tracec import autograd, torch_rng
from tracec import dtypes as dt
from tracec.creation import default_generator, tensor
from tracec.distributions.utils import finfo_tiny, from_host, host_array, host_generator
from tracec.math_special import digamma
from tracec.tensor import Tensor

__all__ = ["standard_gamma", "standard_gamma_grad"]

_NODES, _WEIGHTS = np.polynomial.laguerre.laggauss(80)


def _psi(a: np.ndarray) -> np.ndarray:
    return np.asarray(digamma(tensor(np.asarray(a, np.float64), dtype=dt.float64)).numpy())


def _series(a, x):
    logx = np.log(x)
    t = np.ones_like(x)
    s = np.ones_like(x)
    h = np.zeros_like(x)
    sh = np.zeros_like(x)
    active = np.ones(x.shape, bool)
    n = 0
    while active.any() and n < 200000:
        n += 1
        t = np.where(active, t * x / (a + n), t)
        h = np.where(active, h + 1.0 / (a + n), h)
        s = np.where(active, s + t, s)
        sh = np.where(active, sh + t * h, sh)
        active &= ~((t < 1e-17 * s) & (t * h < 1e-17 * sh) & (a + n > x))
    return (x / a) * (sh - s * (logx - _psi(a + 1.0)))


def _quadrature(a, x):
    c = np.where(a > 1.0, 1.0 - (a - 1.0) / x, 1.0)
    s = _NODES[:, None] / c[None, :]                       # nodes x elements
    log_bracket = (a - 1.0) * np.log1p(s / x) - s + _NODES[:, None]
    f = np.exp(log_bracket) * (np.log(x + s) - _psi(a)[None, :])
    return (_WEIGHTS[:, None] * f).sum(0) / c


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``dx/dalpha`` at fixed CDF value for standard gamma draws ``x``."""
    a, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    out = np.zeros_like(x)
    tail = (x >= a + 1.0) & ((a <= 10.0) | (x >= a + 6.0 * np.sqrt(a)))
    if (~tail).any():
        out[~tail] = _series(a[~tail], x[~tail])
    if tail.any():
        out[tail] = _quadrature(a[tail], x[tail])
    return out.reshape(shape)


class _StandardGamma(autograd.Function):
    @staticmethod
    def forward(ctx, alpha, dirichlet):
        a = host_array(alpha)
        mt = default_generator.eager_mt()
        if mt is not None:
            # PyTorch's sampler on its stream: ``_standard_gamma`` (float
            # arithmetic for a float32 alpha) or ``_sample_dirichlet``'s
            # (double throughout)
            single = alpha.dtype is dt.float32 and not dirichlet
            x = torch_rng.standard_gamma(mt, a, single).reshape(a.shape)
        else:
            x = host_generator().standard_gamma(a)
        x = np.maximum(x, finfo_tiny(alpha.dtype))
        out = from_host(x, alpha)
        ctx.a, ctx.x = a, host_array(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        g = host_array(grad) * standard_gamma_grad(ctx.a, ctx.x)
        return from_host(g, grad), None


def standard_gamma(alpha: Tensor, dirichlet: bool = False) -> Tensor:
    """Draws ``Gamma(alpha, 1)`` of ``alpha``'s shape, differentiable in
    ``alpha``; eagerly PyTorch's numbers: ``torch._standard_gamma``'s, or
    with ``dirichlet`` the gamma draws ``torch._sample_dirichlet`` makes."""
    return _StandardGamma.apply(alpha, dirichlet)
