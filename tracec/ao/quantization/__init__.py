"""``torch.ao.quantization`` (also ``torch.quantization``):
``quantize_dynamic`` and the dynamic qconfigs it takes; the observers,
``FakeQuantize`` and stubs of quantization-aware training (``qat``).

``quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)`` returns a copy
of ``model`` (or ``model`` itself with ``inplace=True``) whose
``nn.Linear`` children (exactly that type, as PyTorch matches them) are
``tracec.ao.nn.quantized.dynamic.Linear`` layers with PyTorch's x86
numerics (the model itself is never swapped, as in PyTorch: a bare
``nn.Linear`` comes back in float).  Only Linear is quantized: asking for another type (``nn.LSTM``)
raises; the default spec leaves recurrent layers in float, with a warning.
"""
from __future__ import annotations

import copy
import warnings
from collections import namedtuple

from tracec import dtypes as dt
from tracec import nn
from tracec.ao._qparams import qint8
from tracec.ao.nn.quantized.dynamic import LSTM as DynamicLSTM, Linear as DynamicLinear

__all__ = ["QConfig", "default_dynamic_qconfig", "float16_dynamic_qconfig",
           "per_channel_dynamic_qconfig", "quantize_dynamic"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """``QConfig(activation, weight)``: which observers to use (tracec
    names them; its dynamic Linear implements the defaults)."""


default_dynamic_qconfig = QConfig(activation="PlaceholderObserver(dtype=quint8, is_dynamic=True)",
                                  weight="MinMaxObserver(dtype=qint8, "
                                         "qscheme=per_tensor_symmetric)")
float16_dynamic_qconfig = QConfig(activation="PlaceholderObserver(dtype=float16)",
                                  weight="PlaceholderObserver(dtype=float16)")
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_qconfig.activation,
                                      weight="PerChannelMinMaxObserver(dtype=qint8)")

_RECURRENT = (nn.GRU, nn.LSTMCell, nn.RNNCell, nn.GRUCell)
#: float type -> its dynamic quantized type
_SWAPS = {nn.Linear: DynamicLinear, nn.LSTM: DynamicLSTM}


def _layer_dtype(qconfig, dtype):
    if qconfig is float16_dynamic_qconfig:
        return dt.float16
    if qconfig is per_channel_dynamic_qconfig:
        raise NotImplementedError("quantize_dynamic: per-channel weight quantization is not "
                                  "implemented in tracec (per-tensor qint8 and float16 are)")
    return dtype


def quantize_dynamic(model, qconfig_spec=None, dtype=qint8, mapping=None, inplace=False):
    """See the module docstring."""
    if dtype not in (qint8, dt.float16):
        raise ValueError(f"Don't know how to quantize with default settings for {dtype}. "
                         "Provide full qconfig please")
    default_spec = qconfig_spec is None
    if default_spec:
        qconfig_spec = set(_SWAPS) | set(_RECURRENT)
    if isinstance(qconfig_spec, (set, list, tuple, frozenset)):
        qconfig = default_dynamic_qconfig if dtype is qint8 else float16_dynamic_qconfig
        qconfig_spec = dict.fromkeys(qconfig_spec, qconfig)
    for key in qconfig_spec:
        if isinstance(key, type) and key not in _SWAPS and not (
                default_spec and key in _RECURRENT):
            raise NotImplementedError(f"quantize_dynamic: tracec quantizes nn.Linear and "
                                      f"nn.LSTM only, not {key.__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    warned = []

    def swap(module, prefix):
        for name, child in list(module.named_children()):
            full = f"{prefix}{name}"
            qc = qconfig_spec.get(full, qconfig_spec.get(type(child)))
            if type(child) in _SWAPS and qc is not None:
                setattr(module, name, _SWAPS[type(child)].from_float(
                    child, dtype=_layer_dtype(qc, dtype)))
                continue
            if isinstance(child, _RECURRENT) and qc is not None and not warned:
                warned.append(full)
                warnings.warn(f"quantize_dynamic: {full} ({type(child).__name__}) stays in "
                              "float: tracec quantizes nn.Linear and nn.LSTM only", stacklevel=3)
            swap(child, full + ".")
    swap(model, "")
    return model

from tracec.ao.quantization.qat import (  # noqa: E402  (quantization-aware training)
    DeQuantStub, FakeQuantize, FakeQuantizeBase, MinMaxObserver, MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver, ObserverBase, PerChannelMinMaxObserver, QuantStub,
    default_fake_quant, default_per_channel_weight_fake_quant, default_weight_fake_quant,
    disable_fake_quant, disable_observer, enable_fake_quant, enable_observer)
from tracec.ao.quantization.fuse_modules import (  # noqa: E402
    fuse_known_modules, fuse_modules, fuse_modules_qat, get_fuser_method)

__all__ += ["DeQuantStub", "FakeQuantize", "FakeQuantizeBase", "MinMaxObserver",
            "MovingAverageMinMaxObserver", "MovingAveragePerChannelMinMaxObserver", "ObserverBase",
            "PerChannelMinMaxObserver", "QuantStub", "default_fake_quant",
            "default_per_channel_weight_fake_quant", "default_weight_fake_quant",
            "disable_fake_quant", "disable_observer", "enable_fake_quant", "enable_observer",
            "fuse_known_modules", "fuse_modules", "fuse_modules_qat", "get_fuser_method"]
