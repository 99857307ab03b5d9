"""The order PyTorch's CPU ``topk`` gives equal values: libstdc++'s
``std::nth_element`` / ``std::partial_sort`` / ``std::sort``, replayed.

PyTorch's CPU kernel (aten/src/ATen/native/cpu/SortingKernel.cpp,
``topk_impl_loop``) fills a vector of ``(value, index)`` pairs for each row
and orders it by value alone, NaN first for ``largest`` (last otherwise):

- ``k * 64 <= n``: ``std::partial_sort(q, q + k, q + n)``;
- otherwise ``std::nth_element(q, q + k - 1, q + n)`` and, when
  ``sorted``, ``std::sort(q, q + k - 1)`` (the k-th element is in place).

Neither algorithm is stable, so which of several equal values comes first
(which expert a zero-initialized gate picks, in a mixture of experts) is
the algorithms' own: this module replays them step by step (GCC's
libstdc++, the library PyTorch's Linux builds use): introselect with the
median-of-three pivot and the unguarded partition, heap select, introsort
with the 16-element threshold and the final insertion sort.  It runs in
Python, on the rows where equal values decide the result only
(``sorting.topk`` finds them); other rows are the same under any correct
order.
"""
from __future__ import annotations

import functools
import math

__all__ = ["torch_topk_row", "torch_topk_constant_row"]


def _lg(n: int) -> int:
    return n.bit_length() - 1


def torch_topk_row(values, k: int, largest: bool, sorted_: bool) -> list:
    """The ``k`` indices PyTorch's CPU topk returns for one row of
    ``values`` (a sequence of Python floats or ints), in its order."""
    n = len(values)
    q = [(v, j) for j, v in enumerate(values)]
    isnan = math.isnan
    if largest:
        def comp(x, y):
            return (isnan(x[0]) and not isnan(y[0])) or x[0] > y[0]
    else:
        def comp(x, y):
            return (not isnan(x[0]) and isnan(y[0])) or x[0] < y[0]
    if k == 0:
        return []
    if k * 64 <= n:
        _heap_select(q, 0, k, n, comp)
        _sort_heap(q, 0, k, comp)
    else:
        _nth_element(q, 0, k - 1, n, comp)
        if sorted_:
            _sort(q, 0, k - 1, comp)
    return [j for _, j in q[:k]]


@functools.lru_cache(maxsize=256)
def torch_topk_constant_row(n: int, k: int, largest: bool, sorted_: bool) -> tuple:
    """``torch_topk_row`` of a row of ``n`` equal values (which depends on
    the sizes alone: computed once for all such rows)."""
    return tuple(torch_topk_row([0.0] * n, k, largest, sorted_))


# --- heap operations (bits/stl_heap.h) --------------------------------------

def _push_heap(q, first, hole, top, value, comp):
    parent = (hole - 1) // 2
    while hole > top and comp(q[first + parent], value):
        q[first + hole] = q[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    q[first + hole] = value


def _adjust_heap(q, first, hole, length, value, comp):
    top = hole
    second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if comp(q[first + second], q[first + second - 1]):
            second -= 1
        q[first + hole] = q[first + second]
        hole = second
    if (length & 1) == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        q[first + hole] = q[first + second - 1]
        hole = second - 1
    _push_heap(q, first, hole, top, value, comp)


def _make_heap(q, first, last, comp):
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(q, first, parent, length, q[first + parent], comp)
        if parent == 0:
            return
        parent -= 1


def _pop_heap(q, first, last, result, comp):
    value = q[result]
    q[result] = q[first]
    _adjust_heap(q, first, 0, last - first, value, comp)


def _heap_select(q, first, middle, last, comp):
    _make_heap(q, first, middle, comp)
    for i in range(middle, last):
        if comp(q[i], q[first]):
            _pop_heap(q, first, middle, i, comp)


def _sort_heap(q, first, last, comp):
    while last - first > 1:
        last -= 1
        _pop_heap(q, first, last, last, comp)


# --- partitioning and insertion sort (bits/stl_algo.h) ----------------------

def _move_median_to_first(q, result, a, b, c, comp):
    if comp(q[a], q[b]):
        if comp(q[b], q[c]):
            pick = b
        elif comp(q[a], q[c]):
            pick = c
        else:
            pick = a
    elif comp(q[a], q[c]):
        pick = a
    elif comp(q[b], q[c]):
        pick = c
    else:
        pick = b
    q[result], q[pick] = q[pick], q[result]


def _unguarded_partition(q, first, last, pivot, comp):
    while True:
        while comp(q[first], q[pivot]):
            first += 1
        last -= 1
        while comp(q[pivot], q[last]):
            last -= 1
        if not first < last:
            return first
        q[first], q[last] = q[last], q[first]
        first += 1


def _unguarded_partition_pivot(q, first, last, comp):
    mid = first + (last - first) // 2
    _move_median_to_first(q, first, first + 1, mid, last - 1, comp)
    return _unguarded_partition(q, first + 1, last, first, comp)


def _unguarded_linear_insert(q, last, comp):
    val = q[last]
    nxt = last - 1
    while comp(val, q[nxt]):
        q[last] = q[nxt]
        last = nxt
        nxt -= 1
    q[last] = val


def _insertion_sort(q, first, last, comp):
    if first == last:
        return
    for i in range(first + 1, last):
        if comp(q[i], q[first]):
            val = q[i]
            q[first + 1:i + 1] = q[first:i]
            q[first] = val
        else:
            _unguarded_linear_insert(q, i, comp)


def _nth_element(q, first, nth, last, comp):
    if first == last or nth == last:
        return
    depth = _lg(last - first) * 2
    while last - first > 3:
        if depth == 0:
            _heap_select(q, first, nth + 1, last, comp)
            q[first], q[nth] = q[nth], q[first]
            return
        depth -= 1
        cut = _unguarded_partition_pivot(q, first, last, comp)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(q, first, last, comp)


_THRESHOLD = 16


def _introsort_loop(q, first, last, depth, comp):
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_select(q, first, last, last, comp)
            _sort_heap(q, first, last, comp)
            return
        depth -= 1
        cut = _unguarded_partition_pivot(q, first, last, comp)
        _introsort_loop(q, cut, last, depth, comp)
        last = cut


def _sort(q, first, last, comp):
    if first == last:
        return
    _introsort_loop(q, first, last, _lg(last - first) * 2, comp)
    if last - first > _THRESHOLD:
        _insertion_sort(q, first, first + _THRESHOLD, comp)
        for i in range(first + _THRESHOLD, last):
            _unguarded_linear_insert(q, i, comp)
    else:
        _insertion_sort(q, first, last, comp)
