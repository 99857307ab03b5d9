"""PyTorch's CPU ``quick_select_template`` (ATen's SortingUtils.h), in
NumPy, for the index ``kthvalue`` returns among equal values.

Which of several equal elements ends at position ``k`` depends on the swaps
of PyTorch's quickselect (median-of-three pivot, Hoare partition), not on a
stable order: ``kthvalue([5, 4, 4, 5], 1)`` is index 2, not 1.  Invariant:
``kth_index(row, k)`` replays those swaps exactly, with NaN ordered above
every number (PyTorch's ``gt_or_nan``); the value at ``k`` is the k-th
smallest either way, only the index among ties depends on this.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["kth_index"]


def _gt(x, y) -> bool:
    return (math.isnan(x) and not math.isnan(y)) or x > y


def kth_index(row: np.ndarray, k: int) -> int:
    """The index PyTorch's kthvalue reports for the ``k``-th (0-based)
    smallest element of the 1-D ``row``."""
    arr = [float(v) for v in row]
    idx = list(range(len(arr)))

    def swap(i, j):
        arr[i], arr[j] = arr[j], arr[i]
        idx[i], idx[j] = idx[j], idx[i]
    lo, hi = 0, len(arr) - 1
    while hi > lo:
        if hi == lo + 1:
            if _gt(arr[lo], arr[hi]):
                swap(lo, hi)
            break
        p = lo + (hi - lo) // 2
        swap(p, lo + 1)
        if _gt(arr[lo + 1], arr[hi]):
            swap(lo + 1, hi)
        if _gt(arr[lo], arr[hi]):
            swap(lo, hi)
        if _gt(arr[lo + 1], arr[lo]):
            swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, arr[lo]
        while True:
            i += 1
            while _gt(piv, arr[i]):
                i += 1
            j -= 1
            while _gt(arr[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1
    return idx[k]
