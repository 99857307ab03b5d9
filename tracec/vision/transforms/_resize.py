"""Resizing tensor images as ``torch.nn.functional.interpolate`` with
``antialias=True`` does (ATen's ``_upsample_{bilinear,bicubic}2d_aa``, the
same separable filters as Pillow's ``Image.resize``).

Each axis is a matrix product with a weight matrix built in NumPy from the
sizes alone: row ``i`` holds the normalized filter taps of output pixel
``i``.  The result is differentiable through tracec's matmul, and equals
ATen's up to float rounding (the taps and their order of summation are
ATen's; only the accumulation order differs).
"""
from __future__ import annotations

import numpy as np

from tracec import nn as _nn
from tracec.creation import from_numpy


def _bilinear(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _bicubic(x, a=-0.5):
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def aa_weights(n_in: int, n_out: int, mode: str) -> np.ndarray:
    """(n_out, n_in) float64 taps of ATen's antialiased resampling."""
    filt, size = (_bilinear, 2) if mode == "bilinear" else (_bicubic, 4)
    scale = n_in / n_out
    support = size / 2 * scale if scale >= 1.0 else size / 2
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    w = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        taps = filt((np.arange(lo, hi) - center + 0.5) * invscale)
        total = taps.sum()
        w[i, lo:hi] = taps / total if total != 0 else taps
    return w


def resize_float(img, size, mode: str, antialias: bool):
    """``img`` (float, [..., H, W]) resized to ``size`` = (h, w)."""
    h, w = size
    if mode in ("bilinear", "bicubic") and antialias:
        dt = img.dtype
        wh = from_numpy(aa_weights(img.shape[-2], h, mode)).to(dt)
        ww = from_numpy(aa_weights(img.shape[-1], w, mode).T.copy()).to(dt)
        return wh.matmul(img).matmul(ww)
    lead = img.shape[:-2]
    x = img.reshape(-1, 1, *img.shape[-2:])
    kw = {"align_corners": False} if mode in ("bilinear", "bicubic") else {}
    out = _nn.functional.interpolate(x, size=(h, w), mode=mode, **kw)
    return out.reshape(*lead, h, w)
