"""Convolution layers: ``Conv1d/2d/3d``, ``ConvTranspose1d/2d/3d`` (PyTorch's arguments, attributes, initialization and
repr); the computation is ``functional``'s im2col over primitives."""
from __future__ import annotations

import collections.abc
import math

from tracec.nn import functional as F
from tracec.nn import init
from tracec.nn._conv import _ntuple
from tracec.nn.modules.linear import _empty
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]


def _as_given(v, n: int) -> tuple:
    """``torch.nn.modules.utils._ntuple``: an iterable as a tuple, as given;
    a number repeated ``n`` times."""
    return tuple(v) if isinstance(v, collections.abc.Iterable) else (v,) * n


class _ConvNd(Module):
    _nsp = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        n = self._nsp
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_modes:
            raise ValueError(f"padding_mode must be one of {valid_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        # PyTorch's _single / _pair / _triple keep a list or tuple as given
        # (stride=[2] is (2,), which F.conv2d repeats), and the weight takes
        # the kernel's dimensions as given: Graph WaveNet's
        # Conv1d(kernel_size=(1, 2)) holds a 4-D weight; F.conv1d refuses it
        # in forward, not here.
        kernel_size = _as_given(kernel_size, n)
        stride = _as_given(stride, n)
        dilation = _as_given(dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _as_given(padding, n)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's (low, high) pairs, last dimension first.
        if isinstance(padding, str):
            nk = len(kernel_size)
            pairs = [0, 0] * nk
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(nk - 1, -1, -1)):
                    total = d * (k - 1)
                    pairs[2 * i] = total // 2
                    pairs[2 * i + 1] = total - total // 2
        else:
            pairs = tuple(p for p in reversed(padding) for _ in range(2))
        self._reversed_padding_repeated_twice = pairs
        if transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = Parameter(_empty(shape, device, dtype))
        if bias:
            self.bias = Parameter(_empty((out_channels,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv_nd(self, input, weight, bias, fn):
        # the body of Conv1d/2d/3d._conv_forward(input, weight, bias), which
        # subclasses override (whisper's Conv1d casts weight to input's dtype)
        if self.padding_mode != "zeros":
            return fn(F.pad(input, self._reversed_padding_repeated_twice,
                            mode=self.padding_mode), weight, bias, self.stride,
                      0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    _nsp = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        return self._conv_nd(input, weight, bias, F.conv1d)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv2d(_ConvNd):
    _nsp = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        return self._conv_nd(input, weight, bias, F.conv2d)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv3d(_ConvNd):
    _nsp = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        return self._conv_nd(input, weight, bias, F.conv3d)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTransposeNd(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding,
                 output_padding, groups, bias, dilation, padding_mode, device, dtype):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        if isinstance(padding, str):
            raise ValueError("padding must be an int or a tuple for transposed convolutions")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._nsp
        output_size = list(output_size)[-n:]
        out = []
        for i in range(n):
            size = input.shape[input.ndim - n + i]
            base = ((size - 1) * self.stride[i] - 2 * self.padding[i]
                    + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            extra = output_size[i] - base
            top = base + max(self.stride[i], self.dilation[i]) - 1
            if not base <= output_size[i] <= top:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {base} to {top}")
            out.append(extra)
        return tuple(out)

    def _forward(self, input, output_size, fn):
        op = self._output_padding(input, output_size)
        return fn(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                  self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    _nsp = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, groups, bias, dilation, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return self._forward(input, output_size, F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    _nsp = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, groups, bias, dilation, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return self._forward(input, output_size, F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    _nsp = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, groups, bias, dilation, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        return self._forward(input, output_size, F.conv_transpose3d)
