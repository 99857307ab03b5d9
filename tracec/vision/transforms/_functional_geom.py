"""Affine warps of ``transforms.functional`` (rotate, affine).  PIL images
go to Pillow's ``rotate``/``transform``; tensors are resampled with
``grid_sample`` on torchvision's grid (pixel centres, ``align_corners=False``,
zeros outside), from the same inverse affine matrix."""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.creation import linspace, ones, tensor as _tensor
from tracec.shape_ops import cat, stack
from tracec.vision.transforms import _functional_pil as F_pil
from tracec.vision.transforms import functional as F


def _inverse_affine_matrix(center, angle, translate, scale, shear):
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = [x / scale for x in (d, -b, 0.0, -c, a, 0.0)]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty)
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty)
    m[2] += cx
    m[5] += cy
    return m


def _warp(img, matrix, mode, fill):
    """``img`` resampled at ``matrix`` (output pixel -> input pixel).  With a
    ``fill``, a ones channel is resampled along and marks where the input
    was: nearest fills where it is below 0.5, bilinear blends by it, as
    torchvision's ``_apply_grid_transform``."""
    if mode.value not in ("nearest", "bilinear"):
        raise ValueError(f"tensor rotate/affine support nearest and bilinear, not {mode.value}")
    h, w = img.shape[-2], img.shape[-1]
    x = img if img.is_floating_point() else img.to(dt.float32)
    lead = x.shape[:-3]
    x = x.reshape(-1, *x.shape[-3:]) if x.ndim > 3 else x.unsqueeze(0)
    if fill is not None:
        x = cat((x, ones(x.shape[0], 1, h, w, dtype=x.dtype)), dim=1)
    theta = _tensor(matrix, dtype=x.dtype).reshape(1, 2, 3)
    xs = linspace(-w * 0.5 + 0.5, w * 0.5 + 0.5 - 1, steps=w, dtype=x.dtype)
    ys = linspace(-h * 0.5 + 0.5, h * 0.5 + 0.5 - 1, steps=h, dtype=x.dtype)
    base = stack((xs.expand(h, w), ys.unsqueeze(-1).expand(h, w), ones(h, w, dtype=x.dtype)),
                 dim=-1)
    scale = _tensor([0.5 * w, 0.5 * h], dtype=x.dtype)
    grid = base.view(1, h * w, 3).bmm(theta.transpose(1, 2) / scale).view(1, h, w, 2)
    y = _nn.functional.grid_sample(x, grid.expand(x.shape[0], h, w, 2), mode=mode.value,
                                   padding_mode="zeros", align_corners=False)
    if fill is not None:
        y, mask = y[:, :-1], y[:, -1:].expand(y.shape[0], y.shape[1] - 1, h, w)
        fills = [float(v) for v in fill] if isinstance(fill, (list, tuple)) else [float(fill)]
        fill_img = _tensor(fills, dtype=y.dtype).view(1, len(fills), 1, 1).expand(*y.shape)
        y = fill_img.where(mask < 0.5, y) if mode.value == "nearest" \
            else y * mask + (1.0 - mask) * fill_img
    y = y.reshape(*lead, *y.shape[-3:]) if img.ndim > 3 else y[0]
    return y if img.is_floating_point() else y.round().to(img.dtype)


def rotate(img, angle: float, interpolation=F.InterpolationMode.NEAREST, expand: bool = False,
           center=None, fill=None):
    mode = F._mode(interpolation)
    if not F._is_tensor(img):
        return F_pil.rotate(img, angle, F._PIL_MODES[mode], expand, center, fill)
    if expand:
        raise ValueError("tracec.vision: rotate(expand=True) is supported on PIL images only")
    _, h, w = F.get_dimensions(img)
    c = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]
    return _warp(img, _inverse_affine_matrix(c, -angle, [0.0, 0.0], 1.0, [0.0, 0.0]), mode, fill)


def affine(img, angle, translate, scale, shear, interpolation=F.InterpolationMode.NEAREST,
           fill=None, center=None):
    mode = F._mode(interpolation)
    if isinstance(shear, (int, float)):
        shear = [shear, 0.0]
    shear = list(shear) + [0.0] * (2 - len(shear))
    _, h, w = F.get_dimensions(img)
    if not F._is_tensor(img):
        cpil = [w * 0.5, h * 0.5] if center is None else center
        m = _inverse_affine_matrix(cpil, angle, translate, scale, shear)
        return F_pil.affine(img, m, F._PIL_MODES[mode], fill)
    c = [0.0, 0.0] if center is None else [cc - s * 0.5 for cc, s in zip(center, [w, h])]
    t = [float(v) for v in translate]
    return _warp(img, _inverse_affine_matrix(c, angle, t, scale, shear), mode, fill)
