"""Fake quantization for quantization-aware training:
``fake_quantize_per_tensor_affine`` and ``fake_quantize_per_channel_affine``.

Invariant: the values are PyTorch's kernels' to the bit: the inverse scale
is ``1.0f / scale`` in float32, the quantized value is
``zero_point + nearbyint(x * inv_scale)`` in the input's dtype (a float
per-channel zero point is added before rounding instead), clamped to
``[quant_min, quant_max]``, and ``(q - zero_point) * scale`` is taken in
float32 (per tensor) or the input's dtype (per channel) and comes back in the
input's dtype.  The gradient is the straight-through one PyTorch's
``FakeQuantize*CachemaskBackward0`` gives: the incoming gradient where the
unclamped quantized value lies in the range, zero elsewhere (none to the
scale and zero point).  Composite of primitives: it traces, so
``tracec.compile`` needs nothing new.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import _named
from tracec.math_extra import _rint
from tracec.tensor import RECORDERS, Tensor, concrete

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine"]


def _check_range(quant_min: int, quant_max: int):
    if not quant_min <= quant_max:
        # PyTorch's message, with the run of spaces its line continuation leaves.
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


def _float_input(x, kernel: str):
    if not isinstance(x, Tensor):
        raise TypeError(f"fake_quantize: expected a Tensor as input, got {type(x).__name__}")
    if x.dtype.category != 2:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dt.scalar_type_name(x.dtype)}\'')


def _straight_through(x, q, zp, scale, quant_min, quant_max, name, in_float32):
    """``(clamp(q) - zp) * scale`` with the masked straight-through gradient;
    ``in_float32``: the product taken in float32, then cast to x's dtype (the
    per-tensor kernel multiplies an integer by the float scale; the
    per-channel one computes in the input's dtype)."""
    inside = ops.logical_and(ops.ge(q, float(quant_min)), ops.le(q, float(quant_max)))
    qc = ops.minimum(ops.maximum(q, float(quant_min)), float(quant_max))
    if in_float32:
        s32 = scale if isinstance(scale, float) else ops.cast(scale, dt.float32)
        value = ops.cast(ops.mul(ops.cast(ops.sub(qc, zp), dt.float32), s32), x.dtype)
    else:
        value = ops.mul(ops.sub(qc, zp), scale)
    value = ops.stop_gradient(value)
    # x - stop_gradient(x) is an exact 0 whose gradient is 1: selected only
    # inside the range, so an infinite input outside it cannot leak a NaN.
    through = ops.where(inside, ops.sub(x, ops.stop_gradient(x)), 0.0)
    return _named(ops.add(value, through), name)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min: int, quant_max: int):
    """``torch.fake_quantize_per_tensor_affine``: ``scale`` and ``zero_point``
    Python numbers, or one-element tensors (the tensor-qparams overload
    ``FakeQuantize`` modules call)."""
    _float_input(input, "fake_quantize_tensor_cachemask_kernel_type_handling")
    _check_range(int(quant_min), int(quant_max))
    d = input.dtype
    if isinstance(scale, Tensor) or isinstance(zero_point, Tensor):
        s = scale if isinstance(scale, Tensor) else Tensor._from_data(np.float32(scale))
        z = zero_point if isinstance(zero_point, Tensor) else Tensor._from_data(np.int64(zero_point))
        for t in (s, z):
            if t.numel() != 1:
                raise RuntimeError(f"a Tensor with {t.numel()} elements cannot be converted to Scalar")
        s32 = ops.cast(ops.reshape(s, ()), dt.float32)
        inv = ops.cast(ops.div(ops.full((), 1.0, dt.float32, like=s32), s32), d)
        sc = ops.cast(s32, d)
        # the kernel reads the zero point as an integer (truncating a float one)
        zp = ops.cast(ops.cast(ops.reshape(z, ()), dt.int64), d)
    else:
        zp_i = int(zero_point)
        if not int(quant_min) <= zp_i <= int(quant_max):
            raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
        s32 = np.float32(scale)
        inv, sc, zp = float(np.float32(1.0) / s32), float(s32), float(zp_i)
    x = ops.stop_gradient(input)
    q = ops.add(_rint(ops.mul(x, inv)), zp)
    return _straight_through(input, q, zp, sc, quant_min, quant_max,
                             "FakeQuantizePerTensorAffineCachemaskBackward0", True)


def fake_quantize_per_channel_affine(input, scale, zero_point, axis: int, quant_min: int,
                                     quant_max: int):
    """``torch.fake_quantize_per_channel_affine``: ``scale`` a 1-D float32
    tensor and ``zero_point`` a 1-D int32 (added after rounding) or float
    (added before rounding) tensor, one entry per slice of ``input`` along
    ``axis`` (0 <= axis < input.dim(), as PyTorch requires)."""
    _float_input(input, "fake_quantize_channel_cachemask_cpu_type_handling")
    if not isinstance(scale, Tensor) or not isinstance(zero_point, Tensor):
        raise TypeError("fake_quantize_per_channel_affine(): scale and zero_point must be Tensors")
    if zero_point.dtype not in (dt.int32, dt.float32, dt.float16):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {dt.scalar_type_name(zero_point.dtype)}")
    if scale.dtype not in (dt.float32, dt.bfloat16):
        raise RuntimeError(f"Scale must be Float or BFloat16, found {dt.scalar_type_name(scale.dtype)}")
    if scale.dim() != 1:
        raise RuntimeError("scale should be a 1-D tensor")
    if zero_point.dim() != 1:
        raise RuntimeError("zero point should be a 1-D tensor")
    if scale.numel() != zero_point.numel():
        raise RuntimeError("scale and zero-point need to have the same dimensions")
    nd = input.dim()
    if not -nd <= axis < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {axis})")
    if scale.numel() != input.shape[axis]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    # (the size is checked along the wrapped axis first, as PyTorch does)
    if axis < 0:
        raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
    _check_range(int(quant_min), int(quant_max))
    if zero_point.dtype is dt.int32 and not RECORDERS and zero_point.numel():
        # (checked eagerly only: inside a trace the values are not known)
        z = concrete(zero_point, "fake_quantize_per_channel_affine zero_point check")
        if int(z.min()) < quant_min or int(z.max()) > quant_max:
            raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    d = input.dtype
    shape = [1] * nd
    shape[axis] = input.shape[axis]
    s32 = ops.reshape(ops.cast(scale, dt.float32), shape)
    inv = ops.cast(ops.div(ops.full(tuple(shape), 1.0, dt.float32, like=s32), s32), d)
    sc = ops.cast(s32, d)
    zp = ops.cast(ops.reshape(zero_point, shape), d)
    x = ops.stop_gradient(input)
    if zero_point.dtype is dt.int32:
        q = ops.add(_rint(ops.mul(x, inv)), zp)
    else:
        q = _rint(ops.add(ops.mul(x, inv), zp))
    return _straight_through(input, q, zp, sc, quant_min, quant_max,
                             "FakeQuantizePerChannelAffineCachemaskBackward0",
                             False)
