"""Fractional max pooling (Graham, 2014): ``fractional_max_pool2d`` and
``fractional_max_pool3d``, PyTorch's pseudo-random window sequences.

Invariants: the windows of each (batch, channel) plane start at
``floor((i + u) * alpha) - floor(u * alpha)`` for ``i < out - 1`` and at
``in - k`` last, with ``u`` the plane's sample in [0, 1) and ``alpha =
(in - k) / (out - 1)``, computed in the input's dtype as PyTorch's kernel
does (so given the same ``_random_samples`` the windows are PyTorch's);
samples are drawn from tracec's generator (recorded: a compiled function
draws new windows at every call).  Values come from one ``gather`` of the
window elements and a max; indices are flat positions in the input plane.
"""
from __future__ import annotations

import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec.shape_ops import cat
from tracec.tensor import Tensor

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"]


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _starts(u: Tensor, size: int, out: int, k: int) -> Tensor:
    """``[N, C, out]`` int64 window starts along one dimension."""
    last = creation.full(tuple(u.shape) + (1,), size - k, dtype=dt.int64)
    if out == 1:
        return last
    npd = u.dtype.np.type
    alpha = float(npd(size - k) / npd(out - 1))      # in the input's dtype, as ATen
    i = creation.arange(out - 1, dtype=u.dtype)
    u = u.unsqueeze(-1)
    seq = ((i + u) * alpha).floor().to(dt.int64) - (u * alpha).floor().to(dt.int64)
    return cat([seq, last], -1)


def _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                _random_samples, nsp: int, name: str):
    if input.dim() not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"{name}(): Expected {nsp + 1}D or {nsp + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    unbatched = input.dim() == nsp + 1
    x = input.unsqueeze(0) if unbatched else input
    k = _tuple(kernel_size, nsp)
    sp = tuple(x.shape[2:])
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output_size or an "
                             f"output_ratio")
        ratio = _tuple(output_ratio, nsp)
        output_size = [int(s * r) for s, r in zip(sp, ratio)]
    out = _tuple(output_size, nsp)
    for d, (o, kk, s) in enumerate(zip(out, k, sp)):
        if o + kk - 1 > s:
            what = ("time", "height", "width")[3 - nsp + d]
            raise RuntimeError(f"{name}(): pool {what} {kk} too large relative to input "
                               f"{what} {s}")
    n, c = x.shape[:2]
    if _random_samples is None:
        _random_samples = creation.rand(n, c, nsp, dtype=x.dtype)
    if _random_samples.shape[1] != c:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if _random_samples.shape[0] < n:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    _random_samples = _random_samples[:n]     # PyTorch reads the first n rows only
    # ATen's sample order: W first, then H in 2-D; T, H, W in 3-D.
    per_dim = [_random_samples[:, :, nsp - 1 - d if nsp == 2 else d] for d in range(nsp)]
    strides = [int(np.prod(sp[d + 1:])) for d in range(nsp)]
    flat = None
    for d in range(nsp):
        starts = _starts(per_dim[d], sp[d], out[d], k[d])            # [N, C, out_d]
        pos = starts.unsqueeze(-1) + creation.arange(k[d])           # [N, C, out_d, k_d]
        shape = [n, c] + [1] * (2 * nsp)
        shape[2 + d], shape[2 + nsp + d] = out[d], k[d]
        term = pos.reshape(shape) * strides[d]
        flat = term if flat is None else flat + term
    flat = flat.expand(n, c, *out, *k)
    cols = x.reshape(n, c, -1).gather(2, flat.reshape(n, c, -1))
    cols = cols.reshape(n, c, *out, int(np.prod(k)))
    values, arg = cols.max(-1)
    if unbatched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    idx = flat.reshape(n, c, *out, -1).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    return values, (idx.squeeze(0) if unbatched else idx)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples, 2, "fractional_max_pool2d")


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples, 3, "fractional_max_pool3d")


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)
