"""``MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril)``
and ``Independent(base, n)``, with PyTorch's formulas: everything goes
through the lower Cholesky factor ``L`` of the covariance (``log_prob`` is
``-(k log 2pi + |L^-1 (x - loc)|^2) / 2 - sum log diag L``), so values and
gradients match torch's.  ``L`` stays unbroadcast; batch shapes broadcast
``loc`` against the matrix's leading dims."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec import shape_ops as S
from tracec.creation import eye, randn
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.utils import broadcast_shape, lazy_property


__all__ = ["MultivariateNormal", "Independent"]


def _batch_mv(bmat, bvec):
    return TF.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(L, x):
    """``|L^-1 x|^2`` over the last dim, ``L`` broadcast against ``x``'s batch."""
    from tracec.linalg import solve_triangular
    batch = broadcast_shape(tuple(L.shape[:-2]), tuple(x.shape[:-1]))
    n = x.shape[-1]
    Lb = L.expand(batch + (n, n))
    xb = x.expand(batch + (n,)).unsqueeze(-1)
    return solve_triangular(Lb, xb, upper=False).pow(2).sum((-2, -1))


def _precision_to_scale_tril(P):
    from tracec.linalg import cholesky, solve_triangular
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = S.transpose(Lf.flip((-2, -1)), -2, -1)
    Id = eye(P.shape[-1], dtype=P.dtype)
    return solve_triangular(L_inv, Id, upper=False)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        from tracec.linalg import cholesky
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) \
                + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        given, name = next((m, n) for m, n in ((scale_tril, "scale_tril"),
                                               (covariance_matrix, "covariance_matrix"),
                                               (precision_matrix, "precision_matrix"))
                           if m is not None)
        if given.ndim < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{what} must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        batch_shape = broadcast_shape(tuple(given.shape[:-2]), tuple(loc.shape[:-1]))
        setattr(self, name, given.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, tuple(self.loc.shape[-1:]), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def _full(self, m):
        return m.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._full(self._unbroadcasted_scale_tril)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return self._full(TF.matmul(L, L.mT))

    @lazy_property
    def precision_matrix(self):
        from tracec.linalg import cholesky_inverse
        return self._full(cholesky_inverse(self._unbroadcasted_scale_tril))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        eps = randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)


def _sum_rightmost(value, dim):
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


class Independent(Distribution):
    """``base_distribution`` with its rightmost ``reinterpreted_batch_ndims``
    batch dims read as event dims (``log_prob`` sums over them)."""
    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        nb = len(base_distribution.batch_shape)
        if reinterpreted_batch_ndims > nb:
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {reinterpreted_batch_ndims} vs {nb}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        s = self.base_dist.support
        n = self.reinterpreted_batch_ndims
        return constraints.independent(s, n) if n else s

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


