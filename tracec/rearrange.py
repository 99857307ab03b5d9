"""Rearranging and masking ops: ``narrow index_select repeat
repeat_interleave flip roll tril triu diag cumsum cumprod``.

Invariant: each is a composite of primitives (slices, ``take`` with an index
made by ``iota``, ``pad``, ``where`` over an ``iota`` mask), so gradients
and ``tracec.compile`` need nothing of their own; the only one that reads
tensor values in Python, ``repeat_interleave`` with per-element repeats (its
output shape depends on them), does so through ``concrete`` and is refused
inside a compiled function.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import _named
from tracec.ops.core import normalize_axis
from tracec.shape_ops import _shape_arg, reshape
from tracec.symbolic import Sym, hint_of
from tracec.ops.elementwise import INDEX_ERROR
from tracec.tensor import RECORDERS, SPARSE, Tensor, concrete, eager_direct
from tracec.tensor_meta import row_major

__all__ = ["narrow", "index_select", "repeat", "repeat_interleave", "flip", "fliplr", "flipud",
           "roll", "tril", "triu", "diag", "cumsum", "cumprod"]


def _slice(x, d, start, stop):
    starts = tuple(start if i == d else 0 for i in range(x.ndim))
    stops = tuple(stop if i == d else s for i, s in enumerate(x.shape))
    return ops.slice_(x, starts, stops, (1,) * x.ndim)


def narrow(input, dim, start, length):
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_axis(dim, input.ndim)
    n = input.shape[d]
    # (a symbolic start, ``x.narrow(0, T - 2, 2)``, stays one: a slice from
    # ``start % n`` serves every size)
    start = start if isinstance(start, Sym) else int(start)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], "
                         f"but got {start})")
    start %= n if n else 1
    if length < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _named(_slice(input, d, start, start + length), "SliceBackward0")


def index_select(input, dim, index):
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = normalize_axis(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    if RECORDERS and index.numel():
        # recorded, so that a compiled call checks its own indices (its
        # take would count a negative one from the end)
        ok = ops.logical_and(ops.ge(index, 0), ops.lt(index, n))
        index = ops.check(index, ok, INDEX_ERROR + "index out of range in self")
    data = index._data  # a range check only: the result does not depend on it
    # (Python ints: against a symbolic size the check is a guard, where
    # NumPy's would need the size as a number)
    if data.size and (int(data.min()) < 0 or int(data.max()) >= n):
        raise IndexError("index out of range in self")
    if input.ndim == 0:
        return _named(ops.reshape(input, ()), "IndexSelectBackward0")
    idx = ops.reshape(index, (index.numel(),)) if index.ndim == 0 else index
    out = _named(ops.take(input, idx, d), "IndexSelectBackward0")
    return _sparse_selected(out, input, d, data) if SPARSE else out


def _sparse_selected(out, input, d: int, index):
    """``out`` = ``input.index_select(d, index)`` as PyTorch's result when
    ``input`` is COO: COO again, uncoalesced; along a sparse dim, for each
    position k of ``index`` the entries whose index there is ``index[k]``,
    in stored order, moved to k; along a dense dim, the same entries with
    their values selected."""
    from tracec.contraction import mark_sparse, sparse_entries, sparse_info
    info = sparse_info(input)
    if info is None or type(out._data) is not np.ndarray:
        return out
    idx, vals = sparse_entries(input, info)
    sd = idx.shape[0]
    index = np.asarray(index, np.int64).reshape(-1)
    if d >= sd:
        vals = np.take(vals, index, axis=d - sd + 1)
        return mark_sparse(out, Tensor._make(idx.copy(), dt.int64),
                           Tensor._make(np.ascontiguousarray(vals), out.dtype), info[2])
    picks = [np.nonzero(idx[d] == j)[0] for j in index]
    entries = np.concatenate(picks) if picks else np.zeros(0, np.int64)
    new = idx[:, entries].copy()
    new[d] = np.repeat(np.arange(len(index)), [len(p) for p in picks])
    return mark_sparse(out, Tensor._make(new, dt.int64),
                       Tensor._make(np.ascontiguousarray(vals[entries]), out.dtype), False)


def repeat(x, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(sizes)}")
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    # (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then merged.
    inter = tuple(v for s in shape for v in (1, s))
    big = tuple(v for r, s in zip(sizes, shape) for v in (r, s))
    y = ops.broadcast_to(ops.reshape(x, inter), big)
    return _named(_fresh(ops.reshape(y, tuple(r * s for r, s in zip(sizes, shape))), x),
                  "RepeatBackward0")


def _fresh(y: Tensor, x: Tensor) -> Tensor:
    """``y`` as a new contiguous tensor: repeat / repeat_interleave copy, as
    PyTorch's do.  Repeating along size-1 dimensions reshapes the broadcast
    into a stride-0 view of ``x`` (StyleGAN2's ``ConstantInput`` repeats its
    ``[1, C, 4, 4]`` parameter over the batch and then ``view``s it), which
    must neither refuse ``view`` nor alias ``x``'s storage."""
    if y._data.flags.c_contiguous and not np.may_share_memory(y._data, x._data):
        return y
    return ops.cast(y, y.dtype)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # repeat_interleave(repeats): the indices, each repeated
        reps = concrete(input, "repeat_interleave(repeats)")
        return Tensor._make(np.repeat(np.arange(reps.size), reps).astype(np.int64), dt.int64)
    if dim is None:
        input = ops.reshape(input, (input.numel(),))
        d = 0
    else:
        d = normalize_axis(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        if repeats.ndim != 1 or repeats.shape[0] != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {repeats.shape[0] if repeats.ndim else 1} "
                               f"and input.size({d}) = {n}")
        reps = concrete(repeats, "repeat_interleave(tensor repeats)")
        if reps.size and reps.min() < 0:
            raise RuntimeError("repeats can not be negative")
        idx = Tensor._make(np.repeat(np.arange(n), reps).astype(np.int64), dt.int64)
        return _named(ops.take(input, idx, d), "IndexSelectBackward0")
    r = int(repeats)
    if r < 0:
        raise RuntimeError("repeats can not be negative")
    if input.ndim == 0:
        input = ops.reshape(input, (1,))
    shape = tuple(input.shape)
    y = ops.broadcast_to(ops.reshape(input, shape[:d + 1] + (1,) + shape[d + 1:]),
                         shape[:d + 1] + (r,) + shape[d + 1:])
    return _named(_fresh(ops.reshape(y, shape[:d] + (shape[d] * r,) + shape[d + 1:]), input),
                  "IndexSelectBackward0")


