"""``Tensor.unfold`` and ``as_strided`` as views everywhere, not only
eagerly without grad.

PyTorch's ``x.unfold(d, size, step)`` and ``x.as_strided(size, stride)``
are views: a write through them reaches ``x`` and a write to ``x`` is seen
through them.  No movement primitive expresses overlapping windows (the
broadcast-and-reshape trick lowers to a copy per call, 170x slower than a
gather), so their view steps are *composites*: ``UNFOLD`` and
``AS_STRIDED`` stand in a tensor's ``_view_chain`` where a view primitive
would, with the same four faces, each built from primitives:

  * ``bind``: a ``take`` with an ``iota``-made index (what the tracer
    records, on eager tensors and on the recording's values alike:
    ``complex_trace.Value``);
  * ``vjp``: its adjoint, ``index_add`` into zeros (a write through the view
    is replayed on its root as ``where(mask, adjoint(new), root)``,
    ``Tensor._rebase_view``);
  * ``abstract_eval``: the view's shape and dtype;
  * ``impl``: the NumPy view (``as_strided``) of the same memory.

Invariant: a tensor ``link`` returns holds NumPy memory of its source
(writes go there) and the values ``bind`` computes; its ``_view_chain``
ends with ``(kind, params, aval)``.  ``composite`` marks such a step for
the chain's consumers that emit IR ops by primitive name
(``tracing.Recording.value_of``) or replay a returned view
(``view_outputs``: as a strided alias instead).
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec.ops import creation, elementwise, indexing, movement
from tracec.ops.core import Aval

__all__ = ["UNFOLD", "AS_STRIDED", "link", "view_of"]


class _Composite:
    composite = True

    def __repr__(self):
        return self.name.upper()


# --- unfold ------------------------------------------------------------------

def _windows(n, size, step):
    return (n - size) // step + 1


def _window_index(like, n, size, step):
    """``[w, k] -> w * step + k``, the source position of window ``w``'s
    ``k``-th element."""
    shape = (_windows(n, size, step), size)
    return elementwise.add(elementwise.mul(creation.iota(shape, dt.int64, 0, like=like), step),
                           creation.iota(shape, dt.int64, 1, like=like))


def _to_last(ndim, d):
    """The permutation moving axis ``d + 1`` (the window's elements, right
    after the window axis ``d``) of an ``ndim + 1``-axis tensor last."""
    perm = [i for i in range(ndim + 1) if i != d + 1]
    return tuple(perm + [d + 1])


class _Unfold(_Composite):
    """The view step of ``Tensor.unfold(dim, size, step)``."""

    name = "unfold"

    def abstract_eval(self, aval, *, dim, size, step):
        s = tuple(aval.shape)
        return Aval(s[:dim] + (_windows(s[dim], size, step),) + s[dim + 1:] + (size,), aval.dtype)

    def bind(self, x, *, dim, size, step):
        y = indexing.take(x, _window_index(x, x.shape[dim], size, step), dim)
        return movement.transpose(y, _to_last(len(x.shape), dim))

    def vjp(self, g, aval, out=None, *, dim, size, step):
        back = tuple(int(i) for i in np.argsort(_to_last(len(aval.shape), dim)))
        g = movement.transpose(g, back)
        idx = _window_index(g, aval.shape[dim], size, step)
        return (indexing.index_add(creation.zeros(tuple(aval.shape), aval.dtype, like=g), idx,
                                   g, dim),)

    def impl(self, a, *, dim, size, step):
        w = _windows(a.shape[dim], size, step)
        shape = a.shape[:dim] + (w,) + a.shape[dim + 1:] + (size,)
        strides = a.strides[:dim] + (a.strides[dim] * step,) + a.strides[dim + 1:] + \
            (a.strides[dim],)
        return np.lib.stride_tricks.as_strided(a, shape=shape, strides=strides, subok=True)


# --- as_strided --------------------------------------------------------------

def _strided_index(like, size, stride, offset):
    """``[i...] -> offset + sum(i_k * stride_k)``: positions in the
    flattened source."""
    idx = creation.full(size, offset, dt.int64, like=like)
    for axis, s in enumerate(stride):
        if size[axis] > 1 and s:
            idx = elementwise.add(idx, elementwise.mul(creation.iota(size, dt.int64, axis,
                                                                     like=like), s))
    return idx


class _AsStrided(_Composite):
    """The view step of ``as_strided(size, stride, offset)`` of a
    C-contiguous source, ``offset`` and ``stride`` in its elements."""

    name = "as_strided"

    def abstract_eval(self, aval, *, size, stride, offset):
        return Aval(tuple(size), aval.dtype)

    def bind(self, x, *, size, stride, offset):
        n = math.prod(x.shape)
        return indexing.take(movement.reshape(x, (n,)),
                             _strided_index(x, size, stride, offset), 0)

    def vjp(self, g, aval, out=None, *, size, stride, offset):
        n = math.prod(aval.shape)
        flat = indexing.index_add(creation.zeros((n,), aval.dtype, like=g),
                                  _strided_index(g, size, stride, offset), g, 0)
        return (movement.reshape(flat, tuple(aval.shape)),)

    def impl(self, a, *, size, stride, offset):
        item = a.itemsize
        return np.lib.stride_tricks.as_strided(a.reshape(-1)[offset:], shape=tuple(size),
                                               strides=tuple(s * item for s in stride),
                                               subok=True)


UNFOLD = _Unfold()
AS_STRIDED = _AsStrided()


def link(kind, x, **params):
    """``kind`` (a step above) applied to ``x`` as a view of ``x``'s memory whose values and
    autograd node come from ``step.bind`` (recorded by a tracer), or None
    where the memory cannot be shared (not a plain NumPy array, or an
    ``as_strided`` source that is not C-contiguous)."""
    from tracec.tensor import _link_view
    a = x._data
    if not isinstance(a, np.ndarray) or (kind is AS_STRIDED and not a.flags.c_contiguous):
        return None
    y = kind.bind(x, **params)
    view = kind.impl(a, **params)
    if view.shape != y._data.shape:
        return None
    y._data = view
    _link_view(y, kind, params, x, a)
    return y


def view_of(kind, x, **params):
    """``kind`` applied to ``x`` (a NumPy array's tensor) as a view of its
    memory, without computing ``bind``: for eager code without autograd or
    a tracer, which never replays the step (a later write is a plain
    memory write)."""
    from tracec.tensor import Tensor, _link_view
    y = Tensor._make(kind.impl(x._data, **params), x.dtype)
    _link_view(y, kind, params, x, x._data)
    return y
