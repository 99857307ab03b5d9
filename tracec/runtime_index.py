"""Indexing at offsets read from tensors at run time (``tracec.runtime_int``):
``x[..., ptr:ptr + L, ...]`` and ``x[ptr]`` read and written inside a
recorded call, as gathers at ``ptr + iota(L)`` checked at run time to lie
inside the dimension.

Invariant: the traced call's eager values are exactly eager indexing's (a
read hands out the real view at this call's offsets; its IR value is the
gather, and replaying the view specializes: ``runtime_int.view_replayed``);
a key the compiled code cannot index at run time (a slice whose length is
not fixed, None or tensors in the key, an offset out of range at the traced
call) has its numbers specialized, with a note.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.runtime_int import ACTIVE, SPECIALIZE_ON_REPLAY, RuntimeInt, as_tensor
from tracec.symbolic import Sym, hint_of

__all__ = ["in_key", "getitem", "setitem"]


def in_key(key) -> bool:
    """Whether an index key holds a ``RuntimeInt`` (as an index or a slice bound)."""
    for k in (key if type(key) is tuple else (key,)):
        if type(k) is RuntimeInt:
            return True
        if type(k) is slice and (type(k.start) is RuntimeInt or type(k.stop) is RuntimeInt
                                 or type(k.step) is RuntimeInt):
            return True
    return False


def _dynamic_items(x, key, what):
    """``(items, [(position, dim, start RuntimeInt, length, drop, size)])``
    for a key of ints, slices and one Ellipsis whose run-time items are
    slices ``ptr:ptr + L`` or indices ``ptr``, each in range at this call;
    else ``(key with every RuntimeInt specialized, None)``."""
    reader = ACTIVE[0] if ACTIVE else None
    items = key if type(key) is tuple else (key,)
    if reader is None or reader.rec.suspended:
        return _plain_key(key), None
    found, why = [], None
    if not (all(type(k) in (int, slice, RuntimeInt) or k is Ellipsis for k in items)
            and sum(k is Ellipsis for k in items) <= 1):
        why = f"a slice bound in an index with None, tensors or lists ({what})"
    elif sum(1 for k in items if k is not Ellipsis) > x.ndim:
        why = f"an index that does not fit the tensor ({what})"
    else:
        e = next((i for i, k in enumerate(items) if k is Ellipsis), None)   # (no ==)
        for p, k in enumerate(items):
            dim = p if e is None or p < e else x.ndim - (len(items) - p)
            if type(k) is RuntimeInt:
                start, length, drop = k, 1, True
            elif type(k) is slice and any(type(v) is RuntimeInt for v in (k.start, k.stop, k.step)):
                a, b = k.start, k.stop
                if not ((k.step is None or (type(k.step) is int and k.step == 1))
                        and type(a) is RuntimeInt and type(b) is RuntimeInt and a.reader is reader
                        and b.reader is reader and _root(a) is _root(b)
                        and (isinstance(b.offset - a.offset, Sym) or b.offset >= a.offset)):
                    why = (f"a slice bound whose slice length is not a fixed number ({what}: "
                           "only ptr:ptr + L with L a number or a size reads at a run-time "
                           "offset)")
                    break
                start, length, drop = a, b.offset - a.offset, False
            else:
                continue
            size = x.shape[dim]
            v, hl, hs = start.value, hint_of(length), hint_of(size)
            if hs is None or not (0 <= v and v + hl <= hs):
                why = (f"a slice start out of range at this call ({what}: {v} with length {hl} "
                       f"for a dimension of size {hs}; eager's clamping is kept)")
                break
            found.append((p, dim, start, length, drop, size))
    if why is None:
        return items, found
    for k in items:
        for v in ((k.start, k.stop, k.step) if type(k) is slice else (k,)):
            if type(v) is RuntimeInt and v.reader is reader:
                v.use(why)
    return _plain_key(key), None


def _root(ri):
    return ri if ri.base is None else ri.base


def _plain_key(key):
    def num(v):
        return v.value if type(v) is RuntimeInt else v
    if type(key) is tuple:
        return tuple(_plain_key(k) for k in key)
    if type(key) is slice:
        return slice(num(key.start), num(key.stop), num(key.step))
    return num(key)


def _positions(x, start, length, size, drop):
    """``start + iota(length)`` as int64, after a run-time check that the
    slab lies inside the dimension (else a RuntimeError: the backends put
    the user's line first)."""
    from tracec import ops
    s = start.tensor
    last = size - length          # (a size expression where either is symbolic)
    ok = ops.logical_and(ops.ge(s, 0), ops.le(s, as_tensor(last, s)))
    if drop:
        text = f"an index read from a tensor at run time ({start.text}) must lie " \
            f"in [0, {last}] for this compiled code (dimension of size {size}); eager " \
            "indexing would wrap a negative index or raise IndexError: call the function " \
            "eagerly for such values"
    else:
        text = f"a slice of {length} element(s) at an offset read from a tensor at " \
            f"run time ({start.text}) must lie inside its dimension of size {size} (offset " \
            f"in [0, {last}]); eager slicing would clamp it to another shape, which this " \
            "compiled code cannot: call the function eagerly for such values"
    s = ops.check(s, ok, text)
    return ops.add(ops.iota((length,), dt.int64, 0, like=x), s)


def _rest_key(items, found):
    """The key with its run-time items replaced (the slab is already cut)."""
    out = list(items)
    for p, dim, start, length, drop, size in found:
        out[p] = 0 if drop else slice(None)
    return tuple(out)


def _slabs(x, found):
    """``[x, slab1, slab2, ...]``: ``x`` gathered at each run-time offset in
    turn, and the positions each gather read."""
    from tracec import ops
    slabs, positions = [x], []
    for p, dim, start, length, drop, size in found:
        pos = _positions(x, start, length, size, drop)
        positions.append(pos)
        slabs.append(ops.take(slabs[-1], pos, dim))
    return slabs, positions


def getitem(x, key):
    """``x[key]`` with a ``RuntimeInt`` in ``key`` (see the module docstring)."""
    from tracec import indexing
    items, found = _dynamic_items(x, key, "an index read")
    if found is None:
        return indexing.getitem(x, items)
    rec = found[0][2].reader.rec
    # eager: a view at this call's offsets (exact aliasing); the IR: gathers
    y = indexing.getitem(x, _plain_key(items))
    slabs, _ = _slabs(x, found)
    yd = indexing.getitem(slabs[-1], _rest_key(items, found))
    rec.env[id(y)] = (y, rec.value_of(yd))
    starts = tuple(f[2] for f in found)
    for step in (y._view_chain or ())[len(x._view_chain or ()):]:
        SPECIALIZE_ON_REPLAY[id(step[1])] = starts
    return y


def setitem(x, key, value):
    """``x[key] = value`` with a ``RuntimeInt`` in ``key``: the slab at the
    run-time offsets is gathered, written (``slab[rest] = value``: eager's
    casts, broadcasts and errors), and put back with ``where``, one
    run-time dimension at a time."""
    from tracec import indexing, ops
    from tracec.tensor import Tensor
    items, found = _dynamic_items(x, key, "an indexed write")
    if found is None:
        return indexing.setitem(x, items, value)
    slabs, positions = _slabs(x, found)
    slab = slabs.pop()
    rest = _rest_key(items, found)
    if isinstance(value, Tensor) and all(k is Ellipsis or (type(k) is slice and k.start is None
                                         and k.stop is None and k.step is None) for k in rest):
        # the whole slab (``queue[:, ptr:ptr + B] = keys.T``): the value is it,
        # cast and broadcast (a write through a view of it would need its
        # symbolic sizes as numbers)
        new = value if value.dtype is x.dtype else ops.cast(value, x.dtype)
        if tuple(new.shape) != tuple(slab.shape):
            new = indexing.broadcast_value(new, slab.shape)
        slab = new
    else:
        indexing.setitem(slab, rest, value)
    for (p, dim, start, length, drop, size), pos, outer in zip(
            reversed(found), reversed(positions), reversed(slabs)):
        shape = tuple(size if i == dim else 1 for i in range(outer.ndim))
        at = ops.iota(shape, dt.int64, dim, like=outer)
        s = start.tensor
        hit = ops.logical_and(ops.ge(at, s), ops.lt(at, ops.add(s, as_tensor(length, s))))
        spread = ops.index_add(ops.zeros(tuple(outer.shape), outer.dtype, like=outer), pos,
                               slab, dim)
        slab = ops.where(hit, spread, outer)
    x._assign(slab, "setitem")