def _dims_list(x, dims, name):
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    out = [normalize_axis(d, x.ndim) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out[0]} appears multiple times in the list of dims")
    return out


def _int_sequence(dims, fn: str, arg: str, where: str = " (position 2)"):
    """``dims`` checked as PyTorch's parser takes a ``tuple of ints``
    argument (``torch.flip(x, 0)`` is a TypeError there); ``where``: the
    position its message names, "" for a keyword argument."""
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"{fn}(): argument '{arg}'{where} must be tuple of ints, "
                        f"not {type(dims).__name__}")
    for i, d in enumerate(dims):
        if not isinstance(d, (int, np.integer)) and not (
                isinstance(d, Tensor) and d.ndim == 0 and not d.dtype.is_floating_point):
            raise TypeError(f"{fn}(): argument '{arg}'{where} must be tuple of ints, "
                            f"but found element of type {type(d).__name__} at pos {i}")
    return dims


def flip(input, dims):
    """``torch.flip(input, dims)``: ``dims`` a tuple or list of ints."""
    y = input
    for d in _dims_list(input, _int_sequence(dims, "flip", "dims"), "flip"):
        n = input.shape[d] if input.ndim else 1     # a 0-d tensor's "dim 0" has one element
        if n > 1:
            idx = ops.sub(n - 1, ops.iota((n,), dt.int64, 0, like=input))
            y = ops.take(y, idx, d)
    if y is input:
        y = ops.cast(input, input.dtype)  # a new tensor, as PyTorch's flip always makes
    return _named(y, "FlipBackward0")


def flip_method(self, *args, dims=None):
    """``Tensor.flip(*dims)``: ints, or one tuple or list of them (``x.flip(0)``,
    ``x.flip(0, 1)``, ``x.flip((0, 1))``), or ``dims=`` a tuple or list, as
    PyTorch's method takes them."""
    if dims is not None:
        if args:
            raise TypeError("flip() received an invalid combination of arguments: "
                            "dims given by position and as a keyword")
        return flip(self, _int_sequence(dims, "flip", "dims", ""))
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return flip(self, tuple(args))


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        return reshape(roll(ops.reshape(input, (input.numel(),)), shifts, 0), *input.shape)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    y = input
    for s, dim in zip(shifts, dims):
        d = normalize_axis(dim, input.ndim)
        n = input.shape[d]
        # (a symbolic shift, ``roll(x, T // 2, 1)``, stays one: the slices
        # start at ``s % n`` for every size)
        s = (s if isinstance(s, Sym) else int(s)) % n if n else 0
        if s:
            y = ops.concatenate([_slice(y, d, n - s, n), _slice(y, d, 0, n - s)], d)
    if y is input:
        y = ops.cast(input, input.dtype)
    return _named(y, "RollBackward0")


