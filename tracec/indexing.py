"""``Tensor.__getitem__`` / ``__setitem__``: basic indexing (ints, slices,
None, Ellipsis) as ``slice`` + ``reshape`` views, integer-array indexing
as ``take`` on (merged) axes, boolean masks through their nonzero indices.

Invariant: basic indexing returns a view sharing storage with its base
(NumPy's and PyTorch's rule); advanced indexing returns a copy.
"""
from __future__ import annotations

import dis
import math
import numbers
import sys

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec import runtime_index, runtime_int
from tracec.graph import edge_of
from tracec.node_views import TorchName
from tracec.runtime_int import ACTIVE as _RUNTIME_INTS, RuntimeInt
from tracec.shape_ops import expand
from tracec.symbolic import Sym, known
from tracec.ops.elementwise import INDEX_ERROR, INDEX_VALUE
from tracec.tensor import RECORDERS, SPARSE, SYM_SHAPES, Tensor, bind_movement, refuse_partial_overlap
from tracec.torch_function_switch import caller

_SLICE, _RESHAPE = ops.movement.slice_p, ops.movement.reshape_p


def _is_adv(k):
    return isinstance(k, (Tensor, np.ndarray, list, range))


def _to_index_tensor(k):
    if isinstance(k, Tensor):
        return k
    arr = np.asarray(k)
    if arr.size == 0 and isinstance(k, (list, range)):
        # an empty list indexes nothing: torch reads it as an empty long index
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "f":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return Tensor._from_data(arr)


def _uint8_mask(k: Tensor) -> Tensor:
    """PyTorch still reads a uint8 index tensor as a mask (deprecated)."""
    import warnings
    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                  "torch.bool instead.", UserWarning, stacklevel=4)
    return ops.ne(k, 0)


#: PyTorch's refusal of an integer index into a 0-d tensor (old code's ``loss.data[0]``).
ZERO_DIM_INDEX = ("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                  "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")


def _expand_key(x, key):
    if not isinstance(key, tuple):
        if x.ndim == 0:
            # a lone int or slice is refused in its own words (PyTorch's select /
            # slice paths); a tuple of them is "too many indices" below
            if isinstance(key, numbers.Integral) and not isinstance(key, (bool, np.bool_)):
                raise IndexError(ZERO_DIM_INDEX)
            if type(key) is slice:
                raise IndexError("slice() cannot be applied to a 0-dim tensor.")
        key = (key,)
    if len(key) <= x.ndim and all(type(k) is slice or type(k) is int for k in key):
        # The common case (ints and slices only): nothing to expand.
        return list(key) + [slice(None)] * (x.ndim - len(key))
    items = []
    for k in key:
        if isinstance(k, (bool, np.bool_)):
            k = Tensor._from_data(np.array(k))
        if isinstance(k, Tensor) and k.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if isinstance(k, (float, np.floating)):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and "
                             "long or byte Variables are valid indices (got "
                             f"{type(k).__name__})")
        if isinstance(k, Tensor) and k.dtype is dt.uint8:
            k = _uint8_mask(k)
        if isinstance(k, Tensor) and k.dtype is dt.bool_:
            if k.ndim == 0:
                raise IndexError("0-d boolean indices are not supported by tracec")
            # A mask selects where it is true: its nonzero indices, one per dim.
            nz = np.nonzero(_concrete(k))
            items.extend(Tensor._from_data(i.astype(np.int64)) for i in nz)
            continue
        if _is_adv(k) and not isinstance(k, Tensor):
            k = _to_index_tensor(k)
            if k.dtype is dt.bool_:
                items.extend(Tensor._from_data(i.astype(np.int64))
                             for i in np.nonzero(k._data))
                continue
        if not (k is None or k is Ellipsis or isinstance(k, (slice, numbers.Integral, Tensor))):
            raise TypeError(f"invalid index of type {type(k).__name__}")
        items.append(k)
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in [k for k in items if not isinstance(k, Tensor)]:
        i = next(i for i, k in enumerate(items) if k is Ellipsis)
        items[i:i + 1] = [slice(None)] * (x.ndim - used)
    else:
        items += [slice(None)] * (x.ndim - used)
    return items


_SEQUENCE_KEY_WARNING = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be "
    "changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will "
    "be interpreted as tensor index, x[torch.tensor(seq)], which will result either in an "
    "error or a different result (Triggered internally at "
    "/__w/pytorch/pytorch/torch/csrc/autograd/python_variable_indexing.cpp:349.)")


