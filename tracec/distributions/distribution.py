"""``Distribution``: the base class (shapes, ``expand``, argument and value
validation with PyTorch's messages, ``sample`` as ``rsample`` without
gradients).

Validation is on by default, as in PyTorch. It reads tensor values in
eager mode; while ``tracec.compile`` records a function, a parameter whose
constraint is a test of primitives (bounds, intervals, integers, simplex) is
replaced by a recorded ``check`` of it, so that every compiled call
validates its own parameters (raising a RuntimeError naming the line, where
eager raises PyTorch's ValueError); other constraints and ``log_prob``'s
value are not checked in compiled calls.
``batch_shape`` and ``event_shape`` are ``Size`` tuples.
"""
from __future__ import annotations

import warnings

from tracec import graph, ops
from tracec.distributions import constraints
from tracec.distributions.utils import lazy_property
from tracec.tensor import CONCRETE_CHECKS, Size, Tensor, concrete

__all__ = ["Distribution"]


def _recording() -> bool:
    # Only a trace being recorded registers a concrete-value check.
    return bool(CONCRETE_CHECKS)


def _all(valid: Tensor) -> bool:
    return bool(concrete(valid, "distribution argument validation").all())


#: Constraints whose ``check`` is primitives only (no Python read of values).
_TRACEABLE = (constraints._Real, constraints._Boolean, constraints._IntegerInterval,
              constraints._IntegerLessThan, constraints._IntegerGreaterThan,
              constraints._GreaterThan, constraints._GreaterThanEq, constraints._LessThan,
              constraints._Interval, constraints._Simplex)


def _recorded_check(dist, param: str, value, constraint) -> None:
    """While tracing: ``dist.<param>`` becomes ``value`` checked to satisfy
    ``constraint`` (where its check is primitives only), so that what is
    computed from it depends on the check."""
    base = constraint
    while isinstance(base, constraints._IndependentConstraint):
        base = base.base_constraint
    if not isinstance(base, _TRACEABLE) or not isinstance(value, Tensor) \
            or param not in dist.__dict__:
        return
    ok = constraint.check(value)
    ok = ok.reshape(tuple(ok.shape) + (1,) * (value.ndim - ok.ndim))   # event dims
    dist.__dict__[param] = ops.check(value, ok, (
        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
        f"of distribution {type(dist).__name__} to satisfy the constraint {constraint!r}, "
        "but found invalid values"))


def _show(t: Tensor):
    return t.item() if t.ndim == 0 else t


class Distribution:
    """The base of every distribution, with PyTorch's ``torch.distributions.Distribution``
    interface."""
    has_rsample = False
    #: A compiled function may return one: rebuilt at each call from its
    #: ``__dict__`` (tensors, numbers, sizes, inner distributions;
    #: tracing._returnable_plain), as an MDN's forward returns its mixture.
    _tracec_returned_by_attributes = True
    has_enumerate_support = False
    _validate_args = __debug__
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            recording = _recording()
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                             lazy_property):
                    continue  # the parameter that was not given
                value = getattr(self, param)
                if recording:
                    _recorded_check(self, param, value, constraint)
                elif not _all(constraint.check(value)):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A view of this distribution with a larger batch shape (parameters
        are broadcast, not copied)."""
        raise NotImplementedError

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expand_params(self, cls, batch_shape, names, _instance=None):
        """``expand`` for a distribution whose parameters all have the batch
        shape: each of ``names`` present on ``self`` is broadcast."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(tuple(batch_shape))
        for name in names:
            if name in self.__dict__:
                value = self.__dict__[name]
                shape = tuple(batch_shape) + tuple(value.shape[len(self._batch_shape):])
                new.__dict__[name] = value.expand(shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        with graph.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError

    def sample_n(self, n: int):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning,
                      stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> Size:
        if not isinstance(sample_shape, (tuple, list)):
            sample_shape = tuple(sample_shape)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        event = tuple(self._event_shape)
        start = len(shape) - len(event)
        if shape[start:] != event:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{value.shape} vs {self._event_shape}.")
        expected = tuple(self._batch_shape) + event
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{value.shape} vs {Size(expected)}.")
        support = self.support
        if support is None or constraints.is_dependent(support) or _recording():
            return
        if not _all(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support ({support!r}) of "
                             f"the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        params = [(k, self.__dict__[k]) for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {_show(v) if v.numel() == 1 else v.shape}" for k, v in params)
        return f"{type(self).__name__}({args})"
