"""Resampling: ``pixel_shuffle pixel_unshuffle channel_shuffle interpolate`` (and the
deprecated ``upsample*`` aliases), re-exported by ``functional``.

Invariant: composites of ``reshape``/``transpose`` (pixel shuffles) and of
``take`` with index tensors fixed by the shapes (interpolation: nearest
picks one source per output position, linear blends two, one spatial axis
at a time), so gradients and ``tracec.compile`` come for free.  Source
positions follow PyTorch's CPU kernels exactly, including the use of a
given ``scale_factor`` rather than the size ratio.
"""
from __future__ import annotations

import math

import numpy as np

from tracec.symbolic import Sym
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import ops
from tracec import shape_ops as S
from tracec.graph import keep_saved
from tracec.tensor import Tensor
from tracec.tensor_meta import keep_memory_format

__all__ = ["pixel_shuffle", "pixel_unshuffle", "interpolate", "upsample", "upsample_nearest",
           "upsample_bilinear", "channel_shuffle", "native_channel_shuffle"]


def _check_shuffle(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {x.ndim} dimension(s)")


def pixel_shuffle(input, upscale_factor: int):
    """``[*, C*r*r, H, W] -> [*, C, H*r, W*r]``."""
    _check_shuffle(input, "pixel_shuffle")
    r = int(upscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    k = len(lead)
    y = ops.reshape(input, (*lead, c // (r * r), r, r, h, w))
    perm = tuple(range(k)) + tuple(k + i for i in (0, 3, 1, 4, 2))
    y = ops.transpose(y, perm)
    return keep_memory_format(TF._named(ops.reshape(y, (*lead, c // (r * r), h * r, w * r)),
                                        "PixelShuffleBackward0"), input)


def pixel_unshuffle(input, downscale_factor: int):
    """``[*, C, H*r, W*r] -> [*, C*r*r, H, W]``."""
    _check_shuffle(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    for size, what, i in ((h, "height", -2), (w, "width", -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({i})={size} is not divisible "
                               f"by {r}")
    k = len(lead)
    y = ops.reshape(input, (*lead, c, h // r, r, w // r, r))
    perm = tuple(range(k)) + tuple(k + i for i in (0, 2, 4, 1, 3))
    y = ops.transpose(y, perm)
    return TF._named(ops.reshape(y, (*lead, c * r * r, h // r, w // r)),
                     "PixelUnshuffleBackward0")


_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_LINEAR_RANK = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _source_scale(in_size, out_size, scale, align_corners):
    """PyTorch's ``area_pixel_compute_scale``."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _nearest_index(in_size, out_size, scale, exact):
    s = 1.0 / scale if scale is not None and scale > 0 else in_size / out_size
    dst = np.arange(out_size, dtype=np.float32)
    s = np.float32(s)
    src = np.floor((dst + np.float32(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear_weights(in_size, out_size, scale, align_corners, np_dtype):
    """Lower and upper source index and the upper one's weight, per output."""
    # PyTorch computes positions in the input's accumulate type (float for
    # float32, double for float64).
    s = np_dtype.type(_source_scale(in_size, out_size, scale, align_corners))
    dst = np.arange(out_size, dtype=np_dtype)
    if align_corners:
        src = dst * s
    else:
        src = np.maximum(s * (dst + np_dtype.type(0.5)) - np_dtype.type(0.5), 0)
    lo = np.minimum(src.astype(np.int64), in_size - 1)
    hi = np.minimum(lo + 1, in_size - 1)
    lam = np.clip(src - lo, 0, 1).astype(np_dtype)
    return lo, hi, lam


def _const(arr, like):
    return Tensor._from_data(arr, dtype=like.dtype if arr.dtype.kind == "f" else None)


def _cubic_taps(in_size, out_size, scale, align_corners, np_dtype):
    """PyTorch's bicubic (cubic convolution, A = -0.75): per output, the four
    source indices (clamped to the edge) and their weights."""
    a = -0.75
    s = np_dtype.type(_source_scale(in_size, out_size, scale, align_corners))
    dst = np.arange(out_size, dtype=np_dtype)
    # (no clamp at 0 for cubic: area_pixel_compute_source_index(cubic=True))
    src = dst * s if align_corners else s * (dst + np_dtype.type(0.5)) - np_dtype.type(0.5)
    base = np.floor(src)
    t = (src - base).astype(np.float64)

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    idx = [np.clip(base.astype(np.int64) + k, 0, in_size - 1) for k in (-1, 0, 1, 2)]
    return idx, [w.astype(np_dtype) for w in weights]


def _aa_bilinear(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _aa_bicubic(x, a=-0.5):   # Pillow's (and ATen's antialiased) a = -0.5
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def aa_weights(n_in: int, n_out: int, mode: str, antialias: bool = True,
               scale=None, align_corners: bool = False) -> np.ndarray:
    """(n_out, n_in) float64 taps of ATen's separable antialiased resampling
    (``_upsample_{bilinear,bicubic}2d_aa``, Pillow's filters): row ``i`` holds
    output ``i``'s normalized taps.  ``scale`` is the user's scale factor (None:
    from the sizes); with ``antialias=False`` the filter is not widened."""
    filt, size = (_aa_bilinear, 2) if mode == "bilinear" else (_aa_bicubic, 4)
    s = _source_scale(n_in, n_out, scale, align_corners)
    wide = antialias and s >= 1.0
    support = size / 2 * s if wide else size / 2
    invscale = 1.0 / s if wide else 1.0
    w = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        taps = filt((np.arange(lo, hi) - center + 0.5) * invscale)
        total = taps.sum()
        w[i, lo:hi] = taps / total if total != 0 else taps
    return w


def _resize_axis_aa(x, axis, out_size, scale, mode, align_corners):
    """One spatial axis of an antialiased resize: a product with the taps."""
    in_size = x.shape[axis]
    if isinstance(in_size, Sym) or isinstance(out_size, Sym):
        in_size, out_size = int(in_size), int(out_size)
    w = _const(aa_weights(in_size, out_size, mode, True, scale, align_corners)
               .astype(x.dtype.np), x)
    perm = [i for i in range(x.ndim) if i != axis] + [axis]
    y = TF.matmul(ops.transpose(x, tuple(perm)), ops.transpose(w, (1, 0)))
    back = [0] * x.ndim
    for i, p in enumerate(perm):
        back[p] = i
    return ops.transpose(y, tuple(back))


def _size_ratio(x, a, b, dtype):
    """``a / b`` for sizes (symbolic ones: computed at run time) in float64,
    then rounded to ``dtype``: the value Python's division of the numbers
    gives, as PyTorch's kernels take it."""
    r = ops.div(ops.full((), a, dt.float64, like=x), b)
    return ops.cast(r, dtype)


def _symbolic_taps(x, in_size, out_size, scale, mode, align_corners):
    """``_nearest_index`` or ``_linear_weights`` for symbolic sizes, as
    primitives over an iota (one trace serves every size): the same float
    operations in the same order, so the same indices and weights."""
    if mode in ("nearest", "nearest-exact"):
        fd = dt.float32
        s = float(np.float32(1.0 / scale)) if scale is not None and scale > 0 else \
            _size_ratio(x, in_size, out_size, fd)
        dst = ops.iota((out_size,), fd, 0, like=x)
        src = ops.mul(ops.add(dst, 0.5), s) if mode == "nearest-exact" else ops.mul(dst, s)
        return ops.minimum(ops.cast(src, dt.int64), in_size - 1)   # (src >= 0: floor)
    fd = x.dtype
    if align_corners:
        s = _size_ratio(x, in_size - 1, out_size - 1, fd) if out_size > 1 else 0.0
    elif scale is not None and scale > 0:
        s = float(fd.np.type(1.0 / scale))
    else:
        s = _size_ratio(x, in_size, out_size, fd)
    dst = ops.iota((out_size,), fd, 0, like=x)
    if align_corners:
        src = ops.mul(dst, s)
    else:
        src = ops.maximum(ops.sub(ops.mul(ops.add(dst, 0.5), s), 0.5), 0.0)
    lo = ops.minimum(ops.cast(src, dt.int64), in_size - 1)
    hi = ops.minimum(ops.add(lo, 1), in_size - 1)
    lam = ops.minimum(ops.maximum(ops.sub(src, ops.cast(lo, fd)), 0.0), 1.0)
    return lo, hi, lam


def _scaled_size(n, s: float):
    """``floor(n * s)``, the output size PyTorch computes in double: for a
    symbolic ``n`` and a scale that is a short binary fraction p / 2**k
    (2, 0.5, 1.5), ``(n * p) // 2**k``, equal to it while ``n * p`` is
    below 2**53; any other scale needs the number (specialized)."""
    if isinstance(n, Sym) and s > 0 and math.isfinite(s):
        p, q = float(s).as_integer_ratio()
        if p < 2 ** 20:
            return (n * p) // q
    return int(math.floor(n * s))


def _resize_axis(x, axis, out_size, scale, mode, align_corners):
    in_size = x.shape[axis]
    symbolic = isinstance(in_size, Sym) or isinstance(out_size, Sym)
    if symbolic and mode in ("nearest", "nearest-exact") and in_size != out_size:
        idx = _symbolic_taps(x, in_size, out_size, scale, mode, align_corners)
        return ops.take(x, idx, axis)
    if symbolic and mode in _LINEAR_RANK and x.dtype in (dt.float32, dt.float64):
        if in_size == out_size:
            return x  # PyTorch copies the input when a linear axis keeps its size
        lo, hi, lam = _symbolic_taps(x, in_size, out_size, scale, mode, align_corners)
        shape = tuple(out_size if i == axis else 1 for i in range(x.ndim))
        w1 = ops.reshape(lam, shape)
        a = ops.take(x, lo, axis)
        b = ops.take(x, hi, axis)
        return TF.add(TF.mul(a, TF.sub(1.0, w1)), TF.mul(b, w1))
    if symbolic:
        # The taps are constants computed from the sizes (NumPy): a
        # symbolic size is specialized (int(): a guard and a note).
        in_size, out_size = int(in_size), int(out_size)
    if mode == "bicubic":
        idx, weights = _cubic_taps(in_size, out_size, scale, align_corners, x.dtype.np)
        shape = tuple(out_size if i == axis else 1 for i in range(x.ndim))
        y = None
        for i, w in zip(idx, weights):
            term = TF.mul(ops.take(x, _const(i, x), axis), ops.reshape(_const(w, x), shape))
            y = term if y is None else TF.add(y, term)
        return y
    if in_size == out_size and mode not in ("nearest", "nearest-exact"):
        return x  # PyTorch copies the input when a linear axis keeps its size
    if mode in ("nearest", "nearest-exact"):
        idx = _nearest_index(in_size, out_size, scale, mode == "nearest-exact")
        if in_size == out_size and np.array_equal(idx, np.arange(in_size)):
            return x
        return ops.take(x, _const(idx, x), axis)
    lo, hi, lam = _linear_weights(in_size, out_size, scale, align_corners, x.dtype.np)
    shape = tuple(out_size if i == axis else 1 for i in range(x.ndim))
    w1 = ops.reshape(_const(lam, x), shape)
    a = ops.take(x, _const(lo, x), axis)
    b = ops.take(x, _const(hi, x), axis)
    return TF.add(TF.mul(a, TF.sub(1.0, w1)), TF.mul(b, w1))


def _check_kernel_dtype(x, mode, antialias):
    """The dtypes PyTorch's CPU resampling kernels take, refused with their
    NotImplementedError (the kernel's name, as PyTorch's dispatch names it):
    floating types everywhere (not half / bfloat16 when antialiased), uint8
    also for nearest, bilinear and bicubic, nothing else."""
    d = x.dtype
    if d.is_floating_point and not (antialias and d in (dt.float16, dt.bfloat16)):
        return
    if d is dt.uint8 and mode in ("nearest", "nearest-exact", "bilinear", "bicubic"):
        return
    if antialias:
        kernel = "compute_index_ranges_weights"
    elif mode == "area":
        kernel = "adaptive_avg_pool3d_cpu" if x.ndim == 5 else "adaptive_avg_pool2d"
    elif mode in ("nearest", "nearest-exact"):
        kernel = "upsample_nearest2d_channels_last" if x.ndim == 4 else \
            "compute_indices_weights_nearest"
    elif mode == "bilinear" and x.ndim == 4:
        kernel = "upsample_bilinear2d_channels_last"
    elif mode == "bicubic":
        kernel = "compute_indices_weights_cubic"
    elif mode in ("linear", "trilinear"):
        kernel = "compute_indices_weights_linear"
    else:
        return   # a mode or rank error comes first
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{dt.scalar_type_name(d)}'")


def _uint8_fixed_point(x, sizes, scales, mode, align_corners, antialias):
    """uint8 bilinear / bicubic as PyTorch's CPU kernel computes it
    (Pillow's fixed-point passes, ``vision.transforms._resize``), eager
    only.  Not implemented (refused rather than computed differently): the
    non-antialiased taps with align_corners=True, and plain bicubic's with a
    scale factor."""
    from tracec.tensor import concrete
    from tracec.vision.transforms._resize import resize_uint8
    if not antialias and (align_corners or (mode == "bicubic" and any(
            s is not None for s in scales))):
        what = "align_corners=True" if align_corners else "a scale_factor"
        raise NotImplementedError(f"tracec: interpolate(mode='{mode}') of a uint8 tensor with "
                                  f"{what} is not supported; convert the input to float first")
    a = concrete(x, f"interpolate(mode='{mode}') of a uint8 tensor (eager only)")
    out = resize_uint8(a, tuple(int(s) for s in sizes), mode, antialias, tuple(scales),
                       bool(align_corners))
    return Tensor._make(out, dt.uint8)


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",
                align_corners=None, recompute_scale_factor=None, antialias: bool = False):
    """``torch.nn.functional.interpolate`` for modes nearest, nearest-exact,
    linear (3-D), bilinear and bicubic (4-D), trilinear (5-D) and area."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    nsp = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * max(nsp, 0)
        if len(sizes) != nsp:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(input.shape[2:])} and output size of {size}. Please "
                             "provide input tensor in (N, C, d1, d2, ...,dK) format and output "
                             "size in (o1, o2, ...,oK) format.")
        sizes = [s if isinstance(s, Sym) else int(s) for s in sizes]
        scales = [None] * nsp
    elif scale_factor is not None:
        scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) \
            else [scale_factor] * max(nsp, 0)
        if len(scales) != nsp:
            raise ValueError(f"Input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(input.shape[2:])} and scale_factor of shape "
                             f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, "
                             "...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
        scales = [float(s) for s in scales]
        sizes = [_scaled_size(n, s) for n, s in zip(input.shape[2:], scales)]
        if recompute_scale_factor:
            scales = [None] * nsp
    else:
        raise ValueError("either size or scale_factor should be defined")
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    _check_kernel_dtype(input, mode, antialias)
    if mode == "area":   # PyTorch: adaptive average pooling to the output size
        from tracec.nn import functional as F
        pool = {3: F.adaptive_avg_pool1d, 4: F.adaptive_avg_pool2d,
                5: F.adaptive_avg_pool3d}.get(input.ndim)
        if pool is not None:
            return pool(input, tuple(sizes))
    supported = ("nearest", "nearest-exact", "bicubic") + tuple(_LINEAR_RANK)
    if mode == "bicubic" and input.ndim != 4:
        raise NotImplementedError(f"Got {input.ndim}D input, but bicubic mode needs 4D input")
    if input.ndim not in (3, 4, 5) or mode not in supported:
        if input.ndim in (3, 4, 5) and mode in _MODES:
            raise NotImplementedError(f"interpolate: mode '{mode}' is not supported by tracec "
                                      "(nearest, nearest-exact, linear, bilinear, bicubic, "
                                      "trilinear, area are)")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.ndim}D) for the modes: nearest | linear | "
                                  "bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if mode in _LINEAR_RANK and input.ndim != _LINEAR_RANK[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_LINEAR_RANK[mode]}D input")
    for s in sizes:
        if s <= 0:
            raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                               f"({', '.join(map(str, input.shape[2:]))}) and output "
                               f"({', '.join(map(str, sizes))})")
    if input.dtype is dt.uint8 and mode in ("bilinear", "bicubic"):
        return _uint8_fixed_point(input, sizes, scales, mode, align_corners, antialias)
    # PyTorch's kernels interpolate a bfloat16 / float16 input in float32
    # and round once (axis by axis here, so the float32 is kept in between)
    half = input.dtype in (dt.bfloat16, dt.float16)
    y = ops.cast(input, dt.float32) if half else input
    resize = _resize_axis_aa if antialias else _resize_axis
    for i, (n, s) in enumerate(zip(sizes, scales)):
        y = resize(y, 2 + i, n, s, mode, align_corners)
    # (PyTorch's upsampling kernels lay the result out as the input
    # suggests: channels-last stays so)
    if antialias:
        name = "Upsample" + mode.title() + "2DAaBackward0"
        return _saving_nothing(keep_memory_format(TF._named(ops.cast(y, input.dtype), name),
                                                  input), input)
    if y is input or half:
        y = ops.cast(y, input.dtype)
    name = {"nearest": "UpsampleNearest", "nearest-exact": "UpsampleNearestExact"}.get(
        mode, "Upsample" + mode.title()) + f"{nsp}DBackward0"
    return _saving_nothing(keep_memory_format(TF._named(y, name), input), input)


def _saving_nothing(out, input):
    """PyTorch's upsampling nodes save no tensors (sizes and scales only):
    the indices and weights built here are kept past a backward, so a
    second backward without retain_graph works, as PyTorch's."""
    keep_saved(out, (input,))
    return out


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def channel_shuffle(input, groups: int):
    """``[N, C, *]``: channels seen as ``[groups, C / groups]``, transposed."""
    _check_shuffle(input, "channel_shuffle")
    x = input
    if groups <= 0:
        raise ValueError(f"Number of groups to divide channels in must be positive. Value of "
                         f"groups:{groups}")
    n, c = x.shape[:2]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    rest = tuple(x.shape[2:])
    y = ops.reshape(x, (n, groups, c // groups) + rest)
    y = ops.transpose(y, (0, 2, 1) + tuple(range(3, 3 + len(rest))))
    return ops.reshape(y, tuple(x.shape))


native_channel_shuffle = channel_shuffle