def sequence_key(key: list):
    """A list key as PyTorch 2.13 reads it (``treatSequenceAsTuple``, NumPy's
    old heuristic): a list shorter than 32 holding a tensor, a sequence, a
    slice, ``...`` or ``None`` is a tuple of indices (with torch's
    deprecation warning), ``x[[[0, 1], [1, 0]]]`` is ``x[[0, 1], [1, 0]]``;
    any other list is one index."""
    if len(key) < 32:
        for k in key:
            if isinstance(k, (Tensor, slice, list, tuple, range, str, np.ndarray)) or \
                    k is Ellipsis or k is None:
                import warnings
                warnings.warn(_SEQUENCE_KEY_WARNING, UserWarning, stacklevel=3)
                return tuple(key)
    return key


def _concrete(t: Tensor) -> np.ndarray:
    from tracec.tensor import concrete
    return concrete(t, "boolean-mask indexing")


def getitem(x: Tensor, key):
    # Direct paths for the common keys (the general one costs several µs
    # more than the op itself); they build exactly what it would.
    if _RUNTIME_INTS and runtime_index.in_key(key):
        return runtime_index.getitem(x, key)    # an offset read at run time (ptr:ptr + B)
    tk = type(key)
    if tk is list:
        key = sequence_key(key)
        tk = type(key)
    ndim = x._data.ndim
    if tk is int or tk is slice or tk is Sym:
        # (a symbolic size as an index, ``x[T // 2 - 1]``: a slice from
        # ``k % size``, as ``x[-1]`` is, not a number that specializes T)
        if ndim:
            if SPARSE and tk is int:     # a COO tensor's row is one (tracec.sparse_rows)
                from tracec.sparse_rows import sparse_selected
                return sparse_selected(_basic(x, (key,)), x, 0, key)
            return _basic(x, (key,))
    elif tk is tuple:
        if len(key) <= ndim:
            for k in key:
                if type(k) is not int and type(k) is not slice and type(k) is not Sym:
                    break
            else:
                return _basic(x, key)
        # (by identity: a numpy array in the key compares elementwise)
        if len(key) - 1 <= ndim and all(
                type(k) is int or type(k) is slice or k is Ellipsis for k in key) and \
                sum(k is Ellipsis for k in key) == 1:
            # x[..., a:b]: the ellipsis as full slices (the general path
            # would need every size as a number: a symbolic trace
            # specialized on them)
            i = key.index(Ellipsis)
            return _basic(x, key[:i] + (slice(None),) * (ndim - len(key) + 1) + key[i + 1:])
    elif tk is Tensor and key.dtype is dt.int64 and ndim and not RECORDERS:
        return _take_rows(x, key)
    elif RECORDERS and tk is Tensor and key.dtype is dt.bool_ and _mask_fill_key(x, key, None):
        use = _masked_read_use(caller(sys._getframe(1)))
        if use:
            return _MaskedRead(x, key, use == "copy")
    return _getitem(x, key)


#: code object -> {offset of a BINARY_SUBSCR: what the statement does with
#: the value it reads ("augmented", "copy" or None; ``_masked_read_use``)}
_READ_USES: dict = {}

#: instructions that push one value and have no other effect on the stack
_PUSH_ONE = ("LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CONST",
             "LOAD_CLASSDEREF")


def _masked_read_use(frame):
    """What the statement ``frame`` is executing does with the subscript it
    is reading, where that is all it does with it:
    ``"augmented"``: the target of an augmented assignment to a subscript
    (``a[k] op= v``), which CPython compiles, and only it, as the container
    and key duplicated (``COPY 2`` twice; ``DUP_TOP_TWO`` before 3.11),
    then ``BINARY_SUBSCR``, the value, the in-place operator and
    ``STORE_SUBSCR`` to the same container and key;
    ``"copy"``: the value of a subscript assignment (``a[k] = b[k]``), the
    read followed directly by loads of the target (names, or one attribute
    of a name) and of its key, then ``STORE_SUBSCR``;
    None otherwise."""
    code = frame.f_code
    table = _READ_USES.get(code)
    if table is None:
        ins = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        table = {}
        for n, i in enumerate(ins):
            if i.opname != "BINARY_SUBSCR":
                continue
            prev = [(j.opname, j.arg) for j in ins[max(0, n - 2):n]]
            nxt = [j.opname for j in ins[n + 1:n + 5]]
            use = None
            if prev == [("COPY", 2), ("COPY", 2)] or prev[-1:] == [("DUP_TOP_TWO", None)]:
                use = "augmented"
            elif (len(nxt) >= 3 and nxt[0] in _PUSH_ONE and nxt[1] in _PUSH_ONE
                  and nxt[2] == "STORE_SUBSCR") or (
                      len(nxt) == 4 and nxt[0] in _PUSH_ONE and nxt[1] == "LOAD_ATTR"
                      and nxt[2] in _PUSH_ONE and nxt[3] == "STORE_SUBSCR"):
                use = "copy"
            # (every offset up to the next instruction: the specialized
            # BINARY_SUBSCR_GETITEM calls __getitem__ with f_lasti on its
            # last inline cache entry)
            end = ins[n + 1].offset if n + 1 < len(ins) else i.offset + 2
            for off in range(i.offset, end, 2):
                table[off] = use
        _READ_USES[code] = table
    return table.get(frame.f_lasti)


