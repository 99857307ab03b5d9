"""``VonMises(loc, concentration)``: the circular normal on ``[-pi, pi)``.
``log I0`` / ``log I1`` use the Abramowitz & Stegun 9.8.1-9.8.4 polynomial
approximations (as PyTorch does, so values agree); sampling is Best &
Fisher's rejection method in float64 with tracec's generator (eager)."""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph
from tracec.creation import rand, zeros
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution, _all
from tracec.distributions.utils import broadcast_all, lazy_property

__all__ = ["VonMises"]

_I0_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_LARGE = [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2,
             -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2]
_I1_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3]
_I1_LARGE = [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1,
             0.2282967e-1, -0.2895312e-1, 0.1787654e-1, -0.420059e-2]


def _poly(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def log_modified_bessel(x, order=0):
    """``log I_order(x)`` for ``x > 0``, ``order`` 0 or 1."""
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    y = (x / 3.75).pow(2)
    small = _poly(y, (_I0_SMALL, _I1_SMALL)[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    large = x - 0.5 * x.log() + _poly(3.75 / x, (_I0_LARGE, _I1_LARGE)[order]).log()
    return TF.where(TF.lt(x, 3.75), small, large)


class VonMises(Distribution):
    """PyTorch's ``torch.distributions.VonMises``, parameterized by ``loc``, ``concentration``."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(VonMises, batch_shape, ("loc", "concentration"), _instance)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - log_modified_bessel(self.concentration, order=0))

    @lazy_property
    def _proposal_r(self):
        kappa = self.concentration.to(dt.float64)
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        r = (1 + rho ** 2) / (2 * rho)
        return TF.where(TF.lt(kappa, 1e-5), 1 / kappa + kappa, r)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with graph.no_grad():
            loc = self.loc.detach().to(dt.float64)
            kappa = self.concentration.detach().to(dt.float64)
            r = self._proposal_r.detach()
            # PyTorch's rejection loop draw for draw (torch.empty: no draw
            # for x; an element accepted again takes the later sample)
            x = zeros(shape, dtype=dt.float64)
            done = TF.ne(x, x)                         # all False
            while not _all(done):
                u = rand((3,) + shape, dtype=dt.float64)
                z = (math.pi * u[0]).cos()
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = TF.logical_or(TF.gt(c * (2 - c) - u[1], 0),
                                       TF.ge((c / u[1]).log() + 1 - c, 0))
                x = TF.where(accept, (u[2] - 0.5).sign() * f.acos(), x)
                done = TF.logical_or(done, accept)
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return 1 - (log_modified_bessel(self.concentration, order=1)
                    - log_modified_bessel(self.concentration, order=0)).exp()
