"""``Distribution``: the base class (shapes, argument and value
validation with PyTorch's messages, ``sample`` as ``rsample`` without
gradients).

Validation is on by default, as in PyTorch; it reads tensor values, so a
distribution built inside ``tracec.compile`` needs ``validate_args=False``.
"""
from __future__ import annotations

from tracec import graph
from tracec.distributions import constraints
from tracec.distributions.utils import lazy_property
from tracec.tensor import Size, Tensor, concrete

__all__ = ["Distribution"]


def _all(valid: Tensor) -> bool:
    return bool(concrete(valid, "distribution argument validation").all())


def _show(t: Tensor):
    return t.item() if t.ndim == 0 else t


class Distribution:
    has_rsample = False
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
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if isinstance(constraint, constraints._Dependent):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param),
                                                             lazy_property):
                    continue  # the parameter that was not given
                value = getattr(self, param)
                if not _all(constraint.check(value)):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n"
                        f"{_show(value)}")

    @property
    def batch_shape(self) -> Size:
        return Size(self._batch_shape)

    @property
    def event_shape(self) -> Size:
        return Size(self._event_shape)

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

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
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> tuple:
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        start = len(shape) - len(self._event_shape)
        if shape[start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{shape} vs {self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{shape} vs {expected}.")
        support = self.support
        if support is None or isinstance(support, constraints._Dependent):
            return
        if not _all(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{shape}) to be within the support ({support!r}) of the "
                             f"distribution {self!r}, but found invalid values:\n{_show(value)}")

    def __repr__(self):
        params = [(k, self.__dict__[k]) for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {_show(v) if v.numel() == 1 else v.shape}" for k, v in params)
        return f"{type(self).__name__}({args})"