class _MaskedRead:
    """``x[mask]`` read inside a traced call by ``x[mask] op= v`` (Rainbow's
    C51 projection: ``l[(u > 0) * (l == u)] -= 1``) or by ``t[mask] =
    x[mask]``.  The selection's size depends on the data, which a trace
    cannot record; the statement as a whole can: ``op`` applied to a copy of
    all of ``x`` (or ``x`` itself, for the copy), written into the target
    where ``mask`` holds (a masked fill, as ``t[mask] = value`` is).  It
    lives only between the statement's read and its store
    (``_masked_read_use`` checked the bytecode), so no other code sees it;
    an operand that would combine with the selection element by element
    (one not broadcast over the selected rows), another key or a target the
    values do not fit read the selection as before, and the trace refuses
    it."""

    __slots__ = ("x", "mask", "full")

    def __init__(self, x, mask, copy=False):
        self.x, self.mask = x, mask
        self.full = x if copy else None

    def _selection(self):
        return _getitem(self.x, self.mask)

    def _apply(self, name, v):
        rows = self.x.shape[self.mask.ndim:]
        if isinstance(v, (numbers.Number, np.number, np.bool_)) or (
                isinstance(v, Tensor) and v.ndim <= len(rows) and
                all(a == 1 or a == b for a, b in zip(v.shape[::-1], rows[::-1]))):
            # the same v for every selected row: the op on all of x agrees
            # with it on the selection, dtype rules and errors included
            self.full = getattr(ops.cast(self.x, self.x.dtype), name)(v)
            return self
        return getattr(self._selection(), name)(v)

    def store(self, t, key):
        """``t[key] = self``: ``where(mask, values, t)`` into ``t``, when the
        key is the read's mask and the values fit ``t`` row for row with its
        dtype; otherwise the selection's values, as any assignment."""
        nd, full = key.ndim, self.full
        if key is not self.mask or full is None or full.dtype is not t.dtype or \
                tuple(t.shape[:nd]) != tuple(key.shape) or \
                not _broadcasts(full.shape[nd:], t.shape[nd:]):
            return setitem(t, key, self._selection())
        m = ops.reshape(key, tuple(key.shape) + (1,) * (t.ndim - nd))
        if tuple(full.shape) != tuple(t.shape):
            full = ops.broadcast_to(ops.reshape(full, tuple(key.shape) + (1,) * (
                t.ndim - full.ndim) + tuple(full.shape[nd:])), tuple(t.shape))
        t._assign(ops.where(m, full, t), "setitem")


def _broadcasts(src, dst) -> bool:
    """Whether trailing sizes ``src`` broadcast to exactly ``dst``."""
    return len(src) <= len(dst) and all(a == 1 or a == b for a, b in zip(src[::-1], dst[::-1]))


for _name in ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
              "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"):
    setattr(_MaskedRead, _name, (lambda n: lambda self, v: self._apply(n, v))(_name))
del _name


def _indices(k: slice, size):
    """``k.indices(size)``, also where a bound or the size is a symbolic
    size (``pos_emb[:, :T]`` in a symbolic trace: the bounds stay symbols,
    the clamping decisions become guards)."""
    if not (isinstance(k.start, Sym) or isinstance(k.stop, Sym) or isinstance(size, Sym)):
        return k.indices(size)      # (no generator: this is the hot path of x[a:b])
    step = 1 if k.step is None else int(k.step)

    def clamp(v, default):
        if v is None:
            return default
        if v < 0:
            v = v + size
            return 0 if v < 0 else v
        return size if v > size else v
    return clamp(k.start, 0), clamp(k.stop, size), step


