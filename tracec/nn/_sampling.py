"""Spatial transformer sampling: ``affine_grid`` and ``grid_sample``
(bilinear or nearest, padding zeros / border / reflection, both
``align_corners`` conventions), for 4-D inputs (and 5-D grids from
``affine_grid``).

Invariant: sampling positions are computed with tensor ops from the grid
(so gradients reach the grid through the interpolation weights, as in
PyTorch), and the pixel reads are one ``gather`` per corner on the
flattened image, with out-of-range corners masked to zero.
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import ops
from tracec.tensor import Tensor

__all__ = ["affine_grid", "grid_sample", "GRID_SAMPLE_INTERPOLATION_MODES",
           "GRID_SAMPLE_PADDING_MODES"]

GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def _align_default(align_corners, what: str) -> bool:
    if align_corners is None:
        warnings.warn(f"Default {what} behavior when mode=bilinear is changed to "
                      "align_corners=False since 1.3.0. Please specify align_corners=True if "
                      "the old behavior is desired. See the documentation of grid_sample for "
                      "details.", stacklevel=3)
        return False
    return bool(align_corners)


def _base_line(n: int, align_corners: bool, dtype: dt.DType) -> np.ndarray:
    if n <= 1:
        return np.zeros(max(n, 0), dtype.np)
    v = np.linspace(-1.0, 1.0, n, dtype=np.float64)
    if not align_corners:
        v = v * (n - 1) / n
    return v.astype(dtype.np)


def affine_grid(theta, size, align_corners=None):
    """``[N, H, W, 2]`` (or ``[N, D, H, W, 3]``) sampling grid: the base grid
    of normalized pixel centres mapped by ``theta`` ``[N, 2, 3]`` (``[N, 3,
    4]``)."""
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be Tensor, not "
                        f"{type(theta).__name__}")
    align = _align_default(align_corners, "grid_sample/affine_grid")
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}. Got {list(theta.shape)}.")
        spatial = size[2:]
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}. Got {list(theta.shape)}.")
        spatial = size[2:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n = size[0]
    lines = [_base_line(s, align, theta.dtype) for s in spatial]
    grids = np.meshgrid(*lines, indexing="ij")                 # (D,) H, W each
    coords = [grids[i] for i in range(len(spatial) - 1, -1, -1)]   # x, y(, z)
    base = np.stack(coords + [np.ones_like(coords[0])], -1)
    k = base.shape[-1]
    base_t = Tensor._make(np.ascontiguousarray(base.reshape(1, -1, k)), theta.dtype)
    grid = TF.matmul(ops.broadcast_to(base_t, (n, base.size // k, k)),
                     ops.transpose(theta, (0, 2, 1)))
    return ops.reshape(grid, (n,) + tuple(spatial) + (k - 1,))


def _floor(x: Tensor) -> Tensor:
    """``floor`` of a detached float tensor (truncation, then one down
    where truncation rounded up)."""
    t = ops.cast(ops.cast(x, dt.int64), x.dtype)
    return ops.where(ops.lt(x, t), ops.sub(t, 1.0), t)


def _round_half_even(x: Tensor) -> Tensor:
    r = _floor(ops.add(x, 0.5))
    tie = ops.eq(ops.sub(r, x), 0.5)
    odd = ops.ne(ops.sub(r, ops.mul(_floor(ops.mul(r, 0.5)), 2.0)), 0.0)
    return ops.where(ops.logical_and(tie, odd), ops.sub(r, 1.0), r)


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """PyTorch's ``reflect_coordinates``: fold ``x`` into [low, high]."""
    if twice_low == twice_high:
        return TF.mul(x, 0.0)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    a = TF.abs(TF.sub(x, lo))
    flips = _floor(TF.div(a, span).detach())
    extra = TF.sub(a, TF.mul(flips, span))
    even = ops.eq(ops.sub(flips, ops.mul(_floor(ops.mul(flips, 0.5)), 2.0)), 0.0)
    return TF.where(even, TF.add(extra, lo), TF.add(TF.sub(span, extra), lo))