def _offsets(x, name):
    """``col - row`` over the last two dimensions (int64, broadcastable)."""
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    n, m = x.shape[-2], x.shape[-1]
    rows = ops.iota((n, m), dt.int64, 0, like=x)
    cols = ops.iota((n, m), dt.int64, 1, like=x)
    return ops.sub(cols, rows)


def _diagonal(k):
    """tril/triu's offset: an int, or a symbolic size (``diagonal=T // 2``)
    that the mask compares with at run time."""
    return k if isinstance(k, Sym) else int(k)


def tril(input, diagonal: int = 0):
    keep = ops.le(_offsets(input, "tril"), _diagonal(diagonal))
    return _named(ops.where(keep, input, 0), "TrilBackward0")


def triu(input, diagonal: int = 0):
    keep = ops.ge(_offsets(input, "triu"), _diagonal(diagonal))
    return _named(ops.where(keep, input, 0), "TriuBackward0")


def diag(input, diagonal: int = 0):
    k = int(diagonal)
    if input.ndim == 1:
        n = input.shape[0] + abs(k)
        # (r, c) holds x[r] (k >= 0) or x[c] (k < 0) where c - r == k.
        padded = ops.pad(input, (0,), (abs(k),), (0,), 0)
        vals = ops.reshape(padded, (n, 1) if k >= 0 else (1, n))
        on = ops.eq(ops.sub(ops.iota((n, n), dt.int64, 1, like=input),
                            ops.iota((n, n), dt.int64, 0, like=input)), k)
        return _named(ops.where(on, vals, 0), "DiagEmbedBackward0")
    if input.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    n, m = input.shape
    count = max(min(n, m - k) if k >= 0 else min(n + k, m), 0)
    if count == 0:
        return _named(ops.slice_(ops.reshape(input, (n * m,)), (0,), (0,), (1,)),
                      "DiagonalBackward0")
    start = k if k >= 0 else -k * m
    flat = ops.reshape(input, (n * m,))
    y = ops.slice_(flat, (start,), (start + (count - 1) * (m + 1) + 1,), (m + 1,))
    return _named(y, "DiagonalBackward0")


def _scan_limit(n: Sym) -> int:
    """The longest symbolic length ``n`` a trace's log-step scan serves:
    twice the power of two above the traced length (one step more, for
    headroom), under a guard ``n <= limit``."""
    limit = 2 << max(1, (hint_of(n) - 1).bit_length())
    if n > limit:       # a guard; false at the sizes traced
        raise AssertionError("unreachable: the hint is within the limit")
    return limit


def _scan(x, dim, dtype, combine, fill, name):
    """Inclusive scan along ``dim`` in log2(n) shifted combines (Hillis and
    Steele): every step is a pad and one elementwise op, so it vectorizes
    and differentiates like any composite."""
    if dtype is not None:
        x = ops.cast(x, dt.to_dtype(dtype)) if dt.to_dtype(dtype) is not x.dtype else x
    elif x.dtype.category < 2 and x.dtype is not dt.int64:
        x = ops.cast(x, dt.int64)  # integer and bool scans accumulate in int64
    d = normalize_axis(dim, x.ndim)
    if x.ndim == 0:
        return _named(ops.cast(x, x.dtype), name)
    n = x.shape[d]
    y = x
    k = 1
    if isinstance(n, Sym):
        # A symbolic length: the shifts of every length up to twice the
        # power of two above the one traced (one step more, for headroom),
        # with one guard (n <= that limit); a shift past the end pads first
        # and slices after, so it adds the fill there: one trace serves
        # every length up to the limit.
        limit = _scan_limit(n)
        while k < limit:
            low = tuple(k if i == d else 0 for i in range(x.ndim))
            padded = ops.pad(y, low, (0,) * x.ndim, (0,) * x.ndim, fill)
            y = combine(y, _slice(padded, d, 0, n))
            k *= 2
    while not isinstance(n, Sym) and k < n:
        low = tuple(k if i == d else 0 for i in range(x.ndim))
        shifted = ops.pad(_slice(y, d, 0, n - k), low, (0,) * x.ndim, (0,) * x.ndim, fill)
        y = combine(y, shifted)
        k *= 2
    if y is x:
        y = ops.cast(x, x.dtype)
    return row_major(_named(y, name))     # (PyTorch's scans allocate row-major)