def _narrows(a, b, size, c) -> bool:
    """Whether the slice ``a:b:c`` of a dimension of ``size`` does
    something (is not the whole dimension).  Where a bound or the size is
    symbolic and the sizes' bounds do not decide it, True, never a guard:
    a slice op that spans the whole dimension is exact too, and a guard
    ``T != 16`` from ``pos_emb[:, :T]`` would make T=16 (the full context)
    a second trace, and a size ``tracec build`` libraries refuse."""
    if not (isinstance(a, Sym) or isinstance(b, Sym) or isinstance(size, Sym)):
        return bool(a or b != size or c != 1)
    if c != 1:
        return True
    whole = known(a, "==", 0) is True and known(b, "==", size) is True
    return not whole


def _basic(x: Tensor, key: tuple):
    """``x[key]`` for ints and slices, at most one per dimension: a slice,
    then a reshape dropping the int-indexed dimensions."""
    shape = x.shape if SYM_SHAPES else x._data.shape
    starts, stops, steps, out_shape = [], [], [], []
    sliced = dropped = False
    name = "SliceBackward0"  # PyTorch's node: that of the last index that does something
    doing = 0                # indices that do something: PyTorch's nodes
    dim = 0
    for k in key:
        size = shape[dim]
        if type(k) is slice:
            if k.step is not None and int(k.step) <= 0:
                raise ValueError("step must be greater than zero")
            a, b, c = _indices(k, size)
            if b < a:
                b = a
            out_shape.append((b - a + c - 1) // c)
            narrows = _narrows(a, b, size, c)
            if narrows:
                name = "SliceBackward0"
                doing += 1
        else:
            doing += 1
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
            a = k % size
            b, c = a + 1, 1
            dropped = True
            name = "SelectBackward0"
            narrows = _narrows(a, b, size, c)
        if narrows:
            sliced = True
        starts.append(a)
        stops.append(b)
        steps.append(c)
        dim += 1
    rest = shape[dim:]
    y = x
    if sliced:
        if rest:
            starts.extend([0] * len(rest))
            stops.extend(rest)
            steps.extend([1] * len(rest))
        y = bind_movement(_SLICE, x, {"starts": tuple(starts), "stops": tuple(stops),
                                      "steps": tuple(steps)})
    if dropped:
        y = bind_movement(_RESHAPE, y, {"shape": tuple(out_shape) + rest})
    elif y is x:
        y = bind_movement(_RESHAPE, x, {"shape": shape})  # a fresh view, as x[:] in PyTorch
    if y._node is not None:
        y._node._name = _one_node(name, x, doing)
    return y


def _one_node(name: str, x: Tensor, doing: int):
    """The name of an indexing result's last node; where PyTorch makes one
    node (one index that does something: ``x[0]``, ``x[:, -1]``, full
    slices skipped) and tracec two (a slice, then a reshape dropping the
    dimension), one whose ``next_functions`` is ``x``'s edge, as PyTorch's."""
    if doing != 1:
        return name
    name = TorchName(name)
    name.edges = (edge_of(x),)
    return name


def _take_rows(x: Tensor, idx: Tensor):
    """``x[idx]`` for an int64 index tensor: one ``take`` on axis 0, as the
    general path builds for indices that need no normalizing."""
    data = idx._data
    if data.size and data.min() < 0:
        return _getitem(x, idx)  # negative indices: normalized with primitives
    try:
        return ops.take(x, idx, 0)
    except IndexError:
        _check_range(idx, x._data.shape[0], 0)  # the general path's message
        raise


def _is_bool0(k) -> bool:
    return isinstance(k, (bool, np.bool_)) or (isinstance(k, Tensor) and k.dtype is dt.bool_
                                               and k.ndim == 0)


def _bool_scalars(x: Tensor, key):
    """``x[True]`` / ``x[..., False]``: PyTorch reads a 0-d boolean index as
    a new axis of size 1 (True) or 0 (False).  One of them and no other
    advanced index: ``x`` indexed with None in its place, the axis emptied
    for False; otherwise None (the general path decides)."""
    keys = key if isinstance(key, tuple) else (key,)
    if sum(1 for k in keys if _is_bool0(k)) != 1:
        return None    # (several: PyTorch broadcasts them as advanced indices; refused below)
    if any(_is_adv(k) and not _is_bool0(k) for k in keys):
        return None
    flags = [bool(_concrete(k) if isinstance(k, Tensor) else k) if _is_bool0(k) else None
             for k in keys]
    r = _getitem(x, tuple(None if f is not None else k for k, f in zip(keys, flags)))
    consumed = sum(1 for k, f in zip(keys, flags) if f is None and k is not None
                   and k is not Ellipsis)
    pos = 0
    for k, f in zip(keys, flags):
        if f is False:
            r = _getitem(r, (slice(None),) * pos + (slice(0, 0),))
        if f is not None or k is None or isinstance(k, slice):
            pos += 1
        elif k is Ellipsis:
            pos += x.ndim - consumed
    return r


def _mask_shape(k):
    """The shape of ``k`` where it is a boolean (or uint8) mask of one or
    more dims, else None."""
    if isinstance(k, Tensor):
        return tuple(k.shape) if k.dtype in (dt.bool_, dt.uint8) and k.ndim else None
    if isinstance(k, (list, np.ndarray)):
        arr = np.asarray(k)
        return arr.shape if arr.dtype == np.bool_ and arr.ndim else None
    return None


def _check_masks(x: Tensor, key) -> None:
    """PyTorch's refusal of a boolean mask whose shape is not that of the
    dims it indexes (NumPy's words, or none: a short mask read as its
    nonzero positions, would do otherwise).  PyTorch applies the basic
    indices first (an int drops its dim, None or a bool scalar adds one of
    size 1, a slice shortens its dim) and checks each mask against the dims
    of that tensor from where the mask stands; its message names both
    shapes.  Keys that run past ``x``'s dims are left to the "too many
    indices" check."""
    keys = key if isinstance(key, tuple) else (key,)
    if not any(_mask_shape(k) is not None for k in keys if _is_adv(k)):
        return

    def span(k):    # the dims of x that k indexes
        if k is None or k is Ellipsis or _is_bool0(k):
            return 0
        m = _mask_shape(k)
        return 1 if m is None else len(m)
    rest = x.ndim - sum(span(k) for k in keys)
    if rest < 0:
        return
    shape, masks, dim = [], [], 0    # the basic-indexed shape; (start, mask shape)
    for k in keys:
        if k is Ellipsis:
            shape += x.shape[dim:dim + rest]
            dim += rest
        elif k is None or _is_bool0(k):
            shape.append(1)
        elif isinstance(k, slice):
            if k.step is not None and int(k.step) <= 0:
                return    # (refused by the indexing itself)
            a, b, c = _indices(k, x.shape[dim])    # (a symbolic size stays one)
            shape.append((max(a, b) - a + c - 1) // c)
            dim += 1
        elif isinstance(k, numbers.Integral) or (isinstance(k, Tensor) and k.ndim == 0):
            dim += 1
        else:
            m = _mask_shape(k)
            n = 1 if m is None else len(m)
            if m is not None:
                masks.append((len(shape), m))
            shape += x.shape[dim:dim + n]
            dim += n
    shape += x.shape[dim:]
    for start, m in masks:
        for j, s in enumerate(m):
            if s != shape[start + j]:
                raise IndexError(f"The shape of the mask {list(m)} at index {j} does not match "
                                 f"the shape of the indexed tensor {list(shape)} at index "
                                 f"{start + j}")


def _getitem(x: Tensor, key):
    _check_masks(x, key)
    special = _bool_scalars(x, key)
    if special is not None:
        return special
    items = _expand_key(x, key)
    starts, stops, steps = [], [], []
    out_shape, adv = [], []  # adv: (position in out_shape, index tensor)
    dim = 0
    name = "AliasBackward0" if key is Ellipsis else "SliceBackward0"  # as in _basic
    doing = 0
    for k in items:
        if k is None:
            out_shape.append(1)
            name = "UnsqueezeBackward0"
            doing += 1
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            if k.step is not None and int(k.step) <= 0:
                raise ValueError("step must be greater than zero")
            a, b, c = _indices(k, size)
            if b < a:
                b = a
            starts.append(a), stops.append(b), steps.append(c)
            # (not len(range()): a symbolic size is no int)
            out_shape.append((b - a + c - 1) // c)
            if _narrows(a, b, size, c):
                name = "SliceBackward0"
                doing += 1
        elif isinstance(k, Tensor):
            if k.dtype.category != 1:
                raise IndexError("tensors used as indices must be long, int or bool tensors")
            starts.append(0), stops.append(size), steps.append(1)
            adv.append((len(out_shape), k))
            out_shape.append(size)
        else:
            i = int(k)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            i %= size
            starts.append(i), stops.append(i + 1), steps.append(1)
            name = "SelectBackward0"
            doing += 1
        dim += 1
    y = x
    if any(a != 0 or b != s or c != 1 for a, b, c, s in zip(starts, stops, steps, x.shape)):
        y = ops.slice_(y, starts, stops, steps)
    if tuple(out_shape) != tuple(y.shape):
        y = ops.reshape(y, tuple(out_shape))
    if not adv:
        if y is x:
            y = ops.reshape(x, x.shape)  # a fresh view, as x[...] in PyTorch
        if y._node is not None:
            y._node._name = _one_node(name, x, doing)
        return y
    return _advanced(y, adv)


def _advanced(y, adv):
    positions = [p for p, _ in adv]
    idx = [i if i.dtype is dt.int64 else ops.cast(i, dt.int64) for _, i in adv]
    bshape = _index_broadcast([i.shape for i in idx])
    idx = [ops.broadcast_to(i, bshape) if i.shape != bshape else i for i in idx]
    negative = False
    for p, i in zip(positions, idx):
        negative = _check_range(i, y.shape[p], p) or negative
    if RECORDERS:
        # A later compiled call checks its own indices against [-size, size)
        # before they are wrapped (its take, counting a negative index from
        # the end once more, would accept -size-1 as size-1).
        idx = [ops.check(i, ops.logical_and(ops.ge(i, -y.shape[p]), ops.lt(i, y.shape[p])),
                         INDEX_ERROR + f"index {INDEX_VALUE} is out of bounds for dimension {p} with size "
                         f"{y.shape[p]}")
               for p, i in zip(positions, idx)]
    if negative or RECORDERS:
        # Normalize negative indices with primitives (traced indices may
        # take other values on a later call).
        idx = [ops.where(ops.lt(i, 0), ops.add(i, y.shape[p]), i)
               for p, i in zip(positions, idx)]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    if not adjacent:
        rest = [d for d in range(y.ndim) if d not in positions]
        y = ops.transpose(y, positions + rest)
        positions = list(range(len(positions)))
    p0 = positions[0]
    sizes = [y.shape[p] for p in positions]
    if len(positions) > 1:
        y = ops.reshape(y, y.shape[:p0] + (math.prod(sizes),) + y.shape[p0 + len(sizes):])
        flat = idx[0]
        for i, s in zip(idx[1:], sizes[1:]):
            flat = ops.add(ops.mul(flat, s), i)
        idx = [flat]
    return ops.take(y, idx[0], p0)


def _index_broadcast(shapes):
    """The shape the index arrays broadcast to, or PyTorch's refusal."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(list(s)) for s in shapes)) from None


def _check_range(i, size, dim) -> bool:
    """Indices must lie in [-size, size) before negative ones are wrapped;
    True if some are negative."""
    data = i._data
    if not data.size:
        return False
    # (Python ints: against a symbolic size the check is a guard, where
    # NumPy's comparison would need the size as a number)
    lo, hi = int(data.min()), int(data.max())
    if lo < -size or hi >= size:
        bad = data[(data < -size) | (data >= size)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    return bool(lo < 0)


def setitem(x: Tensor, key, value):
    if type(value) is _MaskedRead:
        return value.store(x, key)
    if type(value) is RuntimeInt:       # a number read at run time: its tensor
        value = runtime_int.operand(value)
    if _RUNTIME_INTS and runtime_index.in_key(key):
        return runtime_index.setitem(x, key, value)
    if type(key) is list:
        key = sequence_key(key)
    if isinstance(value, (list, tuple, np.ndarray)):
        value = Tensor._from_data(np.asarray(value), dtype=x.dtype)
    if not isinstance(value, (Tensor, numbers.Number, np.number, np.bool_)):
        raise TypeError(f"can't assign a {type(value).__name__} to a tensor")
    if x.dtype.category == 1 and isinstance(value, numbers.Integral) and \
            not isinstance(value, (bool, np.bool_)):
        value = dt.wrap_int(int(value), x.dtype)
    items = key if isinstance(key, tuple) else (key,)
    _check_masks(x, items)    # (before the uint8 refusal below, as PyTorch)
    if any(isinstance(k, Tensor) and k.dtype is dt.uint8 for k in items):
        if not isinstance(value, Tensor) or value.ndim == 0:
            # PyTorch sends a 0-d value to masked_fill_, which refuses uint8 masks.
            raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with "
                               "dtype unsigned char")
        items = tuple(_uint8_mask(k) if isinstance(k, Tensor) and k.dtype is dt.uint8 else k
                      for k in items)
        key = items
    if RECORDERS and _mask_fill_key(x, key, value):
        # ``x[mask] = scalar``: PyTorch's masked_fill_; no data-dependent shape
        # to trace (``deg_inv_sqrt[deg_inv_sqrt == inf] = 0`` in a compiled GCN)
        return _masked_fill(x, key, value)
    if RECORDERS and _mask_rest_fill_key(x, key, value):
        # ``x[mask, -1] = scalar`` (HashNeRF's ``outputs_flat[~keep_mask, -1]
        # = 0``): the same masked fill on the basic view the rest selects
        return _masked_fill(getitem(x, (slice(None),) * key[0].ndim + tuple(key[1:])),
                            key[0], value)
    if any(_is_adv(k) or isinstance(k, (bool, np.bool_)) for k in items):
        return _setitem_advanced(x, key, value)
    view = getitem(x, key)
    new = value if isinstance(value, Tensor) else Tensor._from_data(np.array(value),
                                                                     dtype=x.dtype)
    if new.dtype is not x.dtype:
        new = ops.cast(new, x.dtype)
    if tuple(new.shape) != tuple(view.shape):
        # (PyTorch copies the value into the view: copy_'s expand, and its
        # errors, after dropping the value's leading ones)
        new = expand(_drop_leading_ones(new, view.ndim), *view.shape)
    refuse_partial_overlap(view, (value,))    # (PyTorch copies the value: copy_'s check)
    view._assign(new, "setitem")


def broadcast_value(new, shape):
    """The value of ``x[key] = new`` broadcast to the indexed ``shape``, or
    PyTorch's error."""
    try:
        return ops.broadcast_to(_drop_leading_ones(new, len(shape)), tuple(shape))
    except Exception:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(new.shape)} cannot "
                           f"be broadcast to indexing result of shape "
                           f"{list(shape)}") from None


def _masked_fill(x, mask, value):
    """``x`` (a tensor or a view) takes one-element ``value`` where the bool
    ``mask`` over its leading dims holds, as a ``where`` (a traceable fill)."""
    m = ops.reshape(mask, tuple(mask.shape) + (1,) * (x.ndim - mask.ndim))
    v = value if isinstance(value, Tensor) else Tensor._from_data(np.array(value), dtype=x.dtype)
    if v.dtype is not x.dtype:
        v = ops.cast(v, x.dtype)
    x._assign(ops.where(m, ops.reshape(v, ()), x), "setitem")


def _mask_fill_key(x, key, value) -> bool:
    """``key`` a bool mask over ``x``'s leading dims and ``value`` one element."""
    return (isinstance(key, Tensor) and key.dtype is dt.bool_ and 0 < key.ndim <= x.ndim
            and tuple(key.shape) == tuple(x.shape[:key.ndim])
            and (not isinstance(value, Tensor) or value.ndim == 0))


def _mask_rest_fill_key(x, key, value) -> bool:
    """``key`` a bool mask over ``x``'s leading dims followed by basic
    indices that keep those dims first (ints, slices, an ellipsis), and
    ``value`` one element: a fill with no data-dependent shape."""
    return (isinstance(key, tuple) and len(key) > 1 and _mask_fill_key(x, key[0], value)
            and all(k is Ellipsis or isinstance(k, slice) or
                    (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)))
                    for k in key[1:]))


