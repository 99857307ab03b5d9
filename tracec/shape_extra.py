"""More shape ops, as composites of the movement primitives: ``movedim
swapdims atleast_1d/2d/3d hstack vstack dstack column_stack tile hsplit
vsplit dsplit tensor_split split_with_sizes diagonal diag_embed diagflat
rot90 unfold ravel meshgrid cartesian_prod combinations broadcast_tensors
broadcast_shapes block_diag narrow_copy sum_to_size``.

Invariant: every op here is built from primitives (``transpose``,
``reshape``, ``slice``, ``take`` with an ``iota``-made index, ``pad``,
``where``), so gradients and ``tracec.compile`` need nothing of their own;
none reads tensor values.  Argument names, defaults and error messages
follow PyTorch's.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import graph, ops
from tracec.functions import _named, promote
from tracec.graph import keep_saved
from tracec.ops.core import broadcast_shapes as _broadcast_pair, normalize_axis
from tracec.shape_ops import swapaxes as _swapaxes
from tracec.rearrange import _slice, flip, narrow, repeat
from tracec.symbolic import Sym
from tracec.tensor import RECORDERS
from tracec.shape_ops import (_one_keyword, _shape_arg, cat, expand, reshape, split, split_views,
                              stack, tensor_sequence, transpose, unsafe_chunk, unsqueeze)
from tracec.tensor import Size, Tensor
from tracec.composite_views import UNFOLD, link, view_of

__all__ = ["movedim", "moveaxis", "swapdims", "swapaxes", "atleast_1d", "atleast_2d",
           "atleast_3d", "hstack", "vstack", "dstack", "column_stack", "row_stack", "tile",
           "hsplit", "vsplit", "dsplit", "tensor_split", "split_with_sizes", "unsafe_chunk",
           "unsafe_split", "diagonal", "diag_embed", "diagflat", "rot90", "unfold", "ravel",
           "meshgrid", "cartesian_prod", "combinations", "broadcast_tensors",
           "broadcast_shapes", "block_diag", "narrow_copy", "sum_to_size"]


def _dims(d) -> list:
    return list(d) if isinstance(d, (tuple, list)) else [d]


def movedim(input, source, destination):
    src, dst = _dims(source), _dims(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination "
                           f"({dst} dims)")
    n = input.ndim
    s = [normalize_axis(d, n) for d in src]
    t = [normalize_axis(d, n) for d in dst]
    if len(set(s)) != len(s):
        raise RuntimeError(f"movedim: repeated dim in `source` ({src})")
    if len(set(t)) != len(t):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({dst})")
    perm = [-1] * n
    for a, b in zip(s, t):
        perm[b] = a
    rest = iter(d for d in range(n) if d not in s)
    perm = [p if p >= 0 else next(rest) for p in perm]
    if n == 0:
        return _named(ops.reshape(input, ()), "MovedimBackward0")
    return _named(ops.transpose(input, perm), "PermuteBackward0")


moveaxis = movedim
swapdims = transpose
swapaxes = _swapaxes


def _atleast(tensors, rank, fix):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        return tuple(_atleast(tuple(tensors[0]), rank, fix))
    out = tuple(t if t.ndim >= rank else fix(t) for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors):
    return _atleast(tensors, 1, lambda t: reshape(t, 1))


def atleast_2d(*tensors):
    return _atleast(tensors, 2, lambda t: reshape(t, 1, -1) if t.ndim else reshape(t, 1, 1))


def atleast_3d(*tensors):
    def fix(t):
        if t.ndim == 0:
            return reshape(t, 1, 1, 1)
        if t.ndim == 1:
            return reshape(t, 1, -1, 1)
        return unsqueeze(t, -1)
    return _atleast(tensors, 3, fix)


def _each(tensors, make, name):
    out = [make(t) for t in tensor_sequence(tensors, name)]
    if not out:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return out


def hstack(tensors):
    ts = _each(tensors, atleast_1d, "hstack")
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return cat(_each(tensors, atleast_2d, "vstack"), 0)


def row_stack(tensors):
    """``torch.row_stack``: ``vstack`` under its alias's name."""
    return cat(_each(tensors, atleast_2d, "row_stack"), 0)


