"""Quantization-aware training's modules, as ``torch.ao.quantization``
defines them: the observers ``MinMaxObserver MovingAverageMinMaxObserver
PerChannelMinMaxObserver MovingAveragePerChannelMinMaxObserver``, the
``FakeQuantize`` module and its ``default_*fake_quant`` configurations,
``QuantStub`` / ``DeQuantStub`` (identities until a model is converted,
which tracec does not do) and the ``enable/disable_observer`` /
``enable/disable_fake_quant`` functions for ``model.apply``.

Invariants (PyTorch 2.13's observer.py / fake_quantize.py): an observer
keeps ``min_val`` / ``max_val`` buffers (0-d, starting at +inf / -inf; per
channel: 1-D, starting empty) and an ``eps`` buffer; its qparams put 0 in
the range, ``scale = (max - min) / (qmax - qmin)`` (symmetric: ``max(|min|,
max) / ((qmax - qmin) / 2)``, uint8 zero point 128 or the range's middle)
at least eps, ``zero_point = qmin - round(min / scale)`` clamped, and come
back 1-D.  ``FakeQuantize`` keeps ``fake_quant_enabled`` / ``observer_enabled``
uint8 buffers and ``scale`` (float32) / ``zero_point`` (int32) buffers that
its forward resizes and fills from the observer.  Everything is tensor
code, so a QAT step runs under ``tracec.compile`` too.
"""
from __future__ import annotations

import functools
import warnings

from tracec import config, creation, dtypes, fake_quant, functions, math_extra, nn, reductions_extra, shape_ops
from tracec.ao._qparams import (QDType, per_channel_affine, per_channel_symmetric,
                                per_tensor_affine, per_tensor_symmetric, qint8, qint32, quint8)

__all__ = ["ObserverBase", "MinMaxObserver", "MovingAverageMinMaxObserver",
           "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver",
           "FakeQuantizeBase", "FakeQuantize", "default_fake_quant", "default_weight_fake_quant",
           "default_per_channel_weight_fake_quant", "QuantStub", "DeQuantStub",
           "enable_observer", "disable_observer", "enable_fake_quant", "disable_fake_quant"]

def _resize_to_saved(module, names, state_dict, prefix, strict, missing_keys):
    """Resize ``module``'s buffers ``names`` to the shapes saved in
    ``state_dict`` before loading (observers' and fake quantizers' buffers
    change shape with what they saw); a missing one is reported when strict."""
    for name in names:
        key = prefix + name
        if key in state_dict:
            getattr(module, name).resize_(state_dict[key].shape)
        elif strict:
            missing_keys.append(key)


_EPS = 1.1920928955078125e-07      # torch.finfo(torch.float32).eps
_PER_TENSOR = (per_tensor_affine, per_tensor_symmetric)
_PER_CHANNEL = (per_channel_affine, per_channel_symmetric)
_SYMMETRIC = (per_tensor_symmetric, per_channel_symmetric)


def _range_of(dtype):
    """(min, max) of a quantized or integer dtype (``torch.iinfo``)."""
    if isinstance(dtype, QDType):
        return dtype.qmin, dtype.qmax
    info = config.iinfo(dtype)
    return info.min, info.max


class _PartialWrapper:
    """What ``cls.with_args(**kwargs)`` returns: calling it builds the
    module with those arguments (and any given to the call)."""

    def __init__(self, p):
        self.p = p

    def __call__(self, *args, **keywords):
        return self.p(*args, **keywords)

    def __repr__(self):
        return self.p.__repr__()

    def with_args(self, **kwargs):
        return _PartialWrapper(functools.partial(self.p, **kwargs))


def _with_args(cls_or_self, **kwargs):
    return _PartialWrapper(functools.partial(cls_or_self, **kwargs))


def _calculate_qmin_qmax(quant_min, quant_max, has_customized_qrange, dtype, reduce_range):
    if has_customized_qrange:
        lo, hi = quant_min, quant_max
        qrange_len = hi - lo + 1
        if dtype is qint8 and not 0 < qrange_len <= 256:
            raise AssertionError("quantization range should be positive and not exceed the "
                                 "maximum bit range (=256).")
        if dtype is qint32 and not 0 < qrange_len <= 2 ** 32:
            raise AssertionError("quantization range should be positive and not exceed the "
                                 "maximum bit range (=4294967296).")
        if reduce_range:
            quant_min, quant_max = quant_min // 2, quant_max // 2
        return quant_min, quant_max
    if dtype is qint8:
        return (-64, 63) if reduce_range else (-128, 127)
    if dtype is quint8:
        return (0, 127) if reduce_range else (0, 255)
    if dtype is qint32:
        return -(2 ** 31), 2 ** 31 - 1
    return 0, 15