def _drop_leading_ones(t, ndim):
    while t.ndim > ndim and t.shape[0] == 1:
        t = ops.reshape(t, t.shape[1:])
    return t


def _setitem_advanced(x, key, value):
    from tracec import graph
    if RECORDERS or (graph.is_grad_enabled() and (
            x.requires_grad or (isinstance(value, Tensor) and value.requires_grad))):
        return _setitem_functional(x, key, value)
    vdata = value._data if isinstance(value, Tensor) else value
    np_key = tuple(k._data if isinstance(k, Tensor) else k for k in
                   (key if isinstance(key, tuple) else (key,)))
    try:
        x._data[np_key] = vdata
    except (IndexError, ValueError) as e:
        if str(e).startswith("too many indices"):      # numpy's words for it
            raise IndexError(f"too many indices for tensor of dimension {x.ndim}") from None
        if str(e).startswith("shape mismatch: indexing arrays"):
            # (a mask counts as one index array per dim, of its true count)
            shapes = []
            for k in np_key:
                if _mask_shape(k) is not None:
                    m = np.asarray(k)
                    shapes += [(int(np.count_nonzero(m)),)] * m.ndim
                elif _is_adv(k):
                    shapes.append(np.shape(k))
            _index_broadcast(shapes)
        if str(e).startswith("shape mismatch: value array"):
            broadcast_value(value, getitem(x, key).shape)   # (raises PyTorch's error)
        raise IndexError(str(e)) from None
    x._vbox[0] += 1


