"""``LowRankMultivariateNormal(loc, cov_factor, cov_diag)``: covariance
``W W^T + diag(D)``; ``log_prob`` and ``entropy`` go through the small
"capacitance" matrix ``I + W^T D^-1 W`` (Woodbury identity and matrix
determinant lemma), as in PyTorch."""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec.creation import eye, randn
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution
from tracec.distributions.multivariate_normal import batch_mahalanobis, batch_mv
from tracec.distributions.triangular import cholesky, solve_lower
from tracec.distributions.utils import broadcast_shape, lazy_property
from tracec.shape_extra import diag_embed

__all__ = ["LowRankMultivariateNormal"]


def capacitance_tril(W, D):
    """Cholesky factor of ``I + W^T D^-1 W``."""
    m = W.shape[-1]
    K = TF.matmul(W.transpose(-2, -1) / D.unsqueeze(-2), W)
    return cholesky(K + eye(m, dtype=W.dtype).to(W.device))


def lowrank_logdet(W, D, cap_tril):
    return 2 * cap_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def lowrank_mahalanobis(W, D, x, cap_tril):
    Wt_Dinv = W.transpose(-2, -1) / D.unsqueeze(-2)
    return (x.pow(2) / D).sum(-1) - batch_mahalanobis(cap_tril, batch_mv(Wt_Dinv, x))


class LowRankMultivariateNormal(Distribution):
    """PyTorch's ``torch.distributions.LowRankMultivariateNormal``, parameterized by ``loc``,
    ``cov_factor``, ``cov_diag``."""
    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape "
                             f"{event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape "
                             f"{loc.shape[-1:]}")
        try:
            shape = broadcast_shape(tuple(loc.shape) + (1,), tuple(cov_factor.shape),
                                    tuple(cov_diag.shape) + (1,))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                             f"{cov_factor.shape}, cov_diag {cov_diag.shape}") from e
        self.cov_factor = cov_factor.expand(shape)
        self.loc = loc.expand(shape[:-1])
        self.cov_diag = cov_diag.expand(shape[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = capacitance_tril(cov_factor, cov_diag)
        super().__init__(shape[:-2], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + (self.cov_factor.shape[-1],))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        # W W^T + D = D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2: the middle factor's
        # eigenvalues are at least 1, so its Cholesky is well conditioned.
        n = self._event_shape[0]
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / d_sqrt
        K = TF.matmul(Dinvsqrt_W, Dinvsqrt_W.transpose(-2, -1)) + eye(n, dtype=d_sqrt.dtype)
        return (d_sqrt * cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return (TF.matmul(W, W.transpose(-2, -1))
                + diag_embed(self._unbroadcasted_cov_diag)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        A = solve_lower(self._capacitance_tril, W.transpose(-2, -1) / D.unsqueeze(-2))
        return (diag_embed(D.reciprocal()) - TF.matmul(A.transpose(-2, -1), A)).expand(
            self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        eps_W = randn(shape[:-1] + (self.cov_factor.shape[-1],),
                      dtype=self.loc.dtype).to(self.loc.device)
        eps_D = randn(shape, dtype=self.loc.dtype).to(self.loc.device)
        return (self.loc + batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def _log_det(self):
        return lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                              self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                diff, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))
