"""The memory layout PyTorch's TensorIterator gives an elementwise result
whose operands disagree on theirs.

NumPy keeps an operand's order when every operand agrees (a permuted ``x``
times 2 stays permuted, as in PyTorch) but falls back to row-major when
they disagree; TensorIterator instead orders the dimensions by the first
operand's strides, consulting the next operand only where one is
broadcast (stride 0) or the strides tie.  The layout decides the order a
later dropout / random fill draws in and whether a ``view`` succeeds, so a
result is re-laid out (same values) where the two rules differ.

Invariant: ``relayout(out, operands)`` returns ``out`` itself unless some
operand is a non-row-major array; its values are always ``out``'s."""
from __future__ import annotations

import numpy as np


def _iter_strides(shape, arrays):
    """Element strides of each array broadcast to ``shape`` (0 where broadcast)."""
    out = []
    for a in arrays:
        lead = len(shape) - a.ndim
        s = [0] * lead
        for i, (n, st) in enumerate(zip(a.shape, a.strides)):
            s.append(0 if (n == 1 and shape[lead + i] != 1) else st // a.itemsize)
        out.append(s)
    return out


def _perm(shape, strides):
    """TensorIterator's ``reorder_dimensions``: dimensions innermost first."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))

    def should_swap(d0, d1):
        for s in strides:
            s0, s1 = s[d0], s[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def in_order(out, perm):
    """``out``'s values in a fresh array dense in ``perm``'s order
    (dimensions innermost first); ``out`` itself when it is already so
    laid out (size-one dimensions aside)."""
    shape = out.shape
    want = [d for d in perm if shape[d] != 1]
    have = sorted((d for d in range(out.ndim) if shape[d] != 1),
                  key=lambda d: out.strides[d])
    if want == have:
        return out
    order = perm[::-1]                        # outermost first
    moved = out.transpose(order)
    dense = np.empty(moved.shape, out.dtype)
    dense[...] = moved
    return dense.transpose(tuple(np.argsort(order)))


def like(out, source):
    """``out`` (a fresh result with ``source``'s shape) laid out as
    PyTorch's ``preserve_format`` lays out a copy of ``source`` (clone,
    a cast, ``*_like``): dense in the order of ``source``'s strides
    (``infer_dense_strides``: a non-overlapping dense source's own
    strides, a sliced one's order made dense)."""
    if type(out) is not np.ndarray or out.ndim < 2 or out.size < 2 or \
            type(source) is not np.ndarray or source.flags.c_contiguous or \
            source.shape != out.shape:
        return out
    return in_order(out, _perm(out.shape, _iter_strides(out.shape, [source])))


def relayout(out, operands):
    """``out`` (a fresh elementwise result of ``operands``) laid out as
    TensorIterator lays it out."""
    if type(out) is not np.ndarray or out.ndim < 2 or out.size < 2:
        return out
    arrays = [a for a in operands if type(a) is np.ndarray and a.ndim > 0]
    if len(arrays) < 2 or all(a.flags.c_contiguous for a in arrays):
        return out
    shape = out.shape
    # (the common case in backward: a cotangent expanded from a scalar
    # times row-major operands.  An operand with every stride 0 never
    # decides ``_perm``'s order, and a row-major one of ``out``'s own shape
    # without size-one dimensions keeps it row-major; a row-major ``out``
    # then is already laid out as ``in_order`` would make it.)
    if out.flags.c_contiguous and 1 not in shape and \
            all(not any(a.strides) or (a.flags.c_contiguous and a.shape == shape)
                for a in arrays):
        return out
    return in_order(out, _perm(shape, _iter_strides(shape, arrays)))