def _last_writes(pos, new, dtype):
    """``(pos, new)`` with every write but the last to each position zeroed,
    as primitives: a traced call's positions may repeat differently at each
    call.  A stable sort groups equal positions in write order; an entry
    equal to its successor is overwritten."""
    k = pos.shape[0]
    order = ops.argsort(pos, 0, False)
    pos, new = ops.take(pos, order, 0), ops.take(new, order, 0)
    shadowed = ops.eq(ops.slice_(pos, (0,), (k - 1,), (1,)), ops.slice_(pos, (1,), (k,), (1,)))
    shadowed = ops.concatenate([shadowed, ops.full((1,), False, dt.bool_, like=pos)], 0)
    lost = _grad_only(new) if dtype.is_floating_point else ops.zeros((k,), dtype, like=new)
    return pos, ops.where(shadowed, lost, new)


def _grad_only(new):
    """0 in value with ``new``'s gradient: a shadowed write's share, as
    PyTorch's index_put backward (a gather) gives every value the output's
    gradient at its target, the winner's or not.  (A non-finite ``new``
    would make ``new - new`` NaN: 0 there.)"""
    d = new.detach()
    return ops.where(ops.eq(ops.sub(d, d), 0), ops.sub(new, d),
                     ops.zeros((), new.dtype, like=new))


