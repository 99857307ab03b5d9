"""Padding layers: ``ConstantPad``, ``ZeroPad``, ``ReflectionPad``,
``ReplicationPad`` and ``CircularPad`` in 1, 2 and 3 dimensions, each a
``F.pad`` with PyTorch's stored ``padding`` tuple (left, right, top,
bottom, front, back) and repr."""
from __future__ import annotations

from tracec.nn import functional as F
from tracec.nn.modules.module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]


def _pairs(padding, nsp: int) -> tuple:
    """An int repeated ``2 * nsp`` times, or the given values as they are
    (PyTorch's _ntuple keeps a sequence of any length: ``F.pad`` judges it
    in forward, so ZeroPad2d((1, 2)) pads the last dim only)."""
    if isinstance(padding, (list, tuple)):
        return tuple(padding)
    return (padding,) * (2 * nsp)


class _PadNd(Module):
    _nsp = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _pairs(padding, self._nsp)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _nsp = 1


class ConstantPad2d(_ConstantPadNd):
    _nsp = 2


class ConstantPad3d(_ConstantPadNd):
    _nsp = 3


class _ZeroPadNd(_ConstantPadNd):
    """``ZeroPad{1,2,3}d``: a ``ConstantPad{1,2,3}d`` with value 0 (each is one, as in torch)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd, ConstantPad1d):
    _nsp = 1


class ZeroPad2d(_ZeroPadNd, ConstantPad2d):
    _nsp = 2


class ZeroPad3d(_ZeroPadNd, ConstantPad3d):
    _nsp = 3


class _ReflectionPadNd(_PadNd):
    """The base PyTorch's ``ReflectionPad{1,2,3}d`` share (thop registers
    its counting rule on it)."""
    _mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    _nsp = 1


class ReflectionPad2d(_ReflectionPadNd):
    _nsp = 2


class ReflectionPad3d(_ReflectionPadNd):
    _nsp = 3


class _ReplicationPadNd(_PadNd):
    """The base PyTorch's ``ReplicationPad{1,2,3}d`` share."""
    _mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    _nsp = 1


class ReplicationPad2d(_ReplicationPadNd):
    _nsp = 2


class ReplicationPad3d(_ReplicationPadNd):
    _nsp = 3


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        n = self._nsp
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.ndim}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    _nsp = 1


class CircularPad2d(_CircularPadNd):
    _nsp = 2


class CircularPad3d(_CircularPadNd):
    _nsp = 3
