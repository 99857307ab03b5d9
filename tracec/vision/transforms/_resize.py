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
from tracec.nn._resample import _aa_bicubic as _bicubic, aa_weights  # noqa: F401 - shared taps
from tracec.creation import from_numpy


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


def _plain_bicubic_weights(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) taps of ``interpolate(mode="bicubic", antialias=False)``:
    four taps of the a=-0.75 cubic, indices clamped to the edges."""
    scale = n_in / n_out
    centers = scale * (np.arange(n_out) + 0.5) - 0.5
    first = np.floor(centers)
    w = np.zeros((n_out, n_in))
    for d in (-1, 0, 1, 2):
        taps = _bicubic(d - (centers - first), a=-0.75)
        np.add.at(w, (np.arange(n_out), np.clip(first + d, 0, n_in - 1).astype(np.int64)), taps)
    return w


def _int16_taps(n_in: int, n_out: int, mode: str, antialias: bool, scale=None,
                align_corners: bool = False):
    """ATen's fixed-point taps for uint8 images: the float taps scaled by
    2**p (p as large as keeps the biggest tap below 2**15) and rounded half
    away from zero, and p.  (``scale``, ``align_corners``: interpolate's,
    for bilinear taps.)"""
    w = _plain_bicubic_weights(n_in, n_out) if mode == "bicubic" and not antialias \
        else aa_weights(n_in, n_out, mode, antialias, scale, align_corners)
    w_max = w.max()
    p = 0
    while p < 22 and int(0.5 + w_max * (1 << (p + 1))) < (1 << 15):
        p += 1
    taps = np.trunc(np.where(w < 0, -0.5, 0.5) + w * (1 << p)).astype(np.int64)
    return taps, p


def _fixed_point_pass(x: np.ndarray, n_out: int, mode: str, antialias: bool, scale=None,
                      align_corners: bool = False) -> np.ndarray:
    taps, p = _int16_taps(x.shape[-1], n_out, mode, antialias, scale, align_corners)
    acc = x.astype(np.int64) @ taps.T + (1 << (p - 1))
    return np.clip(acc >> p, 0, 255).astype(np.uint8)


def resize_uint8(img: np.ndarray, size, mode: str, antialias: bool, scales=(None, None),
                 align_corners: bool = False) -> np.ndarray:
    """``img`` (uint8, [..., H, W]) resized as ATen's native uint8 CPU
    kernel does (torchvision's v2 ``resize`` on uint8 tensors, and
    ``interpolate`` of uint8 tensors): a horizontal then a vertical pass,
    each in fixed point and rounded to uint8.  ``scales``: interpolate's
    (h, w) scale factors (None: from the sizes)."""
    h, w = size
    if w != img.shape[-1]:
        img = _fixed_point_pass(img, w, mode, antialias, scales[1], align_corners)
    if h != img.shape[-2]:
        img = np.swapaxes(_fixed_point_pass(np.swapaxes(img, -1, -2), h, mode, antialias,
                                            scales[0], align_corners), -1, -2)
    return np.ascontiguousarray(img)
