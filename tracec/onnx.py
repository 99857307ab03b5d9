"""``tracec.onnx``: what model code asks of ``torch.onnx`` while running.

``is_in_onnx_export()`` is False: tracec never runs a model inside an ONNX
export. ``export`` is refused with one clear error: tracec writes no ONNX;
its deployment format is ``tracec build`` (a shared library with a C
header, API.md §5), which a program can use instead.
"""
from __future__ import annotations

__all__ = ["export", "is_in_onnx_export"]


def is_in_onnx_export() -> bool:
    return False


def export(model, args=(), f=None, *a, **k):
    raise NotImplementedError(
        "torch.onnx.export: tracec does not write ONNX files. To ship a compiled model or "
        "training step, use `tracec build` (a shared library with a C header); see "
        "`tracec build --help`.")