def _setitem_functional(x, key, value):
    """``x[key] = value`` with array/mask indices, as primitives (autograd
    and the tracer see it): the flat positions ``key`` selects are found by
    indexing an iota, then ``where(hit, index_add(0, pos, value), x)``.  Of
    repeated positions the last write wins, as NumPy's (and, on CPU,
    PyTorch's) assignment does; the others add 0 but get the gradient."""
    from tracec import graph
    n = x.numel()
    with graph.no_grad():
        lin = Tensor._make(np.arange(n, dtype=np.int64).reshape(x.shape), dt.int64)
        pos = getitem(lin, key)
    new = value if isinstance(value, Tensor) else Tensor._from_data(np.array(value),
                                                                     dtype=x.dtype)
    if new.dtype is not x.dtype:
        new = ops.cast(new, x.dtype)
    if tuple(new.shape) != tuple(pos.shape):
        try:
            new = ops.broadcast_to(_drop_leading_ones(new, pos.ndim), pos.shape)
        except Exception:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(new.shape)} cannot "
                               f"be broadcast to indexing result of shape "
                               f"{list(pos.shape)}") from None
    k = pos.numel()
    pos = ops.reshape(pos, (k,))
    new = ops.reshape(new, (k,))
    if RECORDERS and k > 1:
        pos, new = _last_writes(pos, new, x.dtype)
    elif k:
        flat = pos._data   # eager: the positions are this call's
        if np.unique(flat).size != k:  # keep the last write to each position
            _, first_rev = np.unique(flat[::-1], return_index=True)
            last = k - 1 - first_rev
            if new.requires_grad and x.dtype.is_floating_point:
                wins = np.zeros(k, bool)
                wins[last] = True
                new = ops.where(Tensor._from_data(wins), new, _grad_only(new))
            else:
                keep = Tensor._from_data(np.sort(last).astype(np.int64))
                pos, new = ops.take(pos, keep, 0), ops.take(new, keep, 0)
                k = keep.numel()
    written = ops.index_add(ops.zeros((n,), x.dtype, like=x), pos, new, 0)
    hit = ops.ne(ops.index_add(ops.zeros((n,), dt.int64, like=x), pos,
                               ops.full((k,), 1, dt.int64, like=x), 0), 0)
    result = ops.where(hit, written, ops.reshape(x, (n,)))
    x._assign(ops.reshape(result, x.shape), "setitem")
