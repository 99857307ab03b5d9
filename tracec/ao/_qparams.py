"""Quantization parameters as PyTorch's x86 (fbgemm) kernels choose them,
and the quantized dtypes and schemes' names (``torch.qint8``, ...).

Everything here is written with tensor ops, so a quantized model runs
eagerly and under ``tracec.compile`` with the same numbers.  Invariants
(fbgemm's ``ChooseQuantizationParams`` / ``Quantize`` and the observer
``MinMaxObserver(qint8, per_tensor_symmetric)``):

- a quantized value is ``clamp(rint(x * (1/scale)) + zero_point, qmin,
  qmax)``, the product in float32, rounding half to even;
- an activation's range always contains 0; its scale is computed in
  float64 and used as float32; ``reduce_range`` halves the uint8 range
  to [0, 127]; a scale under 6.1e-5 is raised to it (the range widened);
- a weight's scale is ``max(|min|, |max|) / 127.5`` (float32), at least
  float32's eps, with zero point 0.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import functions as F
from tracec.creation import tensor
from tracec.math_extra import round as _round
from tracec.methods_extra import isinf as _isinf
from tracec.tensor import Tensor

__all__ = ["QDType", "QScheme", "qint8", "quint8", "qint32", "per_tensor_affine",
           "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
           "activation_qparams", "quantize", "weight_qparams"]


class QDType:
    """``torch.qint8`` and friends: names for quantized storage (tracec
    keeps the integers in an ordinary integer tensor beside the scale)."""

    def __init__(self, name: str, storage, qmin: int, qmax: int):
        self.name, self.storage, self.qmin, self.qmax = name, storage, qmin, qmax

    def __repr__(self) -> str:
        return f"{dt.PUBLIC_NAME[0]}.{self.name}"


class QScheme:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"{dt.PUBLIC_NAME[0]}.{self.name}"


qint8 = QDType("qint8", dt.int8, -128, 127)
quint8 = QDType("quint8", dt.uint8, 0, 255)
qint32 = QDType("qint32", dt.int32, -2 ** 31, 2 ** 31 - 1)
per_tensor_affine = QScheme("per_tensor_affine")
per_tensor_symmetric = QScheme("per_tensor_symmetric")
per_channel_affine = QScheme("per_channel_affine")
per_channel_symmetric = QScheme("per_channel_symmetric")

#: fbgemm's SMALL_SCALE_THRESHOLD (a float)
_SMALL_SCALE = float(np.float32(6.1e-5))


def quantize(x: Tensor, scale: Tensor, zero_point: Tensor, qmin: int, qmax: int) -> Tensor:
    """The integers (as float32 values) fbgemm stores for ``x``."""
    inv = (1.0 / scale.to(dt.float32)).to(dt.float32)
    q = _round(x.to(dt.float32) * inv) + zero_point.to(dt.float32)
    return F.clamp(q, qmin, qmax)


def activation_qparams(x: Tensor, reduce_range: bool = True):
    """``(scale float32, zero_point float32)`` 0-d tensors that fbgemm's
    dynamic linear chooses for the whole input ``x`` (quint8)."""
    qmin, qmax = (0, 127) if reduce_range else (0, 255)
    lo = F.minimum(F.amin(x.detach()).to(dt.float32), tensor(0.0))
    hi = F.maximum(F.amax(x.detach()).to(dt.float32), tensor(0.0))
    lo64, hi64 = lo.to(dt.float64), hi.to(dt.float64)
    scale = (hi64 - lo64) / (qmax - qmin)
    s32 = scale.to(dt.float32)
    degenerate = (s32 == 0) | _isinf(1.0 / s32)
    scale = F.where(degenerate, tensor(0.1, dtype=dt.float64), scale)
    small = scale < _SMALL_SCALE
    amp = (_SMALL_SCALE / scale).to(dt.float32)
    span = float(np.float32(_SMALL_SCALE * (qmax - qmin)))
    lo_s = F.where(lo == 0, lo, F.where(hi == 0, tensor(-span), lo * amp))
    hi_s = F.where(lo == 0, tensor(span), F.where(hi == 0, hi, hi * amp))
    lo = F.where(small, lo_s, lo).to(dt.float64)
    hi = F.where(small, hi_s, hi).to(dt.float64)
    scale = F.where(small, tensor(_SMALL_SCALE, dtype=dt.float64), scale)
    zp_min, zp_max = qmin - lo / scale, qmax - hi / scale
    err_min = abs(qmin) - F.abs(lo / scale)
    err_max = abs(qmax) - F.abs(hi / scale)
    zp = F.where(err_min < err_max, zp_min, zp_max)
    zp = F.clamp(_round(zp), qmin, qmax)
    return scale.to(dt.float32), zp.to(dt.float32)


def weight_qparams(w: Tensor, dtype: QDType = qint8):
    """``(scale, zero_point)`` of ``MinMaxObserver(dtype, per_tensor_symmetric)``."""
    lo = min(float(w.detach().min()), 0.0)
    hi = max(float(w.detach().max()), 0.0)
    bound = np.float32(max(-lo, hi))
    scale = np.float32(bound / np.float32((dtype.qmax - dtype.qmin) / 2))
    scale = max(scale, np.finfo(np.float32).eps)
    zp = 0 if dtype is qint8 else 128
    return float(scale), zp