class ObserverBase(nn.Module):
    """``torch.ao.quantization.ObserverBase``: records statistics of what
    flows through it (its forward returns the input unchanged)."""

    def __init__(self, dtype, is_dynamic: bool = False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    def calculate_qparams(self, **kwargs):
        raise NotImplementedError

    with_args = classmethod(_with_args)


class UniformQuantizationObserverBase(ObserverBase):
    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        self.qscheme = qscheme
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for observers. "
                          "reduce_range will be deprecated in a future release of PyTorch.",
                          stacklevel=2)
        self.reduce_range = reduce_range
        self.register_buffer("eps", creation.tensor([eps]))
        if self.qscheme not in _PER_TENSOR + _PER_CHANNEL:
            raise AssertionError("Default Observer only works for per_tensor_affine, "
                                 "per_tensor_symmetric, per_channel_affine, per_channel_symmetric "
                                 "and per_channel_float_qparams quantization scheme")
        if self.dtype not in (qint8, quint8, qint32):
            raise AssertionError(f"Default Observer only works for qint8, quint8 and quint4x2 data type"
                                 f", got {self.dtype}")
        self.has_customized_qrange = (quant_min is not None) and (quant_max is not None)
        if self.has_customized_qrange and not quant_min <= 0 <= quant_max:
            raise AssertionError("Used-specified quantization range must include 0.")
        if self.has_customized_qrange and not quant_min < quant_max:
            raise AssertionError("qmin must be strictly less than qmax for user-specified "
                                 "quantization range.")
        self.quant_min, self.quant_max = _calculate_qmin_qmax(
            quant_min, quant_max, self.has_customized_qrange, self.dtype, self.reduce_range)

    def _calculate_qparams(self, min_val, max_val):
        if min_val.numel() == 0 or max_val.numel() == 0 or \
                (min_val.dim() == 0 and bool(min_val == float("inf")) and bool(max_val == float("-inf"))):
            warnings.warn("must run observer before calling calculate_qparams. Returning default values.",
                          stacklevel=2)
            return creation.tensor([1.0]), creation.tensor([0])
        quant_min, quant_max = self.quant_min, self.quant_max
        min_val_neg = functions.min(min_val, creation.zeros_like(min_val))
        max_val_pos = functions.max(max_val, creation.zeros_like(max_val))
        zero_point = creation.zeros(min_val_neg.size(), dtype=dtypes.int64)
        if self.qscheme in _SYMMETRIC:
            max_val_pos = functions.max(-min_val_neg, max_val_pos)
            scale = max_val_pos / (float(quant_max - quant_min) / 2)
            scale = functions.max(scale, self.eps)
            if self.dtype is quint8:
                mid = (quant_min + quant_max) // 2 if self.has_customized_qrange else 128
                zero_point = zero_point.new_full(zero_point.size(), mid)
        else:
            scale = (max_val_pos - min_val_neg) / float(quant_max - quant_min)
            scale = functions.max(scale, self.eps)
            zero_point = quant_min - math_extra.round(min_val_neg / scale).to(dtypes.int)
            zero_point = functions.clamp(zero_point, quant_min, quant_max)
        # a per-tensor observer's 0-d results come back 1-D (one element)
        if len(scale.shape) == 0:
            scale = scale.reshape(1)
        if len(zero_point.shape) == 0:
            zero_point = zero_point.reshape(1)
        return scale, zero_point

    def reset_min_max_vals(self):
        raise NotImplementedError("Cannot reset min/max values in the given observer.")


