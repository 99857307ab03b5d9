"""Spatial transformer sampling: ``affine_grid`` and ``grid_sample``
(bilinear, nearest or bicubic (4-D), padding zeros / border / reflection,
both ``align_corners`` conventions), for 4-D and 5-D inputs.

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
from tracec import graph, graph_hooks
from tracec import ops
from tracec.tensor import Tensor

__all__ = ["affine_grid", "grid_sample", "GRID_SAMPLE_INTERPOLATION_MODES",
           "GRID_SAMPLE_PADDING_MODES"]

GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def _align_default(align_corners, what: str) -> bool:
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to "
                      "align_corners=False since 1.3.0. Please specify align_corners=True if "
                      "the old behavior is desired. See the documentation of grid_sample for "
                      "details.", stacklevel=3)
        return False
    return bool(align_corners)


def _base_line(n: int, align_corners: bool, dtype: dt.DType) -> np.ndarray:
    """PyTorch's ``linspace_from_neg_one``, rounded as it rounds: a
    ``linspace(-1, 1)`` in ``dtype`` (from both ends towards the middle),
    then ``* (n - 1) / n`` in ``dtype`` without align_corners."""
    if n <= 1:
        return np.zeros(max(n, 0), dtype.np)
    ty = np.dtype(dtype.np).type
    step = ty(2.0) / ty(n - 1)
    idx = np.arange(n)
    half = n // 2
    v = np.where(idx < half, ty(-1.0) + step * idx.astype(ty),
                 ty(1.0) - step * (n - 1 - idx).astype(ty)).astype(ty)
    if not align_corners:
        v = (v * ty(n - 1)).astype(ty) / ty(n)
    return v.astype(ty)


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
    given = size
    size = [int(s) for s in size]
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{given}. Got {theta.shape}.")
        spatial = size[2:]
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{given}. Got {theta.shape}.")
        spatial = size[2:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {given}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {given}")
    n = size[0]
    lines = [_base_line(s, align, theta.dtype) for s in spatial]
    grids = np.meshgrid(*lines, indexing="ij")                 # (D,) H, W each
    coords = [grids[i] for i in range(len(spatial) - 1, -1, -1)]   # x, y(, z)
    base = np.stack(coords + [np.ones_like(coords[0])], -1)
    k = base.shape[-1]
    base_t = Tensor._make(np.ascontiguousarray(base.reshape(1, -1, k)), theta.dtype)
    with graph_hooks.packs_deferred():     # (the constant is held before saved-tensor hooks see it)
        grid = TF.matmul(ops.broadcast_to(base_t, (n, base.size // k, k)),
                         ops.transpose(theta, (0, 2, 1)))
        graph.hold_constant(grid, 0)   # PyTorch's affine_grid saves no tensor
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


def _unnormalize(coord: Tensor, size: int, align: bool, vectorized: bool) -> Tensor:
    """Grid coordinate in [-1, 1] -> source pixel position.  PyTorch's CPU
    2-D kernel rounds as (x + 1) * scale (- 0.5); its 3-D kernel as
    ((x + 1) * size - 1) / 2 (and ((x + 1) / 2) * (size - 1)): positions
    that land exactly on a pixel do so in both (the gradient jumps there)."""
    if align:
        if vectorized:
            return TF.mul(TF.add(coord, 1.0), (size - 1) / 2)
        return TF.mul(TF.div(TF.add(coord, 1.0), 2.0), float(size - 1))
    if vectorized:
        return TF.sub(TF.mul(TF.add(coord, 1.0), size / 2), 0.5)
    return TF.div(TF.sub(TF.mul(TF.add(coord, 1.0), float(size)), 1.0), 2.0)


def _pad_coord(x: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    """PyTorch's ``compute_coordinates``: border clips, reflection folds."""
    if padding_mode == "border":
        x = TF.clamp(x, 0.0, float(size - 1))
    elif padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align else _reflect(x, -1, 2 * size - 1)
        x = TF.clamp(x, 0.0, float(size - 1))
    return x


def _read(flat: Tensor, idx: list, sizes: tuple) -> Tensor:
    """``input[n, :, i0, i1(, i2)]`` at integer-valued float positions
    ``[N, L]`` (one per spatial axis), zero where outside; ``flat`` is
    ``[N, C, prod(sizes)]``."""
    n, c, _ = flat.shape
    inside = None
    pos = None
    stride = 1
    for i, size in reversed(list(zip(idx, sizes))):
        ok = ops.logical_and(ops.ge(i, 0.0), ops.le(i, float(size - 1)))
        inside = ok if inside is None else ops.logical_and(inside, ok)
        term = ops.mul(TF.clamp(i, 0.0, float(size - 1)), float(stride))
        pos = term if pos is None else ops.add(pos, term)
        stride *= size
    index = ops.cast(pos, dt.int64)
    length = index.shape[1]
    index = ops.broadcast_to(ops.reshape(index, (n, 1, length)), (n, c, length))
    vals = ops.gather(flat, index, 2)
    return TF.where(ops.reshape(inside, (n, 1, length)), vals, 0.0)


