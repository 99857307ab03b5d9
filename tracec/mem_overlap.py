"""PyTorch's memory-overlap rules for writes, on tracec's eager tensors
(NumPy arrays).

Invariants:
  * ``partial_overlap(out, src)`` is PyTorch's ``get_overlap_status(...) ==
    PARTIAL`` (``ATen/MemoryOverlap.cpp``): both arrays non-overlapping and
    dense, their byte ranges intersecting, and not the same range with the
    same strides (FULL, allowed: ``x.add_(x)``).  Arrays PyTorch cannot judge
    (not dense: TOO_HARD) never count.
  * ``writable_alias(view)`` is a writable array over exactly ``view``'s
    memory (a read-only NumPy broadcast view, or a view of one), or None
    where no writable owner holds that memory.
  * ``write_shared(view, new)`` writes ``new`` into ``view`` whose elements
    may share memory (an expanded tensor): each memory location gets one of
    the values written to it (an element that changed wins over one that
    kept the old value), as PyTorch's kernels leave it.
This module knows NumPy only; tensors call it with their ``_data``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PARTIAL_MSG", "INTERNAL_MSG", "partial_overlap", "writable_alias", "write_shared",
           "internal_overlap"]

PARTIAL_MSG = ("unsupported operation: some elements of the input tensor and the written-to "
               "tensor refer to a single memory location. Please clone() the tensor before "
               "performing the operation.")
INTERNAL_MSG = ("unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.")


def _dense(a: np.ndarray) -> bool:
    """PyTorch's ``is_non_overlapping_and_dense``: some order of the dims is
    C-contiguous (size-1 dims ignored)."""
    dims = sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n != 1)
    expected = a.itemsize
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def _bounds(a: np.ndarray) -> tuple:
    start = a.__array_interface__["data"][0]
    lo = hi = 0
    for s, n in zip(a.strides, a.shape):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return start + lo, start + hi + a.itemsize


def internal_overlap(a: np.ndarray) -> bool:
    """More than one element at one address: a stride-0 dim of size > 1."""
    return any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape))


def partial_overlap(out: np.ndarray, src: np.ndarray) -> bool:
    if out is src or type(out) is not np.ndarray or type(src) is not np.ndarray \
            or not out.size or not src.size:
        return False
    lo, hi = _bounds(out)
    slo, shi = _bounds(src)
    if shi <= lo or hi <= slo or not _dense(out) or not _dense(src):
        return False
    return not ((lo, hi) == (slo, shi) and out.strides == src.strides)


def writable_alias(view: np.ndarray):
    owner = view
    while not owner.flags.writeable and isinstance(owner.base, np.ndarray):
        owner = owner.base
    if not owner.flags.writeable or not owner.flags.c_contiguous:
        return None
    offset = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    try:
        return np.ndarray(view.shape, view.dtype, buffer=owner, offset=offset,
                          strides=view.strides)
    except (TypeError, ValueError):
        return None


def write_shared(view: np.ndarray, new: np.ndarray) -> bool:
    """``view[...] = new`` through ``writable_alias``; False where there is none."""
    w = writable_alias(view)
    if w is None:
        return False
    try:
        new = np.broadcast_to(np.asarray(new, dtype=view.dtype), view.shape)
    except ValueError:      # (a result larger than the view: the caller's shape error)
        return False
    if not internal_overlap(view):
        w[...] = new
        return True
    changed = new != view
    if view.dtype.kind in "fc":     # (NaN kept as NaN is no change)
        changed &= ~(np.isnan(new) & np.isnan(view))
    w[changed] = new[changed]
    return True
