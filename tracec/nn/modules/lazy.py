"""Lazy layers (``LazyLinear``, ``LazyConv1d/2d/3d``,
``LazyConvTranspose1d/2d/3d``, ``LazyBatchNorm1d/2d/3d``,
``LazyInstanceNorm1d/2d/3d``): their input size is read from the first
input.

Invariant (PyTorch's ``LazyModuleMixin``): until the first call the shaped
parameters are ``UninitializedParameter`` s; a forward pre-hook then
materializes them in place (the same objects, so an optimizer built before
still holds them), runs ``reset_parameters``, removes itself and turns the
module into its ``cls_to_become`` (``LazyLinear`` -> ``Linear``).  Loading
a state dict into a lazy module materializes to the stored shapes.
"""
from __future__ import annotations

import inspect

from tracec import creation
from tracec import dtypes as dt
from tracec.nn.modules.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
                                    ConvTranspose3d)
from tracec.nn.modules.linear import Linear
from tracec.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d,
                                             InstanceNorm1d, InstanceNorm2d, InstanceNorm3d)
from tracec.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters)

    def has_uninitialized_params(self) -> bool:
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(is_lazy(t) for t in tensors)

    def initialize_parameters(self, *args, **kwargs) -> None:
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def _infer_parameters(self, module, args):
        self.initialize_parameters(*args)
        if self.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        self._initialize_hook.remove()
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become
        return None

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        # PyTorch's: an uninitialized parameter or buffer is saved itself,
        # not detached (so reading its shape raises, as it should)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if is_lazy(p) or keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if is_lazy(b) or keep_vars else b.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        for table in (self._parameters, self._buffers):
            for name, t in table.items():
                key = prefix + name
                if t is not None and is_lazy(t) and key in state_dict:
                    src = state_dict[key]
                    if not is_lazy(src):
                        t.materialize(tuple(src.shape), dtype=src.dtype)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class LazyLinear(LazyModuleMixin, Linear):
    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, 0, False, device, dtype)
        self.out_features = out_features
        self.weight = UninitializedParameter()
        if bias:
            self.bias = UninitializedParameter()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args) -> None:
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features), dtype=input.dtype)
            if self.bias is not None:
                self.bias.materialize((self.out_features,), dtype=input.dtype)
            self.reset_parameters()


def _lazy_conv(base, transposed: bool):
    nsp = base._nsp

    class LazyConv(LazyModuleMixin, base):
        cls_to_become = base

        def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, *rest,
                     **kwargs):
            # The base's arguments after in_channels (which the first input gives).
            bound = inspect.signature(base.__init__).bind(
                self, 0, out_channels, kernel_size, stride, padding, *rest, **kwargs)
            bias = bound.arguments.get("bias", True)
            super().__init__(0, out_channels, kernel_size, stride, padding, *rest, **kwargs)
            self.weight = UninitializedParameter()
            if bias:
                self.bias = UninitializedParameter()

        def reset_parameters(self) -> None:
            if not self.has_uninitialized_params() and self.in_channels != 0:
                super().reset_parameters()

        def initialize_parameters(self, input, *args) -> None:
            if not self.has_uninitialized_params():
                return
            if input.ndim not in (nsp + 1, nsp + 2):
                raise RuntimeError(f"Expected {nsp + 1}D (unbatched) or {nsp + 2}D (batched) "
                                   f"input to {self._get_name()}, but got input of size: "
                                   f"{list(input.shape)}")
            self.in_channels = input.shape[1] if input.ndim == nsp + 2 else input.shape[0]
            if self.in_channels % self.groups:
                raise ValueError("in_channels must be divisible by groups")
            if transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + tuple(self.kernel_size), dtype=input.dtype)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,), dtype=input.dtype)
            self.reset_parameters()

    LazyConv.__name__ = LazyConv.__qualname__ = "Lazy" + base.__name__
    return LazyConv


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


def _lazy_norm(base):
    # PyTorch's lazy norms default to affine and tracked statistics, the
    # instance norms too (unlike InstanceNorm itself).  Like torch's, a lazy
    # norm derives from the norm's base (``_NormBase`` / ``_InstanceNorm``), not
    # from the norm: ``isinstance(nn.LazyBatchNorm2d(), nn.BatchNorm2d)`` is
    # False until the first call turns it into its ``cls_to_become``.
    class LazyNorm(LazyModuleMixin, base.__bases__[0]):
        cls_to_become = base

        def __init__(self, eps=1e-5, momentum=0.1, affine=True,
                     track_running_stats=True, device=None, dtype=None, *, bias=True):
            super().__init__(0, eps, momentum, False, False, device, dtype)
            self.affine = affine
            self.track_running_stats = track_running_stats
            if affine:
                self.weight = UninitializedParameter()
                if bias:
                    self.bias = UninitializedParameter()
            if track_running_stats:
                self.running_mean = UninitializedBuffer()
                self.running_var = UninitializedBuffer()
                self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dt.int64))

        def reset_parameters(self) -> None:
            if not self.has_uninitialized_params() and self.num_features != 0:
                super().reset_parameters()

        def initialize_parameters(self, input, *args) -> None:
            if not self.has_uninitialized_params():
                return
            self.num_features = input.shape[1]
            for name in ("weight", "bias", "running_mean", "running_var"):
                t = getattr(self, name, None)
                if t is not None and is_lazy(t):
                    t.materialize((self.num_features,), dtype=input.dtype)
            self.reset_parameters()

    for name, value in vars(base).items():   # the norm's own: _check_input_dim, _nsp
        if not name.startswith("__") and name not in vars(LazyNorm):
            setattr(LazyNorm, name, value)
    LazyNorm.__name__ = LazyNorm.__qualname__ = "Lazy" + base.__name__
    return LazyNorm


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
