"""A write through an ``expand`` view, recorded by ``tracec.compile``.

PyTorch lets fills and index writes (``fill_``, ``zero_``, ``masked_fill_``,
``index_fill_``, ``index_put_``, ``x[i] = v`` on an element) write into an
expanded tensor, whose elements share memory: each shared location ends up
holding the value of the last element written to it (in row-major order).
Eagerly tracec writes the memory itself (``mem_overlap.write_shared``); a
traced call records the write as a functional update of the view's root,
which this module builds from primitives: each expanded axis of the chain
is pulled back by taking, per root element, the last alias whose new value
differs from its old one (the old value where none does).  Invariant: the
update equals the eager write wherever the written values differ from the
old ones, and where they do not the two agree anyway.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import ops

__all__ = ["through_expand", "rebased"]


def through_expand(chain) -> bool:
    """Whether a view chain (``Tensor._view_chain``) expands (aliases)."""
    return any(prim.name == "broadcast_to" for prim, _, _ in chain)


def _last_changed(v, changed, axis: int):
    """Along ``axis`` (kept, size 1): the value of the last ``changed``
    element and whether there is one."""
    pos = ops.iota(tuple(v.shape), dt.int64, axis, v)
    score = ops.where(changed, pos, ops.full((), -1, dt.int64, v))
    keep = tuple(v.shape[:axis]) + (1,) + tuple(v.shape[axis + 1:])
    last = ops.reshape(ops.reduce_max(score, (axis,)), keep)
    pick = ops.eq(pos, last)
    num = v if v.dtype is not dt.bool_ else ops.cast(v, dt.uint8)
    # (a sum of one value and zeros: exact)
    val = ops.reshape(ops.reduce_sum(ops.where(pick, num, ops.full((), 0, num.dtype, v)), (axis,)),
                      keep)
    if v.dtype is dt.bool_:
        val = ops.cast(val, dt.bool_)
    return val, ops.ge(last, 0)


def _pull_expand(v, changed, in_shape: tuple):
    """``(values, changed)`` of a ``broadcast_to`` step's input, from its
    output's: expanded axes reduced innermost first (row-major's last)."""
    lead = v.ndim - len(in_shape)
    for k in reversed(range(v.ndim)):
        if k < lead or (in_shape[k - lead] == 1 and v.shape[k] != 1):
            v, changed = _last_changed(v, changed, k)
    return ops.reshape(v, in_shape), ops.reshape(changed, in_shape)


def rebased(chain, root, new):
    """``root``'s value once ``new`` is written through the view ``chain``
    (which ``through_expand``); no gradient (PyTorch refuses such writes
    where autograd would need one)."""
    old = root
    for prim, params, _ in chain:
        old = prim.bind(old, **params)
    v, changed = new, ops.ne(new, old)
    for prim, params, aval in reversed(chain):
        if prim.name == "broadcast_to":
            v, changed = _pull_expand(v, changed, tuple(aval.shape))
        else:
            (v,) = prim.vjp(v, aval, out=None, **params)[:1]
            (c,) = prim.vjp(ops.cast(changed, dt.float32), aval, out=None, **params)[:1]
            changed = ops.ne(c, 0)
    return ops.where(changed, v, root)
