"""Constraints: the sets a distribution's parameters and values must lie
in, with PyTorch's names and reprs (they appear in validation errors).

``check(value)`` returns a bool tensor over the batch dimensions: the
``event_dim`` rightmost dimensions are reduced (all must hold).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import linalg
from tracec.creation import full
from tracec.distributions.utils import finfo_eps
from tracec.math_extra import isclose
from tracec.shape_ops import cat as _cat
from tracec.shape_ops import stack as _stack
from tracec.tensor import Tensor

__all__ = ["Constraint", "boolean", "cat", "corr_cholesky", "dependent", "dependent_property",
           "greater_than", "greater_than_eq", "independent", "integer_interval", "interval",
           "half_open_interval", "is_dependent", "less_than", "lower_cholesky",
           "MixtureSameFamilyConstraint",
           "lower_triangular", "multinomial", "nonnegative", "nonnegative_integer", "one_hot",
           "positive", "positive_semidefinite", "positive_definite", "positive_integer", "real",
           "real_vector", "simplex", "square", "stack", "symmetric", "unit_interval"]


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder: the support depends on the distribution's parameters."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(is_discrete=self._is_discrete if is_discrete is NotImplemented
                          else is_discrete,
                          event_dim=self._event_dim if event_dim is NotImplemented
                          else event_dim)

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that stands for a dependent constraint."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete, self._event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


def dependent_property(fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
    if fn is None:
        return _DependentProperty(None, is_discrete=is_discrete, event_dim=event_dim)
    return _DependentProperty(fn, is_discrete=is_discrete, event_dim=event_dim)


class _IndependentConstraint(Constraint):
    """``base`` with ``reinterpreted_batch_ndims`` more dimensions treated as
    the event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.dim() < n:
            expected = self.base_constraint.event_dim + n
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        if n:
            result = result.reshape(tuple(result.shape[:result.dim() - n]) + (-1,)).all(-1)
        return result

    def __repr__(self):
        return (f"IndependentConstraint({self.base_constraint!r}, "
                f"{self.reinterpreted_batch_ndims})")


class MixtureSameFamilyConstraint(Constraint):
    """``MixtureSameFamily``'s support: the component's ``base_constraint``
    checked with the mixture dimension added back to the value."""

    def __init__(self, base_constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(
                f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        num_dim_to_keep = value.dim() - self.event_dim
        return result.reshape(tuple(result.shape[:num_dim_to_keep]) + (-1,)).all(-1)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_constraint!r})"


class _Real(Constraint):
    def check(self, value):
        return TF.eq(value, value)  # false only for NaN


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return TF.logical_or(TF.eq(value, 0), TF.eq(value, 1))


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        binary = TF.logical_or(TF.eq(value, 0), TF.eq(value, 1)).all(-1)
        return TF.logical_and(binary, TF.eq(TF.sum(value, -1), 1))


def _is_whole(value):
    if not value.dtype.is_floating_point:
        return TF.eq(value, value)
    return TF.eq(value % 1, 0)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        inside = TF.logical_and(TF.ge(value, self.lower_bound), TF.le(value, self.upper_bound))
        return TF.logical_and(_is_whole(value), inside)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerLessThan(Constraint):
    is_discrete = True

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return TF.logical_and(_is_whole(value), TF.le(value, self.upper_bound))

    def __repr__(self):
        return f"IntegerLessThan(upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return TF.logical_and(_is_whole(value), TF.ge(value, self.lower_bound))

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return TF.gt(value, self.lower_bound)

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return TF.ge(value, self.lower_bound)

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return TF.lt(value, self.upper_bound)

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return TF.logical_and(TF.ge(value, self.lower_bound), TF.le(value, self.upper_bound))

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return TF.logical_and(TF.ge(value, self.lower_bound), TF.lt(value, self.upper_bound))

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        nonneg = TF.ge(value, 0).all(-1)
        close = TF.lt(TF.abs(TF.sub(TF.sum(value, -1), 1)), 1e-6)
        return TF.logical_and(nonneg, close)


class _Multinomial(Constraint):
    """Nonnegative integer counts summing to at most ``upper_bound``."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return TF.logical_and(TF.ge(x, 0).all(-1), TF.le(x.sum(-1), self.upper_bound))


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        tril = TF.eq(value.tril(), value)
        return tril.reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        tril = TF.eq(value.tril(), value)
        tril = tril.reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)
        positive = TF.gt(value.diagonal(dim1=-2, dim2=-1), 0).all(-1)
        return TF.logical_and(tril, positive)


class _CorrCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        tol = finfo_eps(value.dtype) * value.shape[-1] * 10
        row_norm = value.pow(2).sum(-1).sqrt()
        unit = TF.le(TF.abs(row_norm - 1), tol).all(-1)
        return TF.logical_and(_LowerCholesky().check(value), unit)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return full(tuple(value.shape[:-2]), value.shape[-1] == value.shape[-2],
                    dtype=dt.bool_)


class _Symmetric(_Square):
    def check(self, value):
        square = _Square.check(self, value)
        if not bool(square.all()):
            return square
        close = isclose(value, value.transpose(-2, -1), atol=1e-6)
        return close.reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym = _Symmetric.check(self, value)
        if not bool(sym.all()):
            return sym
        return TF.ge(linalg.eigvalsh(value), 0).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym = _Symmetric.check(self, value)
        if not bool(sym.all()):
            return sym
        # PyTorch asks cholesky_ex; the smallest eigenvalue decides the same.
        return TF.gt(linalg.eigvalsh(value), 0).all(-1)


class _Cat(Constraint):
    """Each of ``cseq`` on its slice (of ``lengths``) of dimension ``dim``."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        checks, start = [], 0
        for constr, length in zip(self.cseq, self.lengths):
            checks.append(constr.check(value.narrow(self.dim, start, length)))
            start += length
        return _cat(checks, self.dim)


class _Stack(Constraint):
    """Each of ``cseq`` on its index of dimension ``dim``."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        vs = value.unbind(self.dim)
        return _stack([c.check(v) for v, c in zip(vs, self.cseq)], self.dim)


dependent = _Dependent()
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