class MinMaxObserver(UniformQuantizationObserverBase):
    """``torch.ao.quantization.MinMaxObserver``: the running min and max."""

    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        if qscheme not in _PER_TENSOR:
            # (PyTorch's messages keep the indentation of their line continuations)
            raise NotImplementedError("MinMaxObserver's qscheme only support torch.per_tensor_symmetric"
                                      + " " * 21 + "and torch.per_tensor_affine.")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, factory_kwargs=factory_kwargs,
                         eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.register_buffer("min_val", creation.tensor(float("inf")))
        self.register_buffer("max_val", creation.tensor(float("-inf")))
        if self.qscheme is per_tensor_symmetric and self.reduce_range and self.dtype is quint8:
            raise NotImplementedError("Cannot reduce range for symmetric" + " " * 40
                                      + "quantization for quint8")

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        min_val_cur, max_val_cur = reductions_extra.aminmax(x)
        self.min_val.copy_(functions.min(min_val_cur, self.min_val))
        self.max_val.copy_(functions.max(max_val_cur, self.max_val))
        return x_orig

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def reset_min_max_vals(self):
        self.min_val.copy_(creation.tensor(float("inf")))
        self.max_val.copy_(creation.tensor(float("-inf")))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """``torch.ao.quantization.MovingAverageMinMaxObserver``: min and max
    averaged with ``averaging_constant`` (the first batch's taken as is)."""

    def __init__(self, averaging_constant=0.01, dtype=quint8, qscheme=per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS, is_dynamic=False,
                 **kwargs):
        if qscheme not in _PER_TENSOR:
            raise NotImplementedError("MovingAverageMinMaxObserver's qscheme only support" + " " * 17
                                      + "torch.per_tensor_symmetric and torch.per_tensor_affine."
                                      + " " * 17 + f"but got: {qscheme}")
        self.averaging_constant = averaging_constant
        if is_dynamic and self.averaging_constant != 1:
            raise NotImplementedError("MovingAverageMinMaxObserver doesn't support dynamic "
                                      "quantization for averaging constant of "
                                      f"{self.averaging_constant}")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        min_val, max_val = self.min_val, self.max_val
        if bool(min_val == float("inf")) and bool(max_val == float("-inf")):
            min_val, max_val = reductions_extra.aminmax(x)
        else:
            min_val_cur, max_val_cur = reductions_extra.aminmax(x)
            min_val = min_val + self.averaging_constant * (min_val_cur - min_val)
            max_val = max_val + self.averaging_constant * (max_val_cur - max_val)
        self.min_val.copy_(min_val)
        self.max_val.copy_(max_val)
        return x_orig


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """``torch.ao.quantization.PerChannelMinMaxObserver``: the running min
    and max of each slice along ``ch_axis``."""

    def __init__(self, ch_axis=0, dtype=quint8, qscheme=per_channel_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        if qscheme not in _PER_CHANNEL:
            raise NotImplementedError("PerChannelMinMaxObserver's qscheme only support" + " " * 21
                                      + "torch.per_channel_symmetric, torch.per_channel_affine and "
                                      "torch.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("PerChannelMinMaxObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, factory_kwargs=factory_kwargs,
                         eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", creation.tensor([]))
        self.register_buffer("max_val", creation.tensor([]))
        if self.qscheme is per_channel_symmetric and self.reduce_range and self.dtype is quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for quint8")

    def _rows(self, x):
        axes = list(range(x.dim()))
        axes[self.ch_axis] = 0
        axes[0] = self.ch_axis
        return shape_ops.flatten(x.permute(axes).to(self.min_val.dtype), start_dim=1)

    def _update(self, min_val, max_val):
        self.min_val.resize_(min_val.shape)
        self.max_val.resize_(max_val.shape)
        self.min_val.copy_(min_val)
        self.max_val.copy_(max_val)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        y = self._rows(x_orig.detach())
        if self.min_val.numel() == 0 or self.max_val.numel() == 0:
            min_val, max_val = reductions_extra.aminmax(y, dim=1)
        else:
            min_val_cur, max_val_cur = reductions_extra.aminmax(y, dim=1)
            min_val = functions.min(min_val_cur, self.min_val)
            max_val = functions.max(max_val_cur, self.max_val)
        self._update(min_val, max_val)
        return x_orig

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # min_val / max_val take the saved shapes (they start empty); PyTorch
        # then loads non-strictly, having reported missing keys itself
        _resize_to_saved(self, ("min_val", "max_val"), state_dict, prefix, strict, missing_keys)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """``torch.ao.quantization.MovingAveragePerChannelMinMaxObserver``."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=quint8,
                 qscheme=per_channel_affine, reduce_range=False, quant_min=None, quant_max=None,
                 eps=_EPS, is_dynamic=False, **kwargs):
        if qscheme not in _PER_CHANNEL:
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver's qscheme only support"
                                      + " " * 21 + "torch.per_channel_symmetric, torch.per_channel_affine and "
                                      "torch.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver doesn't support "
                                      "dynamic quantization")
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        y = self._rows(x_orig.detach())
        min_val, max_val = self.min_val, self.max_val
        if min_val.numel() == 0 or max_val.numel() == 0:
            min_val, max_val = reductions_extra.aminmax(y, dim=1)
        else:
            min_val_cur, max_val_cur = reductions_extra.aminmax(y, dim=1)
            min_val = min_val + self.averaging_constant * (min_val_cur - min_val)
            max_val = max_val + self.averaging_constant * (max_val_cur - max_val)
        self._update(min_val, max_val)
        return x_orig


class FakeQuantizeBase(nn.Module):
    """``torch.ao.quantization.FakeQuantizeBase``: the two switches."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", creation.tensor([1], dtype=dtypes.uint8))
        self.register_buffer("observer_enabled", creation.tensor([1], dtype=dtypes.uint8))

    def enable_fake_quant(self, enabled: bool = True) -> None:
        self.fake_quant_enabled[0] = 1 if enabled else 0

    def disable_fake_quant(self):
        self.enable_fake_quant(False)

    def enable_observer(self, enabled: bool = True) -> None:
        self.observer_enabled[0] = 1 if enabled else 0

    def disable_observer(self):
        self.enable_observer(False)

    with_args = classmethod(_with_args)


class FakeQuantize(FakeQuantizeBase):
    """``torch.ao.quantization.FakeQuantize``: observes its input (while
    ``observer_enabled``), then fake-quantizes it per tensor or per channel
    with the observer's qparams (while ``fake_quant_enabled``)."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 is_dynamic=False, **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise AssertionError("quant_min must be less than or equal to quant_max")
            dtype = observer_kwargs.get("dtype", quint8)
            if hasattr(observer, "p"):
                dtype = getattr(getattr(observer, "p", {}), "keywords", {}).get("dtype", dtype)
            lo, hi = _range_of(dtype)
            if lo > quant_min:
                raise AssertionError("quant_min out of bound")
            if quant_max > hi:
                raise AssertionError("quant_max out of bound")
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        self.quant_min = self.activation_post_process.quant_min
        self.quant_max = self.activation_post_process.quant_max
        self.is_dynamic = self.activation_post_process.is_dynamic
        self.register_buffer("scale", creation.tensor([1.0], dtype=dtypes.float))
        self.register_buffer("zero_point", creation.tensor([0], dtype=dtypes.int))
        self.dtype = self.activation_post_process.dtype
        self.qscheme = self.activation_post_process.qscheme
        self.ch_axis = getattr(self.activation_post_process, "ch_axis", -1)
        if self.qscheme not in _PER_TENSOR + _PER_CHANNEL:
            raise AssertionError("Only per channel and per tensor quantization are supported in "
                                 "fake quantize got qscheme: " + str(self.qscheme))
        self.is_per_channel = self.qscheme in _PER_CHANNEL

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, X):
        if bool(self.observer_enabled[0] == 1):
            self.activation_post_process(X.detach())
            _scale, _zero_point = self.calculate_qparams()
            if self.scale.shape != _scale.shape:
                self.scale.resize_(_scale.shape)
                self.zero_point.resize_(_zero_point.shape)
            self.scale.copy_(_scale)
            self.zero_point.copy_(_zero_point)
        if bool(self.fake_quant_enabled[0] == 1):
            if self.is_per_channel:
                X = fake_quant.fake_quantize_per_channel_affine(
                    X, self.scale, self.zero_point, self.ch_axis,
                    self.activation_post_process.quant_min, self.activation_post_process.quant_max)
            else:
                X = fake_quant.fake_quantize_per_tensor_affine(
                    X, self.scale, self.zero_point,
                    self.activation_post_process.quant_min, self.activation_post_process.quant_max)
        return X

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"quant_min={self.activation_post_process.quant_min}, "
                f"quant_max={self.activation_post_process.quant_max}, "
                f"dtype={self.dtype}, qscheme={self.qscheme}, ch_axis={self.ch_axis}, "
                f"scale={self.scale}, zero_point={self.zero_point}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # scale / zero_point take the saved shapes (per channel: one per channel)
        _resize_to_saved(self, ("scale", "zero_point"), state_dict, prefix, strict, missing_keys)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


default_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=quint8,
    qscheme=per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=qint8,
    qscheme=per_tensor_symmetric, reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=qint8,
    qscheme=per_channel_symmetric, reduce_range=False, ch_axis=0)


class QuantStub(nn.Module):
    """``torch.ao.quantization.QuantStub``: an identity marking where a
    converted model would quantize (tracec keeps models in float)."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(nn.Module):
    """``torch.ao.quantization.DeQuantStub``: an identity marking where a
    converted model would dequantize."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


def _switch(mod, method):
    if isinstance(mod, FakeQuantizeBase):
        getattr(mod, method)()


def disable_fake_quant(mod):
    """For ``model.apply``: turn a FakeQuantize module's fake quantization off."""
    _switch(mod, "disable_fake_quant")


def enable_fake_quant(mod):
    """For ``model.apply``: turn a FakeQuantize module's fake quantization on."""
    _switch(mod, "enable_fake_quant")


def disable_observer(mod):
    """For ``model.apply``: freeze a FakeQuantize module's qparams."""
    _switch(mod, "disable_observer")


def enable_observer(mod):
    """For ``model.apply``: let a FakeQuantize module observe again."""
    _switch(mod, "enable_observer")
