"""``torch.ao.nn.quantized.dynamic.Linear``: int8 weights, activations
quantized per call, as PyTorch's x86 (fbgemm) ``quantized::linear_dynamic``.

``forward``: the input's range (over the whole tensor) picks a quint8
scale and zero point (``reduce_range``: [0, 127]); the quantized input
minus its zero point times the int8 weight is summed exactly (integers,
accumulated in float64, exact up to K of about 10^11, where fbgemm
accumulates in int32), times the product of the two scales (float32) plus
the float bias, rounded once as fbgemm's fused multiply-add rounds (with
x86's fbgemm it matches PyTorch bit for bit on nearly every input).  A
``float16`` layer keeps its weight rounded to float16 and computes in
float32.  Written in tensor ops (``tracec.ao._qparams``), so
it compiles; outputs never require grad (PyTorch's do not either).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import functions as F
from tracec.ao._qparams import (activation_qparams, per_tensor_affine, qint8,
                                quantize, weight_qparams)
from tracec.creation import tensor, zeros
from tracec.graph import no_grad
from tracec.nn import Module

__all__ = ["Linear", "linear_dynamic", "quantize_weight"]


def quantize_weight(w):
    """``(int8 tensor, scale, zero_point)`` of a float weight (per tensor)."""
    scale, zp = weight_qparams(w, qint8)
    s, z = tensor(scale), tensor(zp)
    return quantize(w, s, z, qint8.qmin, qint8.qmax).to(dt.int8), s, z


def linear_dynamic(x, weight_q, weight_scale, weight_zero_point, bias):
    """``quantized::linear_dynamic(x, packed weight, reduce_range=True)``
    (see the module docstring): float32 ``x`` times an int8 weight."""
    a_scale, a_zp = activation_qparams(x, reduce_range=True)
    xq = quantize(x, a_scale, a_zp, 0, 255) - a_zp
    w = weight_q.to(dt.float32) - weight_zero_point
    acc = F.matmul(xq.to(dt.float64), w.to(dt.float64).t())
    # fbgemm's float output stage: acc * (a_scale * w_scale) + bias in one
    # fused multiply-add (one rounding: here the float64 result rounded once)
    out = acc * (a_scale * weight_scale.to(dt.float32)).to(dt.float64)
    if bias is not None:
        out = out + bias.to(dt.float64)
    return out.to(dt.float32)


class Linear(Module):
    """A dynamically quantized linear layer (``from_float`` makes one from
    an ``nn.Linear``)."""

    _version = 4

    def __init__(self, in_features: int, out_features: int, bias_: bool = True,
                 dtype=qint8):
        super().__init__()
        if not (dtype is qint8 or dtype is dt.float16):
            raise RuntimeError("Unsupported dtype specified for dynamic quantized Linear!")
        self.in_features, self.out_features, self.dtype = in_features, out_features, dtype
        self.register_buffer("weight_q", zeros(
            out_features, in_features, dtype=dt.int8 if dtype is qint8 else dt.float16))
        self.register_buffer("weight_scale", tensor(1.0))
        self.register_buffer("weight_zero_point", tensor(0))
        self.register_buffer("bias_", zeros(out_features) if bias_ else None)
        # the output scale and zero point PyTorch keeps (unused by dynamic layers)
        self.register_buffer("scale", tensor(1.0))
        self.register_buffer("zero_point", tensor(0))

    def _get_name(self) -> str:
        return "DynamicQuantizedLinear"

    def extra_repr(self) -> str:
        s = f"in_features={self.in_features}, out_features={self.out_features}, dtype={self.dtype}"
        if self.dtype is qint8:
            s += f", qscheme={per_tensor_affine}"
        return s

    def weight(self):
        """The weight as the float values it stands for (PyTorch returns a
        quantized tensor; tracec has none: ``weight_q`` holds the integers)."""
        if self.dtype is qint8:
            return (self.weight_q.to(dt.float32) - self.weight_zero_point) * self.weight_scale
        return self.weight_q.to(dt.float32)

    def bias(self):
        return self.bias_

    def forward(self, x):
        with no_grad():
            x = x.to(dt.float32)
            if self.dtype is not qint8:
                out = F.matmul(x, self.weight_q.to(dt.float32).t())
                return out + self.bias_ if self.bias_ is not None else out
            return linear_dynamic(x, self.weight_q, self.weight_scale, self.weight_zero_point,
                                  self.bias_)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False, dtype=qint8):
        """The quantized copy of the float ``nn.Linear`` ``mod``."""
        q = cls(mod.in_features, mod.out_features, mod.bias is not None, dtype=dtype)
        w = mod.weight.detach().to(dt.float32)
        with no_grad():
            if dtype is qint8:
                q.weight_q, q.weight_scale, q.weight_zero_point = quantize_weight(w)
            else:
                q.weight_q = w.to(dt.float16)
            if mod.bias is not None:
                q.bias_ = mod.bias.detach().clone()
        return q

    @classmethod
    def from_reference(cls, ref_qlinear):
        return cls.from_float(ref_qlinear)
