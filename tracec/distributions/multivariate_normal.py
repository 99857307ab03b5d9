"""``MultivariateNormal(loc, covariance_matrix= | precision_matrix= |
scale_tril=)``: the Gaussian over vectors, held as the Cholesky factor
``L`` of its covariance (PyTorch's ``_unbroadcasted_scale_tril``);
``rsample`` is ``loc + L @ eps`` and ``log_prob`` solves with ``L``, so
both are differentiable in every parameter. Factorizations and solves go
through ``triangular`` (tensor ops for event sizes up to 16, so
``log_prob``/``rsample`` also run under ``tracec.compile``)."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec import linalg
from tracec.creation import eye, randn
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.triangular import cholesky, solve_lower
from tracec.distributions.utils import broadcast_shape, lazy_property
from tracec.tensor import Size

__all__ = ["MultivariateNormal"]


def batch_mv(bmat, bvec):
    """``bmat @ bvec`` over broadcast batch dimensions."""
    return TF.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def batch_mahalanobis(bL, bx):
    """``x^T (L L^T)^-1 x`` for each ``x`` in ``bx``; ``bL``'s batch shape
    broadcasts against ``bx``'s."""
    n = bx.shape[-1]
    batch = broadcast_shape(tuple(bL.shape[:-2]), tuple(bx.shape[:-1]))
    L = bL.expand(batch + (n, n))
    x = bx.expand(batch + (n,)).unsqueeze(-1)
    return solve_lower(L, x).squeeze(-1).pow(2).sum(-1)


def precision_to_scale_tril(P):
    """The lower Cholesky factor of ``P^-1`` without inverting ``P``
    (the factor of ``P`` with rows and columns reversed)."""
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    Id = eye(P.shape[-1], dtype=P.dtype).to(P.device)
    return solve_lower(L_inv, Id)


class MultivariateNormal(Distribution):
    """PyTorch's ``torch.distributions.MultivariateNormal``, parameterized by ``loc``,
    ``covariance_matrix``, ``precision_matrix``, ``scale_tril``."""
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")

        def batch_of(m):
            return broadcast_shape(tuple(m.shape[:-2]), tuple(loc.shape[:-1]))
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, "
                                 "with optional leading batch dimensions")
            batch_shape = batch_of(scale_tril)
            self.scale_tril = scale_tril.expand(batch_shape + tuple(scale_tril.shape[-2:]))
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, "
                                 "with optional leading batch dimensions")
            batch_shape = batch_of(covariance_matrix)
            self.covariance_matrix = covariance_matrix.expand(
                batch_shape + tuple(covariance_matrix.shape[-2:]))
        else:
            if precision_matrix.dim() < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, "
                                 "with optional leading batch dimensions")
            batch_shape = batch_of(precision_matrix)
            self.precision_matrix = precision_matrix.expand(
                batch_shape + tuple(precision_matrix.shape[-2:]))
        self.loc = loc.expand(batch_shape + (loc.shape[-1],))
        super().__init__(batch_shape, tuple(self.loc.shape[-1:]), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        ev = tuple(self.event_shape)
        new.loc = self.loc.expand(batch_shape + ev)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(batch_shape + ev + ev)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return TF.matmul(L, L.transpose(-2, -1)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return linalg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(
            self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype).to(self.loc.device)
        return self.loc + batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))
