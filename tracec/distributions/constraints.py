"""Constraints: the sets a distribution's parameters and values must lie
in, with PyTorch's names and reprs (they appear in validation errors).

``check(value)`` returns a bool tensor, elementwise (over the event
dimensions too for ``simplex``, which reduces the last one).
"""
from __future__ import annotations

from tracec import functions as TF
from tracec.tensor import Tensor

__all__ = ["Constraint", "boolean", "greater_than", "half_open_interval", "integer_interval",
           "interval", "less_than", "nonnegative_integer", "positive", "real", "real_vector",
           "simplex", "unit_interval", "dependent", "dependent_property", "one_hot",
           "positive_definite", "lower_cholesky", "independent", "greater_than_eq",
           "nonnegative"]


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """A placeholder: the support depends on the distribution's parameters."""

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


class _DependentProperty(property, _Dependent):
    """A property that stands for a dependent constraint."""


def dependent_property(fn):
    return _DependentProperty(fn)


class _Real(Constraint):
    def check(self, value):
        return TF.eq(value, value)  # false only for NaN


class _RealVector(_Real):
    event_dim = 1

    def check(self, value):
        return TF.eq(TF.sum(TF.ne(value, value), -1), 0)

    def __repr__(self):
        return "IndependentConstraint(Real(), 1)"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return TF.logical_or(TF.eq(value, 0), TF.eq(value, 1))


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return TF.gt(value, self.lower_bound)

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


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


def _is_whole(value):
    if not value.dtype.is_floating_point:
        return TF.eq(value, value)
    # Truncation towards zero keeps exactly the whole numbers unchanged.
    return TF.eq(value, value.long().to(value.dtype))


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        inside = TF.logical_and(TF.ge(value, self.lower_bound), TF.le(value, self.upper_bound))
        return TF.logical_and(_is_whole(value), inside)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _NonnegativeInteger(Constraint):
    is_discrete = True
    lower_bound = 0

    def check(self, value):
        return TF.logical_and(_is_whole(value), TF.ge(value, 0))

    def __repr__(self):
        return "IntegerGreaterThan(lower_bound=0)"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        nonneg = TF.eq(TF.sum(TF.lt(value, 0), -1), 0)
        close = TF.lt(TF.abs(TF.sub(TF.sum(value, -1), 1)), 1e-6)
        return TF.logical_and(nonneg, close)


dependent = _Dependent()
real = _Real()
real_vector = _RealVector()
boolean = _Boolean()
positive = _GreaterThan(0.0)
greater_than = _GreaterThan
less_than = _LessThan
interval = _Interval
half_open_interval = _HalfOpenInterval
unit_interval = _Interval(0.0, 1.0)
integer_interval = _IntegerInterval
nonnegative_integer = _NonnegativeInteger()
simplex = _Simplex()


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        not_binary = TF.logical_not(TF.logical_or(TF.eq(value, 0), TF.eq(value, 1)))
        return TF.logical_and(TF.eq(TF.sum(not_binary, -1), 0), TF.eq(TF.sum(value, -1), 1))


one_hot = _OneHot()


class _PositiveDefinite(Constraint):
    """Symmetric (to 1e-6) with a Cholesky factor, per matrix (PyTorch's test)."""
    event_dim = 2

    def check(self, value):
        from tracec.linalg import cholesky_ex
        if value.shape[-2] != value.shape[-1]:
            return TF.full(tuple(value.shape[:-2]), False)
        from tracec.math_extra import isclose
        sym = isclose(value, value.mT, atol=1e-6).all(-2).all(-1)
        if not bool(sym.all()):
            return sym
        return TF.eq(cholesky_ex(value).info, 0)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = TF.eq(value.tril(), value).reshape(tuple(value.shape[:-2]) + (-1,)).all(-1)
        positive_diagonal = TF.gt(value.diagonal(dim1=-2, dim2=-1), 0).all(-1)
        return TF.logical_and(lower, positive_diagonal)


class _IndependentConstraint(Constraint):
    """``base_constraint`` over the rightmost ``reinterpreted_batch_ndims`` dims too."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.ndim < n:
            expected = self.base_constraint.event_dim + n
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.ndim}")
        return result.reshape(tuple(result.shape[:result.ndim - n]) + (-1,)).all(-1)

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


positive_definite = _PositiveDefinite()
lower_cholesky = _LowerCholesky()
independent = _IndependentConstraint


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return TF.ge(value, self.lower_bound)

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


greater_than_eq = _GreaterThanEq
nonnegative = _GreaterThanEq(0.0)