def dstack(tensors):
    return cat(_each(tensors, atleast_3d, "dstack"), 2)


def column_stack(tensors):
    return cat(_each(tensors, lambda t: reshape(t, t.numel(), 1) if t.ndim <= 1 else t,
                     "column_stack"), 1)


def tile(input, dims):
    dims = _shape_arg(tuple(dims) if isinstance(dims, (tuple, list)) else (dims,))
    dims = (1,) * (input.ndim - len(dims)) + tuple(dims)
    return repeat(input, *dims)


def _slices(x, d, bounds):
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        out.append(narrow(x, d, a, max(b - a, 0)))
    return tuple(out)


def tensor_split(input, indices_or_sections, dim=0):
    """Sections: the first ``n % s`` parts have one more element; indices:
    cut points (clamped to the dimension)."""
    d = normalize_axis(dim, input.ndim)
    n = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype.category != 1 or ios.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {ios.ndim} dims")
        ios = int(ios.item()) if ios.ndim == 0 else [int(i) for i in ios.tolist()]
    if isinstance(ios, int):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, ios)
        if isinstance(n, Sym) and n >= 2 * ios:
            # (a guard: every part has 2 or more, as a symbolic size does;
            # a part of one is a size 1, which the trace must specialize)
            # A symbolic size: part i starts at i*q + min(i, r), written
            # with floor divisions (``(r + s - i - 1) // s`` is 1 where
            # r > i), so one trace serves every size, odd or even.
            bounds = [0] + [i * q + r - (r - i) * ((r + ios - i - 1) // ios)
                            for i in range(1, ios)] + [n]
            return tuple(_named(_slice(input, d, a, b), "SliceBackward0")
                         for a, b in zip(bounds[:-1], bounds[1:]))
        bounds = [0]
        for i in range(ios):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
        return _slices(input, d, bounds)
    cuts = [min(max(int(i) + (n if int(i) < 0 else 0), 0), n) for i in ios]
    bounds = [0] + cuts + [n]
    bounds = [bounds[0]] + [max(b, a) for a, b in zip(bounds[:-1], bounds[1:])]
    return _slices(input, d, bounds)


def _split_n(input, ios, d, name):
    if isinstance(ios, int):
        n = input.shape[d]
        if ios == 0 or n % ios:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the "
                               f"size of the dimension {n} is not divisible by the split_size "
                               f"{ios}!")
    return tensor_split(input, ios, d)


