"""Fresh output arrays of compiled calls from recycled memory.

A compiled call returns new arrays.  ``np.empty`` of a large array maps
fresh pages from the kernel, and the kernel's first write to each page
faults (a 64 MB output: 16k faults, more time than the kernel's own
work).  Like PyTorch's caching allocator on GPUs, this pool keeps the
memory of large outputs once nothing refers to them any more, by size
bucket, and hands it out again: the pages are already mapped.  Blocks of
8 MB and more are 2 MB aligned and advised as huge pages where the kernel
allows (``madvise``), so even their first use faults less.

Each array handed out is made from a small owner object (its ``base``)
that describes the block's memory; every view of the array refers back to
the array, so the owner lives as long as anything can reach that memory:
a view, a tensor holding the array, a tensor saved for backward.  Only
when the owner is collected (``_Owner.__del__``) does its block return to
the free list.

Invariant: a block is on the free list only while no Python object refers
to memory in it; ``empty`` never hands out memory that something can still
read or write.  At most ``IDLE_PER_BUCKET`` idle blocks per size and
``IDLE_BYTES`` in all are kept; others are given back to NumPy.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

__all__ = ["empty", "fresh", "MIN_BYTES", "stats", "clear"]

#: Outputs smaller than this come from ``np.empty`` (malloc reuses small
#: blocks itself: only large allocations map fresh pages).
MIN_BYTES = 1 << 20
#: Idle blocks kept per bucket, and idle bytes kept in all.
IDLE_PER_BUCKET = 4
IDLE_BYTES = 1 << 30
_HUGE = 2 << 20
_MADV_HUGEPAGE = 14

# Reentrant: a garbage collection run inside a locked section may free an
# owner, whose ``__del__`` takes the lock again on the same thread.
_lock = threading.RLock()
_free: dict = {}        # bucket bytes -> [(address, raw array)]
_idle = [0]             # bytes on the free lists
_counts = {"allocated": 0, "reused": 0, "released": 0}


def _madvise():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        f = libc.madvise
        f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        f.restype = ctypes.c_int
        return f
    except (OSError, AttributeError):
        return None


_advise = _madvise()


def _bucket(nbytes: int) -> int:
    """Size classes: powers of two up to 8 MB, then multiples of 2 MB (at
    most 1/4 wasted below 8 MB, under 2 MB above)."""
    if nbytes <= 8 << 20:
        return 1 << max(nbytes - 1, 1).bit_length()
    return -(-nbytes // _HUGE) * _HUGE


class _Owner:
    """The ``base`` of one array handed out: its block (address and the raw
    NumPy array that owns the memory), returned to the pool when this dies."""
    __slots__ = ("__array_interface__", "addr", "raw", "bucket", "array_id")

    def __del__(self):
        try:
            _release(self.bucket, self.addr, self.raw)
        except Exception:   # interpreter shutdown: module globals already gone
            pass


def _release(bucket: int, addr: int, raw) -> None:
    with _lock:
        lst = _free.get(bucket)
        if lst is None:
            lst = _free[bucket] = []
        if len(lst) < IDLE_PER_BUCKET and _idle[0] + bucket <= IDLE_BYTES:
            lst.append((addr, raw))
            _idle[0] += bucket
        else:
            _counts["released"] += 1   # ``raw`` goes with this frame


def _new_block(bucket: int):
    align = _HUGE if bucket >= 8 << 20 else 4096
    raw = np.empty(bucket + align, np.uint8)
    addr = raw.ctypes.data
    addr += (-addr) % align
    if align == _HUGE and _advise is not None:
        _advise(addr, bucket, _MADV_HUGEPAGE)   # best effort: ignored where unsupported
    return addr, raw


def empty(shape: tuple, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array, like ``np.empty(shape, dtype)``,
    whose memory may be a block an earlier array no longer uses."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    bucket = _bucket(nbytes)
    with _lock:
        lst = _free.get(bucket)
        block = lst.pop() if lst else None
        if block is not None:
            _idle[0] -= bucket
    if block is None:
        block = _new_block(bucket)
        _counts["allocated"] += 1
    else:
        _counts["reused"] += 1
    owner = _Owner()
    owner.addr, owner.raw = block
    owner.bucket = bucket
    owner.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str,
                                 "data": (owner.addr, False), "version": 3}
    a = np.asarray(owner)
    if a.dtype != dtype:            # a dtype the interface's typestr cannot name exactly
        a = a.view(dtype)
    owner.array_id = id(a)
    return a


def fresh(a: np.ndarray) -> bool:
    """Whether ``a`` is an array ``empty`` handed out from the pool (not a
    view of one): memory that only ``a`` refers to, as ``np.empty``'s."""
    base = a.base
    return type(base) is _Owner and base.array_id == id(a)


def stats() -> dict:
    """Counts (blocks allocated, reused, released) and idle bytes."""
    with _lock:
        return dict(_counts, idle_bytes=_idle[0])


def clear() -> None:
    """Give every idle block back (blocks in use return as usual)."""
    with _lock:
        _free.clear()
        _idle[0] = 0