def _source_coord(coord: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    if align:
        x = TF.mul(TF.add(coord, 1.0), (size - 1) / 2)
    else:
        x = TF.div(TF.sub(TF.mul(TF.add(coord, 1.0), float(size)), 1.0), 2.0)
    if padding_mode == "border":
        x = TF.clamp(x, 0.0, float(size - 1))
    elif padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align else _reflect(x, -1, 2 * size - 1)
        x = TF.clamp(x, 0.0, float(size - 1))
    return x


def _read(flat: Tensor, ix: Tensor, iy: Tensor, h: int, w: int) -> Tensor:
    """``input[n, :, iy, ix]`` at integer-valued float positions ``[N, L]``,
    zero where outside the image; ``flat`` is ``[N, C, H*W]``."""
    n, c, _ = flat.shape
    inside = ops.logical_and(ops.logical_and(ops.ge(ix, 0.0), ops.le(ix, float(w - 1))),
                             ops.logical_and(ops.ge(iy, 0.0), ops.le(iy, float(h - 1))))
    pos = ops.add(ops.mul(TF.clamp(iy, 0.0, float(h - 1)), float(w)),
                  TF.clamp(ix, 0.0, float(w - 1)))
    idx = ops.cast(pos, dt.int64)
    length = idx.shape[1]
    idx = ops.broadcast_to(ops.reshape(idx, (n, 1, length)), (n, c, length))
    vals = ops.gather(flat, idx, 2)
    return TF.where(ops.reshape(inside, (n, 1, length)), vals, 0.0)


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners=None):
    """Sample ``input`` ``[N, C, H, W]`` at ``grid`` ``[N, Ho, Wo, 2]``
    (x, y in [-1, 1]) -> ``[N, C, Ho, Wo]``."""
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise TypeError("grid_sample(): input and grid must be Tensors")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'" if mode != "bicubic"
                         else "grid_sample: mode='bicubic' is not supported by tracec")
    if padding_mode not in GRID_SAMPLE_PADDING_MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    align = _align_default(align_corners, "grid_sample")
    if input.ndim != 4:
        raise NotImplementedError("grid_sample: tracec supports 4-D input (N, C, H, W) only, "
                                  f"got {input.ndim}-D")
    if grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid to have size 2 in last dimension "
                           f"and the same batch size as input, but got grid with sizes "
                           f"{list(grid.shape)} for input of size {list(input.shape)}")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1:3]
    length = ho * wo
    g = ops.reshape(grid, (n, length, 2))
    gx = ops.reshape(ops.slice_(g, (0, 0, 0), (n, length, 1), (1, 1, 1)), (n, length))
    gy = ops.reshape(ops.slice_(g, (0, 0, 1), (n, length, 2), (1, 1, 1)), (n, length))
    x = _source_coord(gx, w, padding_mode, align)
    y = _source_coord(gy, h, padding_mode, align)
    flat = ops.reshape(input, (n, c, h * w))
    if mode == "nearest":
        out = _read(flat, _round_half_even(x.detach()), _round_half_even(y.detach()), h, w)
        return ops.reshape(out, (n, c, ho, wo))
    x0, y0 = _floor(x.detach()), _floor(y.detach())
    x1, y1 = ops.add(x0, 1.0), ops.add(y0, 1.0)
    wx1, wy1 = TF.sub(x, x0), TF.sub(y, y0)           # weights of the far corners
    wx0, wy0 = TF.sub(x1, x), TF.sub(y1, y)
    out = None
    for cx, cy, wgt in ((x0, y0, TF.mul(wx0, wy0)), (x1, y0, TF.mul(wx1, wy0)),
                        (x0, y1, TF.mul(wx0, wy1)), (x1, y1, TF.mul(wx1, wy1))):
        term = TF.mul(_read(flat, cx, cy, h, w), ops.reshape(wgt, (n, 1, length)))
        out = term if out is None else TF.add(out, term)
    return ops.reshape(out, (n, c, ho, wo))