_CUBIC_A = -0.75


def _cubic_weights(t: Tensor) -> list:
    """PyTorch's ``get_cubic_upsample_coefficients`` (A = -0.75) at ``t`` in [0, 1)."""
    a = _CUBIC_A

    def near(x):     # |x| <= 1
        return TF.add(TF.mul(TF.mul(TF.sub(TF.mul(x, a + 2), a + 3), x), x), 1.0)

    def far(x):      # 1 < |x| < 2
        return TF.sub(TF.mul(TF.add(TF.mul(TF.sub(TF.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)
    return [far(TF.add(t, 1.0)), near(t), near(TF.sub(1.0, t)), far(TF.sub(2.0, t))]


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners=None):
    """Sample ``input`` ``[N, C, H, W]`` at ``grid`` ``[N, Ho, Wo, 2]`` (x, y
    in [-1, 1]) -> ``[N, C, Ho, Wo]``, or ``[N, C, D, H, W]`` at ``[N, Do, Ho,
    Wo, 3]`` (x, y, z); bicubic for 4-D input only, as in PyTorch."""
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise TypeError("grid_sample(): input and grid must be Tensors")
    if mode not in GRID_SAMPLE_INTERPOLATION_MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in GRID_SAMPLE_PADDING_MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    align = _align_default(align_corners, "grid_sample")
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    nd = input.ndim - 2
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last "
                           f"dimension, but got grid with sizes {list(grid.shape)}")
    kind = 4 if input.ndim == 4 else 5
    if input.ndim != kind or grid.ndim != kind:
        raise RuntimeError(f"grid_sampler(): expected {kind}D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    if nd == 3 and mode == "bicubic":
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    n, c = input.shape[:2]
    sizes = tuple(input.shape[2:])                  # (D,) H, W
    out_sp = tuple(grid.shape[1:-1])
    length = 1
    for s_ in out_sp:
        length *= s_
    g = ops.reshape(grid, (n, length, nd))
    # grid component k (x, y, z) addresses spatial axis nd - 1 - k
    comps = [ops.reshape(ops.slice_(g, (0, 0, k), (n, length, k + 1), (1, 1, 1)), (n, length))
             for k in range(nd)]
    raw = [_unnormalize(comps[nd - 1 - a], sizes[a], align, nd == 2) for a in range(nd)]
    flat = ops.reshape(input, (n, c, int(np.prod(sizes))))
    if mode == "bicubic":
        base = [_floor(r.detach()) for r in raw]
        ws = [_cubic_weights(TF.sub(r, b)) for r, b in zip(raw, base)]   # per axis, 4 taps
        out = None
        for j in range(4):          # y taps
            for i in range(4):      # x taps
                ty = _pad_coord(ops.add(base[0], float(j - 1)), sizes[0], padding_mode, align)
                tx = _pad_coord(ops.add(base[1], float(i - 1)), sizes[1], padding_mode, align)
                wgt = TF.mul(ws[0][j], ws[1][i])
                term = TF.mul(_read(flat, [ops.cast(ops.cast(ty, dt.int64), ty.dtype),
                                           ops.cast(ops.cast(tx, dt.int64), tx.dtype)], sizes),
                              ops.reshape(wgt, (n, 1, length)))
                out = term if out is None else TF.add(out, term)
        return ops.reshape(out, (n, c) + out_sp)
    src = [_pad_coord(r, size, padding_mode, align) for r, size in zip(raw, sizes)]
    if mode == "nearest":
        out = _read(flat, [_round_half_even(x.detach()) for x in src], sizes)
        if grid.requires_grad:
            # PyTorch's backward gives the grid a zero gradient (not none):
            # a zero-weighted, bounded dependence on it
            out = TF.add(out, TF.mul(TF.clamp(TF.sum(grid), -1.0, 1.0), 0.0))
        return ops.reshape(out, (n, c) + out_sp)
    lo = [_floor(x.detach()) for x in src]
    hi = [ops.add(x0, 1.0) for x0 in lo]
    w_hi = [TF.sub(x, x0) for x, x0 in zip(src, lo)]          # weights of the far corners
    w_lo = [TF.sub(x1, x) for x, x1 in zip(src, hi)]
    out = None
    for corner in range(2 ** nd):
        bits = [(corner >> (nd - 1 - a)) & 1 for a in range(nd)]
        idx = [hi[a] if b else lo[a] for a, b in enumerate(bits)]
        wgt = None
        for a, b in enumerate(bits):
            w = w_hi[a] if b else w_lo[a]
            wgt = w if wgt is None else TF.mul(wgt, w)
        term = TF.mul(_read(flat, idx, sizes), ops.reshape(wgt, (n, 1, length)))
        out = term if out is None else TF.add(out, term)
    return ops.reshape(out, (n, c) + out_sp)
