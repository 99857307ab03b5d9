"""``Wishart(df, covariance_matrix= | precision_matrix= | scale_tril=)``:
positive-definite matrices; ``rsample`` is the Bartlett decomposition
(chi-squared diagonal, normal lower triangle), reparameterized through the
chi-squared (gamma) draws, then redrawn as PyTorch 2.13 redraws (its
check flags the positive-definite samples: see ``rsample``), with its
warning."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from tracec import functions as TF
from tracec import linalg
from tracec.creation import arange, randn, tensor
from tracec.distributions import constraints
from tracec.distributions.distribution import Distribution, _all
from tracec.distributions.exp_family import ExponentialFamily
from tracec.distributions.chi2 import Chi2
from tracec.distributions.multivariate_normal import precision_to_scale_tril
from tracec.distributions.triangular import cholesky
from tracec.distributions.utils import broadcast_shape, finfo_eps, lazy_property
from tracec.math_special import digamma, mvlgamma
from tracec.shape_extra import diag_embed

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def mvdigamma(x, p: int):
    if not _all(TF.gt(x, (p - 1) / 2)):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    return digamma(x.unsqueeze(-1) - arange(p, dtype=x.dtype) / 2).sum(-1)


class Wishart(ExponentialFamily):
    """PyTorch's ``torch.distributions.Wishart``."""
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or "
                                 "scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril)
                     if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = tensor(df, dtype=param.dtype).to(param.device)
        else:
            batch_shape = broadcast_shape(tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        if _all(TF.le(self.df, event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = "
                             f"{event_shape[-1] - 1}.")
        full = batch_shape + event_shape
        if scale_tril is not None:
            self.scale_tril = param.expand(full)
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(full)
        else:
            self.precision_matrix = param.expand(full)
        if _all(TF.lt(self.df, event_shape[-1]).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to "
                          "occur for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(batch_shape)

    def _chi2(self, batch_shape):
        # Bartlett: diagonal i is sqrt(Chi2(df - i)).
        p = self._event_shape[-1]
        offsets = arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        return Chi2(self.df.unsqueeze(-1) - offsets.expand(tuple(batch_shape) + (p,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(cov_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(batch_shape)
        new._validate_args = self._validate_args
        return new

    def _full(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._full())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.transpose(-2, -1)).expand(self._full())

    @lazy_property
    def precision_matrix(self):
        return linalg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._full())

    def _df_matrix(self, df):
        return df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = TF.where(TF.le(factor, 0), math.nan, factor)
        return self._df_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        d = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix(self.df) * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        noise = diag_embed(chi.clamp(min=finfo_eps(chi.dtype)))
        rows, cols = np.tril_indices(p, k=-1)
        below = randn(tuple(sample_shape) + tuple(self._batch_shape) + (len(rows),),
                      dtype=noise.dtype).to(noise.device)
        # Scatter the normals below the diagonal: a one-hot matrix per entry.
        place = np.zeros((len(rows), p, p))
        place[np.arange(len(rows)), rows, cols] = 1.0
        noise = noise + (below.unsqueeze(-1).unsqueeze(-1)
                         * tensor(place, dtype=noise.dtype).to(noise.device)).sum(-3)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.transpose(-2, -1)

    def rsample(self, sample_shape=(), max_try_correction=None):
        if max_try_correction is None:
            max_try_correction = 10
        sample = self._bartlett_sampling(sample_shape)
        # PyTorch 2.13 flags the samples its positive-definite check passes
        # (``is_singular = self.support.check(sample)``, not negated): those
        # are drawn again, as many as flagged, and a redrawn one that fails
        # the check is drawn again.  Followed as written, so that the
        # draws, the warning and the samples are PyTorch's.
        flag = self._per_sample(self.support.check(sample.detach()))
        if _all(flag.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                fresh = self._bartlett_sampling(tuple(flag[flag].shape))
                sample[flag] = fresh
                flag[flag.clone()] = self._per_sample(
                    TF.logical_not(self.support.check(fresh.detach())))
                if not _all(flag.any()):
                    break
        return sample

    def _per_sample(self, flags):
        """``flags`` (sample and batch dimensions) reduced over the batch
        dimensions (any), as PyTorch's ``amax(self._batch_dims)``."""
        nb = len(self._batch_shape)
        return flags.amax(tuple(range(-nb, 0))) if nb else flags

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        log_det_L = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace_term = linalg.cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + log_det_L) - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet - trace_term / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        log_det_L = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + log_det_L) + mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + \
            mvlgamma(y + (p + 1) / 2, p)