def cumsum(input, dim, *, dtype=None):
    x = input
    if dtype is not None and isinstance(x, Tensor) and dt.to_dtype(dtype) is not x.dtype:
        x = ops.cast(x, dt.to_dtype(dtype))
    if isinstance(x, Tensor) and x.dtype in (dt.bfloat16, dt.float16):
        # PyTorch accumulates a half-precision cumsum in float32 and rounds
        # each prefix once (rounding every partial sum drifted by many ulps)
        y = cumsum(ops.cast(x, dt.float32), dim)
        return _named(ops.cast(y, x.dtype), "CumsumBackward0")
    if isinstance(x, Tensor) and x.dtype in (dt.float32, dt.float64) and x.ndim \
            and type(x._data) is np.ndarray and eager_direct(x):
        return _cumsum_eager().apply(x, normalize_axis(dim, x.ndim))
    if dtype is not None:   # (an integer dtype asked for is kept, not widened to int64)
        return _scan(x, dim, dtype, ops.add, 0, "CumsumBackward0")
    return _cumsum_prims(x, dim)


def _cumsum_prims(x, dim):
    """The compiled (and recorded) cumsum: the log-step scan, over float64
    for a float32 input (PyTorch's CPU accumulate type), so each prefix is
    rounded to float32 once, as the eager pass rounds it: the two agree to
    float64's rounding (a NeRF's inverse-CDF sampling searches the cumsum:
    a float32 scan's rounding moved samples across bins)."""
    if isinstance(x, Tensor) and x.dtype is dt.float32:
        y = _scan(ops.cast(x, dt.float64), dim, None, ops.add, 0, "CumsumBackward0")
        return _named(ops.cast(y, dt.float32), "CumsumBackward0")
    return _scan(x, dim, None, ops.add, 0, "CumsumBackward0")


_CUMSUM_EAGER: list = []


def _cumsum_eager():
    """Eager cumsum as PyTorch's CPU kernel computes it: one sequential pass
    accumulating in float64 (PyTorch's accumulate type for float32 on the
    CPU), each prefix rounded once, where the scan's log2(n) shifted adds
    (the form that compiles) make ten passes over 1000 columns and round
    differently; the gradient is the reversed cumsum of ``g``, accumulated
    the same way.  Both equal PyTorch's bit for bit (measured on 256 x 1000
    float32).  Double backward differentiates the scan."""
    if _CUMSUM_EAGER:
        return _CUMSUM_EAGER[0]
    from tracec import graph
    from tracec.autograd import Function, grad as _grad

    def scan(a, d):
        return np.cumsum(a, axis=d, dtype=np.float64).astype(a.dtype, copy=False)

    class _CumsumEager(Function):
        node_name = "CumsumBackward0"

        @staticmethod
        def forward(ctx, x, d):
            ctx.x, ctx.d = x, d
            return Tensor._make(np.ascontiguousarray(scan(x._data, d)), x.dtype)

        @staticmethod
        def backward(ctx, g):
            d = ctx.d
            if graph.is_grad_enabled():
                x = ctx.x
                with graph.enable_grad():
                    y = _cumsum_prims(x, d)
                return _grad(y, (x,), g, create_graph=True)[0], None
            gd = np.flip(scan(np.flip(g._data, d), d), d)
            return Tensor._make(np.ascontiguousarray(gd), g.dtype), None

    _CUMSUM_EAGER.append(_CumsumEager)
    return _CumsumEager


def cumprod(input, dim, *, dtype=None):
    """PyTorch's CPU kernel accumulates a floating cumprod in a wider type
    (float for half and bfloat16, double for float) and rounds each prefix
    once: the scan runs in float64 (a float16 scan, rounding every partial
    product, was off by ulps)."""
    x = input
    if dtype is not None and isinstance(x, Tensor) and dt.to_dtype(dtype) is not x.dtype:
        x = ops.cast(x, dt.to_dtype(dtype))
    if isinstance(x, Tensor) and x.dtype in (dt.float16, dt.bfloat16, dt.float32):
        y = _scan(ops.cast(x, dt.float64), dim, None, ops.mul, 1, "CumprodBackward0")
        return _named(ops.cast(y, x.dtype), "CumprodBackward0")
    return _scan(x, dim, dtype, ops.mul, 1, "CumprodBackward0")