def hsplit(input, indices_or_sections):
    if input.ndim < 1:
        raise RuntimeError("torch.hsplit requires a tensor with at least 1 dimension, but got "
                           "a tensor with 0 dimensions!")
    return _split_n(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit")


def vsplit(input, indices_or_sections):
    if input.ndim < 2:
        raise RuntimeError("torch.vsplit requires a tensor with at least 2 dimension, but got "
                           f"a tensor with {input.ndim} dimensions!")
    return _split_n(input, indices_or_sections, 0, "vsplit")


def dsplit(input, indices_or_sections):
    if input.ndim < 3:
        raise RuntimeError("torch.dsplit requires a tensor with at least 3 dimension, but got "
                           f"a tensor with {input.ndim} dimensions!")
    return _split_n(input, indices_or_sections, 2, "dsplit")


def split_with_sizes(input, split_sizes, dim=0):
    return split(input, list(split_sizes), dim)


def unsafe_split(input, split_size, dim=0):
    return split_views(input, split_size, dim)


def _pair(x, dim1, dim2, what):
    a, b = normalize_axis(dim1, x.ndim), normalize_axis(dim2, x.ndim)
    if a == b:
        raise RuntimeError(f"{what} dimensions cannot be identical {dim1}, {dim2}")
    return a, b


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal over ``dim1``/``dim2`` as a new last dimension: those
    two dims moved last, merged, and sliced with stride ``m + 1``."""
    a, b = _pair(input, dim1, dim2, "diagonal")
    rest = [d for d in range(input.ndim) if d not in (a, b)]
    x = ops.transpose(input, rest + [a, b]) if rest + [a, b] != list(range(input.ndim)) \
        else input
    n, m = input.shape[a], input.shape[b]
    k = int(offset)
    count = max(min(n, m - k) if k >= 0 else min(n + k, m), 0)
    lead = tuple(x.shape[:-2])
    flat = ops.reshape(x, lead + (n * m,))
    start = (k if k >= 0 else -k * m) if count else 0
    stop = start + (count - 1) * (m + 1) + 1 if count else 0
    starts = (0,) * len(lead) + (start,)
    y = ops.slice_(flat, starts, lead + (stop,), (1,) * len(lead) + (m + 1,))
    return _named(y, "DiagonalBackward0")


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    k = int(offset)
    rank = input.ndim + 1
    a, b = normalize_axis(dim1, rank), normalize_axis(dim2, rank)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + abs(k) if input.ndim else 1 + abs(k)
    x = reshape(input, 1) if input.ndim == 0 else input
    lead = tuple(x.shape[:-1])
    pad_lo = (0,) * len(lead) + (0,)
    padded = ops.pad(x, pad_lo, (0,) * len(lead) + (abs(k),), (0,) * (len(lead) + 1), 0)
    # (r, c) holds x[r] (k >= 0) or x[c] (k < 0) where c - r == k.
    vals = ops.reshape(padded, lead + ((n, 1) if k >= 0 else (1, n)))
    on = ops.eq(ops.sub(ops.iota((n, n), dt.int64, 1, like=x),
                        ops.iota((n, n), dt.int64, 0, like=x)), k)
    y = ops.where(on, vals, ops.zeros((), x.dtype, like=x))
    lo, hi = (a, b) if a < b else (b, a)
    if (lo, hi) != (rank - 2, rank - 1) or a > b:
        y = movedim(y, (-2, -1), (a, b))
    return _named(y, "DiagEmbedBackward0")


def diagflat(input, offset=0):
    from tracec.rearrange import diag
    return diag(reshape(input, -1), offset)


def rot90(input, k=1, dims=(0, 1)):
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = normalize_axis(dims[0], input.ndim), normalize_axis(dims[1], input.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(input, [b]), a, b)
    if k == 2:
        return flip(input, [a, b])
    if k == 3:
        return flip(transpose(input, a, b), [b])
    return _named(ops.cast(input, input.dtype), "CloneBackward0")


def unfold(self, dimension, size, step):
    """``Tensor.unfold``: windows of ``size`` every ``step`` along
    ``dimension``, as a new last dimension: a view, as PyTorch's (eagerly
    without grad a plain alias; with grad or traced, ``composite_views.link``'s,
    whose writes autograd and the tracer see).  Complex and 0-d inputs with
    grad or traced get a copy."""
    for pos, (name, v) in enumerate((("dimension", dimension), ("size", size), ("step", step)), 1):
        if not isinstance(v, (int, np.integer, Sym)):   # (Sym: a traced size)
            raise TypeError(f"unfold(): argument '{name}' (position {pos}) must be int, not "
                            f"{type(v).__name__}")
    d = normalize_axis(dimension, self.ndim) if self.ndim else 0
    n = self.shape[d] if self.ndim else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    x = reshape(self, 1) if self.ndim == 0 else self
    if not RECORDERS and not (graph.is_grad_enabled() and self.requires_grad) and \
            type(self._data) is np.ndarray:
        # Eager and with no gradient: a view sharing memory and version
        # counter, as PyTorch's (writes through it reach ``self``), made
        # without the gather; ``_base`` the root, as PyTorch's
        if x.dtype.category == 3:
            from tracec.strided_views import _alias
            y = _alias(x._base if x._base is not None else x,
                       UNFOLD.impl(x._data, dim=d, size=size, step=step), x.dtype)
        else:
            y = view_of(UNFOLD, x, dim=d, size=size, step=step)
        return reshape(y, size) if self.ndim == 0 else y
    y = None
    if self.ndim and x.dtype.category != 3:
        # a view (writes through it reach ``self``, writes to ``self`` are
        # seen through it) whose values and node the gather gives
        y = link(UNFOLD, x, dim=d, size=size, step=step)
    if y is None:
        # (complex, a 0-d tensor, memory that is not NumPy's): a copy
        y = UNFOLD.bind(x, dim=d, size=size, step=step)
        if self.ndim == 0:
            y = reshape(y, size)
    keep_saved(y, (x,))     # (PyTorch's UnfoldBackward0 saves no tensors: its window indices are kept)
    return _named(y, "UnfoldBackward0")


def ravel(input):
    return reshape(input, -1)


def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f'received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = tuple(s if j == i else 1 for j, s in enumerate(shape))
        out.append(expand(reshape(t, view), *shape))
    if swap:  # PyTorch's "xy": "ij" of the first two swapped, outputs swapped back
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, -1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return ops.slice_(input, (0,), (0,), (1,))
    n = input.shape[0]
    make = itertools.combinations_with_replacement if with_replacement \
        else itertools.combinations
    rows = list(make(range(n), r))
    idx = Tensor._from_data([list(c) for c in rows] if rows else [[0] * r][:0], dt.int64)
    if not rows:
        idx = ops.reshape(idx, (0, r))
    return ops.take(input, idx, 0)


def broadcast_shapes(*shapes):
    dims = [((s,) if isinstance(s, int) else tuple(s)) for s in shapes]
    ndim = max((len(s) for s in dims), default=0)
    out = [1] * ndim
    for i, s in enumerate(dims):
        for j, size in enumerate(s):
            k = ndim - len(s) + j
            if size < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {size}: "
                                   f"{list(s)}")
            if size == 1 or size == out[k]:
                continue
            if out[k] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {size} at "
                                   f"{k - ndim}! Mismatching argument at index {i} had "
                                   f"{tuple(s)}; but expected shape should be broadcastable "
                                   f"to {out}")
            out[k] = size
    return Size(out)


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    # PyTorch's infer_size, pairwise over the tensors: the binary ops'
    # error ("The size of tensor a ..."), not broadcast_shapes'
    shape = ()
    for t in tensors:
        shape = _broadcast_pair(shape, tuple(t.shape))
    return tuple(expand(t, *shape) for t in tensors)


def block_diag(*tensors):
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(reshape(t, 1, 1) if t.ndim == 0 else reshape(t, 1, -1) if t.ndim == 1
                    else t)
    if not mats:
        d = dt.get_default_dtype()
        return Tensor._make(np.zeros((0, 0), d.np), d)
    mats, _ = promote("block_diag", *mats)
    width = sum(m.shape[1] for m in mats)
    rows, at = [], 0
    for m in mats:
        c = m.shape[1]
        rows.append(ops.pad(m, (0, at), (0, width - at - c), (0, 0), 0))
        at += c
    return rows[0] if len(rows) == 1 else ops.concatenate(rows, 0)


def narrow_copy(input, dim, start, length):
    return _named(ops.cast(narrow(input, dim, start, length), input.dtype),
                  "NarrowCopyBackward0")


def sum_to_size(self, *size_, size=None):
    size = _shape_arg(_one_keyword(size_, size, "size", "sum_to_size"))
    lead = len(size) - self.ndim
    ok = lead <= 0 and all(s == 1 or s == x for s, x in
                           zip(size, tuple(self.shape)[-len(size):] if size else ()))
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(self.shape)}}}.")
    if tuple(size) == tuple(self.shape):
        return self
    return ops.sum_to(self, tuple(size))



for _name in ("movedim", "moveaxis", "swapdims", "tile", "hsplit", "vsplit", "dsplit",
              "tensor_split", "split_with_sizes", "unsafe_chunk", "unsafe_split", "diagonal",
              "diag_embed", "diagflat", "rot90", "unfold", "ravel", "narrow_copy",
              "sum_to_size"):
    setattr(Tensor, _name, globals()[_name])
