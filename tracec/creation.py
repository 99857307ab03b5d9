"""Tensor creation and random numbers.

Invariant: tensors made here are leaves.  Random tensors drawn while
tracing go through the ``random_uniform`` primitive from a generator whose
state is itself a tensor (``int64[2]``: seed, offset), advanced in place, so
a traced function that draws random numbers carries that state like any
other.  Eager draws come from the generator's Mersenne Twister with
PyTorch's transforms (``torch_rng``): PyTorch's numbers for the same seed.
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from tracec import dtypes as dt
from tracec import _C, graph, ops, torch_rng
from tracec.arg_arrays import _WATCHES, ArgArray, foreign, watched
from tracec.device import DEFAULT as _DEFAULT, is_meta, to_device
from tracec.meta_array import MetaArray
from tracec.runtime_int import RuntimeInt, operand as runtime_operand
from tracec.symbolic import Sym
from tracec.tensor import RECORDERS, Tensor, concrete


def _finish(t: Tensor, requires_grad: bool, device) -> Tensor:
    if t._base is not None and t._base._birth == t._birth and not RECORDERS:
        # A view of a temporary made in here: the new tensor owns that storage.
        t._base, t._view_chain, t._vbox = None, None, [0]
    if device is not None:
        to_device(device)
    elif len(_DEFAULT) > 1:     # inside ``with device(...)``: "cuda" raises as PyTorch's
        to_device(_DEFAULT[-1])
    if is_meta(device):     # the device given, or the default (``with device("meta")``)
        t._data, t._base, t._view_chain = MetaArray.of(t._data.shape, t._data.dtype), None, None
    if requires_grad:
        t._creation_requires_grad()
    return t


def _on_meta(size, d, requires_grad) -> Tensor:
    """A new tensor on the meta device: nothing allocated, and for random
    factories nothing drawn (the generator does not advance, as in PyTorch)."""
    return _finish(Tensor._make(MetaArray.of(_size(size), d.np), d), requires_grad, "meta")


def _like_device(input, device):
    """``*_like``'s device: the one given, else ``input``'s (PyTorch's default)."""
    return device if device is not None or not input.is_meta else "meta"


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if isinstance(s, Sym):   # a symbolic size of a traced call (never negative)
            out.append(s)
            continue
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"size must be a sequence of ints, got {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


# Only its type matters: creation primitives dispatch on it.
_LIKE = Tensor._make(np.zeros(()), dt.float32)


def _symbolic(size) -> bool:
    """Does a shape hold a symbolic size?  Then the tensor is made by a
    creation primitive, which a symbolic trace records with the symbols
    (NumPy would freeze the size of the call being traced)."""
    return any(isinstance(s, Sym) for s in size)


def copy_construct_warning(spelling: str, stacklevel: int) -> None:
    """PyTorch's warning for a tensor made from a tensor by ``spelling``
    (``torch.tensor``, ``tensor.new_tensor``), at the caller ``stacklevel``
    frames above the function that calls this."""
    import sys
    import warnings

    from tracec.torch_function_switch import WRAPPER_CODES
    level = stacklevel + 1
    # (a dispatching wrapper between the caller and the user, once a
    # TorchFunctionMode made torch.tensor one, is not the line to blame)
    while sys._getframe(level - 1).f_code in WRAPPER_CODES:
        level += 1
    warnings.warn("To copy construct from a tensor, it is recommended to use "
                  "sourceTensor.detach().clone() or "
                  "sourceTensor.detach().clone().requires_grad_(True), rather than "
                  f"{spelling}(sourceTensor).", UserWarning, stacklevel=level)


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    if type(data) is RuntimeInt:     # a number read at run time: a recorded copy
        return _finish(Tensor._from_data(data, dtype), requires_grad, device)
    if isinstance(data, Tensor):
        copy_construct_warning("torch.tensor", 2)
    return tensor_copy(data, dtype, device, requires_grad)


def tensor_copy(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``tensor()`` without its warning (for callers that give their own)."""
    return _finish(Tensor._from_data(data, dtype), requires_grad, device)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor) and (dtype is None or dt.to_dtype(dtype) is data.dtype):
        return data
    if isinstance(data, np.ndarray) and dtype is None:
        return from_numpy(data)
    return _finish(Tensor._from_data(data, dtype), False, device)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor:
    """PyTorch's ``torch.asarray``: ``obj`` itself (a tensor) or a tensor
    sharing its memory (a NumPy array) where ``dtype`` allows and ``copy``
    is not True; a copy where ``copy`` is True or the dtype differs (with
    ``copy=False`` that is a ``ValueError``, as in PyTorch); anything else
    (numbers, nested sequences) as ``tensor()`` would make it.
    ``requires_grad=True`` sets it on the result, an alias included."""
    want = None if dtype is None else dt.to_dtype(dtype)
    from tracec import tensor_meta as tm       # (as _formatted: it patches Tensor on import)
    if isinstance(obj, tm.UntypedStorage):
        return _finish(_from_storage(obj, want), requires_grad, device)
    if isinstance(obj, (np.ndarray, np.generic)) and not isinstance(obj, np.ndarray):
        obj = np.asarray(obj)
    if isinstance(obj, (Tensor, np.ndarray)):
        have = obj.dtype if isinstance(obj, Tensor) else dt.from_numpy_dtype(obj.dtype)
        if copy is False and want is not None and want is not have:
            raise ValueError(f"can't alias tensor with dtype '{dt.scalar_type_name(have)}' "
                             f"into dtype '{dt.scalar_type_name(want)}'.")
        if isinstance(obj, np.ndarray):
            out = from_numpy(obj)
        else:
            out = obj
        if want is not None and want is not have:
            out = out.to(want)
        elif copy:
            out = out.clone()
        return _finish(out, requires_grad, device) if out is not obj else \
            (obj._creation_requires_grad() if requires_grad else obj)
    if copy is False:
        raise ValueError("can't alias arbitrary sequence into a tensor.")
    return _finish(Tensor._from_data(obj, want), requires_grad, device)


def _from_storage(storage, want) -> Tensor:
    """``asarray(storage, dtype=want)``: the storage's bytes read as ``want``
    (int64 when None, as PyTorch 2.13 reads one), sharing its memory; a
    bfloat16 read is a copy (tracec keeps bfloat16 values as float32)."""
    raw = storage._bytes()
    want = dt.int64 if want is None else want
    if want is dt.bfloat16:
        return Tensor._make(dt.bfloat16_from_bits(raw[:raw.size // 2 * 2]), dt.bfloat16)
    width = np.dtype(want.np).itemsize
    return Tensor._make(raw[:raw.size // width * width].view(want.np), want)


#: PyTorch warns of a non-writable NumPy array once per program
_READONLY_WARNED = [False]


def _shared(a: np.ndarray) -> np.ndarray:
    """``a``'s memory for a tensor that shares it.  A NumPy array marked
    read-only (pandas' copy-on-write ``.values``, fastai's
    ``tensor(df.values)``) is shared as PyTorch shares it, which ignores the
    flag (writing is "undefined behavior") and warns once per program: where
    NumPy allows, through a writable view of the same memory, so in-place
    ops write through as in PyTorch; else (an array whose own flag it is) and
    for a broadcast view (PyTorch refuses to write one) the read-only array,
    which in-place ops refuse."""
    if a.flags.writeable:
        return a
    if not _READONLY_WARNED[0]:
        import sys
        import warnings
        _READONLY_WARNED[0] = True
        level, f = 1, sys._getframe(0)     # the first frame outside tracec
        while f is not None and f.f_globals.get("__name__", "").startswith("tracec."):
            level, f = level + 1, f.f_back
        warnings.warn(
            "The given NumPy array is not writable, and PyTorch does not support non-writable "
            "tensors. This means writing to this tensor will result in undefined behavior. You "
            "may want to copy the array to protect its data or make it writable before "
            "converting it to a tensor. This type of warning will be suppressed for the rest of "
            "this program. (Triggered internally at "
            "/__w/pytorch/pytorch/torch/csrc/utils/tensor_numpy.cpp:213.)", UserWarning,
            stacklevel=level)
    if any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape)):
        return a            # (elements sharing memory: PyTorch's in-place ops refuse them)
    view = a.view()
    try:
        view.flags.writeable = True
    except ValueError:
        return a
    return view


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``a`` (``_shared``)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(a).__name__})")
    if type(a) is ArgArray:
        w = watched(a)
        if w is not None:       # an argument array of a traced call: its input
            return w.tensor()
    elif _WATCHES:
        foreign(a)
    a = _shared(a)
    return Tensor._make(a, dt.from_numpy_dtype(a.dtype)) if a.dtype in (
        np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_) \
        else Tensor._from_data(a)


_FACTORY_KEYWORDS = ("Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, "
                     "torch.device device = None, bool pin_memory = False, "
                     "bool requires_grad = False")


def _missing_size(name: str, kwargs: dict) -> None:
    """PyTorch's TypeError for a ``*size`` factory called without a size
    (``torch.zeros()`` is no 0-d tensor: ``torch.zeros(())`` is).  Its
    argument parser names the missing argument, except for ``rand`` /
    ``randn`` called with nothing at all, whose two signatures (with and
    without ``generator``) it lists."""
    if name in ("rand", "randn") and not kwargs:
        sigs = "".join(f" * (tuple of ints size, *, {g}{_FACTORY_KEYWORDS})\n"
                       for g in ("torch.Generator generator, ", ""))
        raise TypeError(f"{name}() received an invalid combination of arguments - got (), "
                        f"but expected one of:\n{sigs}")
    raise TypeError(f'{name}() missing 1 required positional arguments: "size"')


def _factory(varsize: bool = False, memory_format: bool = False):
    """PyTorch's factory keywords that do not change a tracec tensor's values:
    ``layout`` (only ``torch.strided``), ``pin_memory`` (no pinned host memory
    to ask for: accepted and ignored), ``memory_format`` (``empty``: the
    layout of the new tensor) and, for the ``*size`` factories, the size as a
    keyword (``torch.empty(size=(2, 3))``)."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def factory(*args, size=None, layout=None, pin_memory=False,
                    memory_format=None, **kwargs):
            from tracec.tensor_meta import strided
            if layout is not None and layout is not strided:
                raise NotImplementedError(f"tracec: {fn.__name__}(layout={layout}) "
                                          "(tracec's tensors are all strided)")
            if size is not None:
                if not varsize:
                    kwargs["size"] = size   # its own parameter (full, randint)
                elif args:
                    raise TypeError(f"{fn.__name__}() got multiple values for argument 'size'")
                else:
                    args = (size,)
            if varsize and not args:
                _missing_size(fn.__name__, kwargs)
            if fn.__name__ == "zeros":
                sizes = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
                if any(isinstance(v, (int, np.integer)) and v < 0 for v in sizes):
                    # (torch.zeros' own words; empty / new_zeros say _size's)
                    raise RuntimeError("zeros: Dimension size must be non-negative.")
            if memory_format is not None and not memory_format_ok:
                raise TypeError(f"{fn.__name__}() got an unexpected keyword argument "
                                "'memory_format'")
            t = fn(*args, **kwargs)
            if memory_format is not None:
                from tracec.tensor_meta import contiguous_format, preserve_format
                if memory_format is preserve_format:
                    raise RuntimeError("preserve_format not supported for new tensors "
                                       f"({fn.__name__})")
                if memory_format is not contiguous_format:
                    rg = t.requires_grad
                    from tracec.tensor_meta import dense_copy
                    with graph.no_grad():
                        t = dense_copy(t.detach(), memory_format)
                    t.requires_grad_(rg)
            return t
        memory_format_ok = memory_format
        return factory
    return wrap


@_factory()
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if type(fill_value) is RuntimeInt:   # a number read at run time: its 0-d tensor
        fill_value = runtime_operand(fill_value)
    size = _size((size,) if isinstance(size, int) else size)
    if isinstance(fill_value, Tensor):
        return _full_of_tensor(size, fill_value, dtype, requires_grad, device)
    if dtype is None:
        dtype = dt.bool_ if isinstance(fill_value, bool) else (
            dt.int64 if isinstance(fill_value, int) else
            dt.get_default_complex() if isinstance(fill_value, complex) else
            dt.get_default_dtype())
    d = dt.to_dtype(dtype)
    fill_value = dt.check_fits(fill_value, d)
    if is_meta(device):
        return _on_meta(size, d, requires_grad)
    if _symbolic(size) or isinstance(fill_value, Sym):
        return _finish(ops.full(size, fill_value, d, like=_LIKE), requires_grad, device)
    return _finish(Tensor._make(np.full(size, fill_value, dtype=d.np), d), requires_grad, device)


def _full_of_tensor(size, fill: Tensor, dtype, requires_grad, device) -> Tensor:
    # A 0-d tensor as the fill value: broadcast by a primitive, so a traced
    # call fills with the value of each call (np.full would freeze it).
    if fill.ndim != 0:
        raise RuntimeError(f"fill_value must be a 0-dimensional tensor, but got a tensor "
                           f"with {fill.ndim} dimensions")
    if dtype is None:   # as for the Python number it holds
        dtype = dt.bool_ if fill.dtype is dt.bool_ else (
            dt.get_default_dtype() if fill.dtype.is_floating_point else dt.int64)
    d = dt.to_dtype(dtype)
    with graph.no_grad():
        out = ops.broadcast_to(ops.cast(fill.detach(), d), size)
        out = ops.cast(out, d)   # its own storage, not a broadcast view
    return _finish(out, requires_grad, device)


@_factory(varsize=True)
def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    size = _size(size)
    if is_meta(device):
        return _on_meta(size, d, requires_grad)
    if _symbolic(size):
        return _finish(ops.full(size, 0, d, like=_LIKE), requires_grad, device)
    return _finish(Tensor._make(np.zeros(size, d.np), d), requires_grad, device)


@_factory(varsize=True)
def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    size = _size(size)
    if is_meta(device):
        return _on_meta(size, d, requires_grad)
    if _symbolic(size):
        return _finish(ops.full(size, 1, d, like=_LIKE), requires_grad, device)
    return _finish(Tensor._make(np.ones(size, d.np), d), requires_grad, device)


@_factory(varsize=True, memory_format=True)
def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return zeros.__wrapped__(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False) -> Tensor:
    """``torch.empty_permuted``: a tensor of ``size`` whose memory holds its
    dims in the order ``physical_layout`` (outermost first), e.g.
    ``(0, 2, 3, 1)`` is channels-last for NCHW; its strides are PyTorch's."""
    _check_layout(layout)
    size, order = tuple(int(v) for v in size), tuple(int(v) for v in physical_layout)
    if len(order) != len(size):
        raise RuntimeError("Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(order)}")
    if len(set(order)) != len(order):
        raise RuntimeError("Duplicate dim not allowed")
    phys = empty(*[size[d] for d in order], dtype=dtype, device=device)
    out = phys.permute(*[order.index(d) for d in range(len(size))])
    return out.requires_grad_() if requires_grad else out


def _like(x, dtype):
    return dt.to_dtype(dtype) if dtype is not None else x.dtype


def _check_layout(layout) -> None:
    from tracec.tensor_meta import strided
    if layout is not None and layout is not strided:
        raise NotImplementedError(f"tracec: layout={layout} (tracec's tensors are all strided)")


def _formatted(t: Tensor, input, memory_format, requires_grad) -> Tensor:
    """``t`` (a new tensor like ``input``) in ``memory_format``'s layout, as
    PyTorch's ``*_like`` lay it out: ``preserve_format`` keeps ``input``'s
    channels-last layout where it has one; then ``requires_grad``."""
    if memory_format is None and input._data.flags.c_contiguous and \
            1 not in input._data.shape:    # the common case (size-one strides: keep_layout)
        return t._creation_requires_grad() if requires_grad else t
    from tracec import tensor_meta as tm
    if memory_format is None:
        memory_format = tm.preserve_format
    if not isinstance(memory_format, tm.memory_format):
        raise TypeError(f"memory_format must be a torch.memory_format, got "
                        f"{type(memory_format).__name__}")
    if memory_format is tm.preserve_format:
        for fmt in (tm.channels_last, tm.channels_last_3d):
            if input.ndim == tm._ORDERS[fmt][0] and not input.is_contiguous() and \
                    input.is_contiguous(memory_format=fmt):
                memory_format = fmt
                break
        else:
            # (any other layout: dense in the order of input's strides)
            t = tm.keep_layout(t, input)
            memory_format = tm.contiguous_format
    if memory_format is not tm.contiguous_format:
        t = tm.dense_copy(t, memory_format)     # checks the rank
    return t._creation_requires_grad() if requires_grad else t


def zeros_like(input, *, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None) -> Tensor:
    if layout is not None:
        _check_layout(layout)
    return _formatted(zeros(input.shape, dtype=_like(input, dtype), device=_like_device(input, device)), input,
                      memory_format, requires_grad)


def ones_like(input, *, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None) -> Tensor:
    if layout is not None:
        _check_layout(layout)
    return _formatted(ones(input.shape, dtype=_like(input, dtype), device=_like_device(input, device)), input,
                      memory_format, requires_grad)


def empty_like(input, *, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None) -> Tensor:
    return zeros_like(input, dtype=dtype, layout=layout, device=device,
                      requires_grad=requires_grad, memory_format=memory_format)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None) -> Tensor:
    if layout is not None:
        _check_layout(layout)
    return _formatted(full(input.shape, fill_value, dtype=_like(input, dtype),
                           device=_like_device(input, device)),
                      input, memory_format, requires_grad)


def _arange_bounds(args, bounds):
    """``(start, end, step)`` from arange's overloads, ``(end)`` and ``(start,
    end[, step])``, positional or by keyword: start is 0 when only the end is
    given (``arange(n)``, TransE-PyTorch's ``arange(end=n)``); ``start=``
    without an end is refused, as torch refuses it, rather than read as the
    end."""
    for k in bounds:
        if k not in ("start", "end", "step"):
            raise TypeError(f"arange() got an unexpected keyword argument '{k}'")
    if len(args) > 3:
        raise TypeError("arange() received an invalid combination of arguments")
    if len(args) == 1 and "start" not in bounds and "end" not in bounds:
        return 0, args[0], bounds.get("step", 1)
    vals = dict(zip(("start", "end", "step"), args))
    for k, v in bounds.items():
        if k in vals:
            raise TypeError(f"arange() got multiple values for argument '{k}'")
        vals[k] = v
    if "end" not in vals:
        if "start" in vals:
            raise TypeError('arange() missing 1 required positional arguments: "end"')
        raise TypeError("arange() received an invalid combination of arguments")
    return vals.get("start", 0), vals["end"], vals.get("step", 1)


@_factory()
def arange(*args, dtype=None, device=None, requires_grad=False, **bounds) -> Tensor:
    start, end, step = _arange_bounds(args, bounds)
    # 0-d tensors are numbers of their kind (TFT's arange(decoder_lengths.max()) is int64)
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, Tensor) and v.numel() != 1:
            raise TypeError(f"arange(): argument '{name}' must be Number, not Tensor")
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if all(isinstance(v, (int, float, np.integer, np.floating)) for v in (start, end, step)) \
            and (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    vals = [start, end, step]
    if dtype is None:
        dtype = dt.int64 if all(isinstance(v, (int, np.integer, Sym)) for v in vals) \
            else dt.get_default_dtype()
    d = dt.to_dtype(dtype)
    if any(isinstance(v, Sym) for v in vals) and isinstance(step, int) and step > 0 \
            and not isinstance(step, bool):
        # A symbolic length: start + step * iota(n), recorded with the symbols.
        n = (end - start + step - 1) // step
        r = ops.iota((n,), d, 0, like=_LIKE)
        if step != 1:
            r = r * step
        if not (isinstance(start, int) and start == 0):
            r = r + start
        return _finish(r, requires_grad, device)
    n = max(0, math.ceil((end - start) / step))
    if not d.is_floating_point and not any(isinstance(v, Sym) for v in vals):
        # ATen's integer arange: the values are start + i * step with start
        # and step truncated to integers; for int64 the length comes from
        # the truncated start, end and step too, for the other integer
        # types from the values as given (arange_cpu in RangeFactories.cpp).
        start, step = int(start), int(step)
        if d is dt.int64:
            if step == 0:
                raise RuntimeError("step must be nonzero")
            n = max(0, math.ceil((int(end) - start) / step))
        data = (start + np.arange(n, dtype=np.int64) * step).astype(d.np)
        return _finish(Tensor._make(data, d), requires_grad, device)
    if d in (dt.float16, dt.bfloat16):
        return _finish(Tensor._make(_half_arange(start, step, n, d), d), requires_grad, device)
    data = _float_arange(float(start), float(step), n, d) if d in _FLOAT_LANES \
        else (start + np.arange(n, dtype=np.float64) * step).astype(d.np) if d.is_floating_point \
        else np.arange(start, end, step, dtype=d.np)
    return _finish(Tensor._make(data, d), requires_grad, device)


#: the lanes of PyTorch's (AVX2) Vectorized<float> / <double>, which its
#: arange kernel fills
_FLOAT_LANES = {dt.float32: 8, dt.float64: 4}


def _fma(a, b, c):
    """``a * b + c`` in float64 arrays, the product exact (Dekker's split)
    and the sum a two-sum: as a fused multiply-add rounds it, but for rare
    ties (none in 900k arange elements checked against PyTorch)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    p = a * b

    def split(x):
        t = 134217729.0 * x       # 2**27 + 1
        hi = t - (t - x)
        return hi, x - hi
    (ah, al), (bh, bl) = split(a), split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    return s + (((p - (s - bb)) + (c - bb)) + e)


def _float_arange(start: float, step: float, n: int, d) -> np.ndarray:
    """float32 / float64 ``arange`` as PyTorch's CPU kernel computes it in
    double (its accumulate type), the compiler fusing its multiply-adds:
    the vectorized loop (two vectors a step) fills each vector from a base
    ``fma(step, i, start)`` (rounded to the dtype) plus ``k * step`` per
    lane, the scalar tail (the last ``n % (2 lanes)``) ``fma(step, i,
    start)``, each rounded once to the dtype.  One thread's loop: PyTorch
    splits more than 32768 elements among its threads, each chunk its own
    loop.  (``start + i * step`` was a unit off in the last place on 10-25%
    of elements: ``t = torch.arange(0, T, dt)`` of a solver.)"""
    lanes = _FLOAT_LANES[d]
    i = np.arange(n, dtype=np.float64)
    with np.errstate(all="ignore"):
        blk = np.floor(i / lanes) * lanes
        base = _fma(step, blk, start).astype(d.np).astype(np.float64)
        val = _fma(i - blk, step, base)
        tail = n // (2 * lanes) * (2 * lanes)
        val[tail:] = _fma(step, i[tail:], start)
        plain = start + i * step      # (where the split overflows: huge bounds)
        val = np.where(np.isfinite(val) | ~np.isfinite(plain), val, plain)
        return val.astype(d.np)       # (beyond float32's range: inf, as PyTorch's)


#: the lanes of PyTorch's Vectorized<Half/BFloat16>::arange, and the elements
#: its vectorized loop takes per step (two vectors) before the scalar tail
_ARANGE_LANES, _ARANGE_STEP = 16, 32


def _half_arange(start, step, n: int, d) -> np.ndarray:
    """float16 / bfloat16 ``arange`` as PyTorch's CPU kernel computes it (in
    float32, its accumulate type): each vector of 16 starts at
    ``start + step * i`` rounded to the dtype, its lanes that base plus
    ``k * step`` in float32, rounded; the last ``n % 32`` elements (the
    scalar tail) ``start + step * i`` rounded once.  (float64 arithmetic
    rounded once was one unit off on 10-25% of elements.)"""
    def rnd(a):
        a = np.asarray(a, np.float32)
        return dt.round_bfloat16(a) if d is dt.bfloat16 else a.astype(np.float16).astype(np.float32)
    s32, st32 = np.float32(start), np.float32(step)
    i = np.arange(n)
    blk = i // _ARANGE_LANES * _ARANGE_LANES
    with np.errstate(all="ignore"):
        val = rnd(rnd(s32 + st32 * blk.astype(np.float32))
                  + st32 * (i - blk).astype(np.float32))
        tail = n // _ARANGE_STEP * _ARANGE_STEP
        val[tail:] = rnd(s32 + st32 * i[tail:].astype(np.float32))
    return val if d is dt.bfloat16 else val.astype(np.float16)


def _f64(v):
    """An end point as a float64 0-d tensor (a tensor one detached)."""
    if isinstance(v, Tensor):
        return ops.cast(ops.reshape(v.detach(), ()), dt.float64)
    return ops.full((), float(v), dt.float64, like=_LIKE)


@_factory()
def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if dtype is not None:
        d = dt.to_dtype(dtype)
    elif any(isinstance(v, complex) for v in (start, end)):
        d = dt.get_default_complex()     # a complex end point: PyTorch's default complex
    else:
        d = dt.get_default_dtype()
    if isinstance(steps, (int, np.integer)) and steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    ends = [v for v in (start, end) if isinstance(v, Tensor)]
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, Tensor) and v.ndim:
            raise RuntimeError(f"linspace only supports 0-dimensional start and end tensors, "
                               f"but got {name} with {v.ndim} dimension(s).")
    if ends and not isinstance(steps, Sym) and steps < 2:
        # one point is start (NumPy's and PyTorch's), none is empty
        y = ops.reshape(ops.cast(_f64(start), d), (1,))
        return _finish(y if steps == 1 else ops.slice_(y, (0,), (0,), (1,)), requires_grad,
                       device)
    if (isinstance(steps, Sym) and d.is_floating_point or ends) and not any(
            isinstance(v, complex) or isinstance(v, Tensor) and v.dtype.is_complex
            for v in (start, end)):
        # A symbolic count or tensor end points (traced ones included): the
        # kernel's two halves (``_linspace_kernel``) from an iota, recorded.
        # The step is rounded to the op-math type (float32 below float64);
        # float64 points are fused by ``_fma64``'s exact product and sum, and
        # float32 ones formed in float64 (where a float32 product is exact),
        # so both are the kernel's (bar a double-rounding tie).
        i = ops.iota((steps,), dt.float64, 0, like=_LIKE)
        # steps - 1 as an operand: a symbolic count stays symbolic (float()
        # of it would specialize the trace on this call's size)
        n1 = steps - 1 if isinstance(steps, Sym) else float(steps - 1)
        a, b = _f64(start), _f64(end)
        if not d.is_floating_point:   # the ends as the integer type first (toward zero)
            a, b = ops.cast(ops.cast(a, d), dt.float64), ops.cast(ops.cast(b, d), dt.float64)
        half = ops.lt(i, steps // 2)
        k = ops.where(half, i, ops.sub(n1, i))
        base = ops.where(half, a, b)
        if d.is_floating_point and d.itemsize == 2:
            # every step rounded to the type, as ``_linspace_reduced``
            def rnd(x):
                return ops.cast(ops.cast(x, d), dt.float32)
            a, b = rnd(a), rnd(b)
            step = rnd(ops.div(rnd(ops.sub(b, a)),
                               rnd(ops.add(ops.full((), 0.0, dt.float64, like=_LIKE), n1))))
            low = rnd(ops.add(a, rnd(ops.mul(step, rnd(i)))))
            high = rnd(ops.sub(b, rnd(ops.mul(step, rnd(k)))))
            y = ops.where(half, low, high)
        elif d.is_floating_point and d is not dt.float64:
            a, b = ops.cast(ops.cast(a, dt.float32), dt.float64), ops.cast(ops.cast(b, dt.float32),
                                                                           dt.float64)
            base = ops.where(half, a, b)
            step = ops.cast(ops.div(ops.cast(ops.sub(b, a), dt.float32), n1), dt.float64)
            y = ops.add(ops.mul(ops.where(half, step, ops.neg(step)), k), base)
        else:
            step = ops.div(ops.sub(b, a), steps - 1)
            y = _fma64(ops.where(half, step, ops.neg(step)), k, base)
        return _finish(ops.cast(y, d), requires_grad, device)
    if d.is_complex or any(isinstance(v, complex) for v in (start, end)):
        data = np.linspace(start, end, steps).astype(d.np)
    else:
        data = _linspace_kernel(start, end, steps, d)
    return _finish(Tensor._make(data, d), requires_grad, device)


def _fma64(a, b, c):
    """``a * b + c`` in float64 arrays or tensors (their operators), rounded
    once (as C's ``fma``):
    Dekker's exact product and Knuth's two-sum, their errors added back.
    (Off by one ulp only where the two partial roundings tie, which the
    sizes linspace makes do not reach in practice.)"""
    p = a * b
    sa, sb = a * 134217729.0, b * 134217729.0   # Veltkamp splits (2**27 + 1)
    ah, bh = sa - (sa - a), sb - (sb - b)
    al, bl = a - ah, b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)
    return s + (t + e)


def _linspace_kernel(start, end, steps, d):
    """PyTorch's CPU linspace kernel value for value (RangeFactoriesKernel:
    ``step = (end - start) / (steps - 1)`` in the op-math type (float32 for
    float32 / float16 / bfloat16, float64 for float64 and the integer types);
    the first ``steps // 2`` points ``start + step * i`` and the rest
    ``end - step * (steps - 1 - i)``, each a fused multiply-add (the kernel is
    compiled with contraction), so the midpoint of ``linspace(-2, 2, 11)`` is
    -2**-25, not 0; integer points truncate toward zero).  NumPy's
    ``start + i * step`` rounds differently in the last place."""
    if steps == 0:
        return np.zeros(0, d.np)
    if steps == 1:
        return np.array([start], np.float64).astype(d.np)
    if d.is_floating_point and d.itemsize == 2:
        return _linspace_reduced(start, end, steps, d)
    wide = d is dt.float64 or not d.is_floating_point
    w = np.float64 if wide else np.float32
    if d.is_floating_point:
        a, b = w(start), w(end)
    else:   # the end points as the integer type first (toward zero)
        a, b = w(int(start)), w(int(end))
    step = w((b - a) / w(steps - 1))
    i = np.arange(steps, dtype=np.float64)
    half = steps // 2
    k = np.where(i < half, i, steps - 1 - i)
    base = np.where(i < half, np.float64(a), np.float64(b))
    sgn = np.where(i < half, 1.0, -1.0)
    if wide:
        vals = _fma64(sgn * np.float64(step), k, base)
    else:
        # float32 operands: their product is exact in float64, so one
        # float64 add and the rounding to float32 make the fused result
        # (bar a double-rounding tie)
        vals = (sgn * np.float64(step) * k + base).astype(np.float32)
    return vals.astype(d.np)


def _linspace_reduced(start, end, steps, d):
    """float16 / bfloat16: the same two halves, but in the type's own
    arithmetic (c10::Half's operators round every product and sum to it,
    and nothing fuses)."""
    def rnd(x):
        x = np.asarray(x, np.float32)
        return dt.round_bfloat16(x) if d is dt.bfloat16 else x.astype(d.np).astype(np.float32)
    a, b = rnd(start), rnd(end)
    step = rnd(rnd(b - a) / rnd(steps - 1))
    i = np.arange(steps)
    half = steps // 2
    low = rnd(a + rnd(step * rnd(i)))
    high = rnd(b - rnd(step * rnd(steps - 1 - i)))
    return np.where(i < half, low, high).astype(d.np)


@_factory()
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if isinstance(n, Sym) or isinstance(m, Sym):
        # A symbolic size: row == column over two iotas, recorded with it.
        shape = (n, n if m is None else m)
        on = ops.eq(ops.iota(shape, dt.int64, 0, like=_LIKE), ops.iota(shape, dt.int64, 1,
                                                                       like=_LIKE))
        return _finish(ops.cast(on, d), requires_grad, device)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _finish(Tensor._make(np.eye(n, m, dtype=d.np), d), requires_grad, device)


# --- random ---------------------------------------------------------------------

#: The generators' state tensors: a trace never specializes on their values
#: (they advance at every draw; ``tracing.Recording._guard_value``).
GENERATOR_STATES: "weakref.WeakValueDictionary[int, Tensor]" = weakref.WeakValueDictionary()


class Generator:
    """A counter-based generator: state ``int64[2] = (seed, offset)``."""

    def __init__(self, device="cpu"):
        self.state = Tensor._make(np.array([0, 0], np.int64), dt.int64)
        GENERATOR_STATES[id(self.state)] = self.state
        self.device = to_device(device)
        # PyTorch seeds a new generator with its default seed, 67280421310721.
        self.state._data[0] = 67280421310721
        #: PyTorch's Mersenne Twister: eager draws (``eager_mt``) follow
        #: PyTorch's CPU streams (``torch_rng``).
        self.mt = torch_rng.MTState(67280421310721)

    def eager_mt(self):
        """The Mersenne Twister to draw from when nothing records (eager
        draws give PyTorch's numbers), else None: a traced draw goes through
        the ``random_uniform`` primitive on ``state``, so compiled calls draw
        afresh."""
        if torch_rng.VMAP_NO_RANDOM[0]:
            raise RuntimeError(torch_rng.VMAP_RANDOM_MSG)
        if RECORDERS and torch_rng.FALLBACK_RANDOM[0] and torch_rng.STREAMS[0] and \
                type(self.state._data) is np.ndarray:
            # fallback_random: PyTorch's numbers while tracing too; the
            # compiler sees the count and runs the function eagerly.
            torch_rng.TRACED_EAGER_DRAWS[0] += 1
            return self.mt
        return self._eager()

    def _eager(self):
        if RECORDERS or not torch_rng.STREAMS[0] or type(self.state._data) is not np.ndarray:
            return None
        return self.mt

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the seed."""
        s = int.from_bytes(np.random.bytes(7), "little")
        self.manual_seed(s)
        return s

    def clone_state(self) -> "Generator":
        g = Generator()
        g.set_state(self.get_state())
        return g

    # Inside tracec.compile the state is a traced tensor: writes to it are
    # recorded in-place writes and reads are recorded copies or concrete()
    # (a Python value from it would be the first call's at every call).

    def manual_seed(self, seed: int) -> "Generator":
        new = np.array([int(seed) & 0x7FFFFFFFFFFFFFFF, 0], np.int64)
        self.mt.seed(int(seed))
        if RECORDERS:
            with graph.no_grad():
                self.state._assign(Tensor._make(new, dt.int64), "manual_seed")
            return self
        self.state._data[...] = new
        self.state._vbox[0] += 1
        return self

    def initial_seed(self) -> int:
        return int(concrete(self.state, "initial_seed()")[0])

    def get_state(self) -> Tensor:
        """Eagerly, PyTorch's ``uint8[5056]`` state (its Mersenne Twister,
        byte for byte; tracec's compiled-draw offset in a field PyTorch
        leaves 0).  While tracing, a recorded copy of the ``int64[2]``
        (seed, offset) state that compiled draws use."""
        if self._eager() is None:
            return ops.cast(self.state, dt.int64)   # a copy (recorded when traced)
        seed, offset = (int(v) for v in self.state._data)
        raw = np.frombuffer(self.mt.to_bytes(seed, offset), np.uint8).copy()
        return Tensor._make(raw, dt.uint8)

    def set_state(self, state: Tensor) -> None:
        """Either of ``get_state``'s forms: PyTorch's bytes (also a state
        saved by PyTorch itself) or tracec's traced (seed, offset)."""
        if not isinstance(state, Tensor):
            raise TypeError(f"expected a torch.ByteTensor, but got {type(state).__name__}")
        if tuple(state.shape) == (2,) and state.dtype is not dt.uint8:
            with graph.no_grad():
                self.state._assign(ops.cast(state.detach(), dt.int64), "set_rng_state")
            return
        if state.dtype is not dt.uint8:
            raise TypeError(f"expected a torch.ByteTensor, but got {state.dtype}")
        raw = np.ascontiguousarray(concrete(state, "set_rng_state() with PyTorch's state"))
        mt, seed, offset = torch_rng.MTState.from_bytes(raw.tobytes())
        new = np.array([seed & 0x7FFFFFFFFFFFFFFF, offset], np.int64)
        with graph.no_grad():
            self.state._assign(Tensor._make(new, dt.int64), "set_rng_state")
        self.mt = mt

    def uniform(self, shape, dtype: dt.DType) -> Tensor:
        """``shape`` draws in [0, 1); advances the offset by their count."""
        with graph.no_grad():
            u = ops.random_uniform(self.state, shape, dtype)
            self._skip(math.prod(shape))
        return u

    def _skip(self, n) -> None:
        """Advance the offset past ``n`` draws."""
        with graph.no_grad():
            if isinstance(n, Sym):
                # A symbolic count (a batch size): the offset advances by it
                # at run time instead of specializing the trace to one size.
                step = ops.mul(Tensor._make(np.array([0, 1], np.int64), dt.int64), n)
            else:
                step = Tensor._make(np.array([0, n], np.int64), dt.int64)
            self.state._assign(ops.add(self.state, step), "rng")


# PyTorch's torch.Generator is torch._C.Generator (its pickled name): there too
_C.Generator = Generator
default_generator = Generator()
default_generator.manual_seed(0)


def manual_seed(seed: int) -> Generator:
    return default_generator.manual_seed(seed)


def seed() -> int:
    # A seed from the OS cannot be recorded: inside tracec.compile every call
    # would reseed with the first call's (concrete() refuses it there).
    concrete(default_generator.state, "seed() (a fresh nondeterministic seed)")
    s = int.from_bytes(np.random.bytes(7), "little")
    manual_seed(s)
    return s


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    default_generator.set_state(new_state)


def _float_dtype(dtype):
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"expected a floating point dtype, got {d}")
    return d


def _complex_draw(draw, size, d, generator, scale):
    """A complex tensor whose real and imaginary parts are two real draws
    (each scaled by ``scale``), as PyTorch's complex rand/randn (eager only)."""
    parts = draw(*_size(size), 2, generator=generator, dtype=dt.real_of(d))
    a = concrete(parts, f"{draw.__name__}(dtype={d}) (complex values are eager only)")
    a = np.ascontiguousarray(a * scale if scale != 1 else a)
    return Tensor._make(a.view(d.np)[..., 0], d)


def drawn(values: np.ndarray, shape, d) -> Tensor:
    """A new tensor of dtype ``d`` and ``shape`` holding eager draws
    (``torch_rng``'s, in the dtype's carrier; bfloat16 rounded from float32)."""
    v = values.reshape(tuple(shape))
    if d is dt.bfloat16:
        return ops.cast(Tensor._make(v.astype(np.float32, copy=False), dt.float32), d)
    return Tensor._make(v.astype(d.np, copy=False), d)


def memory_order_draw(t: Tensor, draw) -> np.ndarray:
    """``draw(n)`` (n flat draws) laid out in ``t``'s shape in the order of
    its storage: PyTorch's TensorIterator fills a strided tensor (a
    transpose, a channels-last map) in memory order, not in index order."""
    return ordered_draw(tuple(t.shape), memory_order(t), draw)


def memory_order(t: Tensor) -> list[int]:
    """``t``'s dimensions from the outermost in its storage to the innermost."""
    st = t.stride() if t.ndim else ()
    return sorted(range(t.ndim), key=lambda i: -st[i])


def ordered_draw(shape, perm, draw) -> np.ndarray:
    """``draw(n)`` laid out in ``shape`` filling dimension ``perm[0]``
    outermost, ``perm[-1]`` innermost."""
    v = np.asarray(draw(math.prod(shape))).reshape([shape[i] for i in perm])
    return np.transpose(v, np.argsort(perm))


def _like_fill_order(input, memory_format):
    """The dimension order (outermost first) in which PyTorch fills the new
    tensor of a random ``*_like`` (``empty_like(input).uniform_()``): a
    non-overlapping dense input's own layout under ``preserve_format`` (a
    transpose, a channels-last map), the format's for an explicit one;
    None for row-major."""
    from tracec import tensor_meta as tm
    shape, st = tuple(input.shape), (input.stride() if input.ndim else ())
    if memory_format is None or memory_format is tm.preserve_format:
        perm = sorted(range(len(shape)), key=lambda i: -st[i])
        expected = 1
        for i in reversed(perm):
            if shape[i] != 1 and st[i] != expected:
                return None                    # overlapping or with gaps: row-major here
            expected *= shape[i]
    elif memory_format in tm._ORDERS and input.ndim == tm._ORDERS[memory_format][0]:
        perm = list(tm._ORDERS[memory_format][1])
    else:
        return None
    rank = [i for i in perm if shape[i] != 1]
    return None if rank == sorted(rank) else perm


def _drawn_like(input, memory_format, generator, device, d, draw):
    """Eagerly, when PyTorch fills a random ``*_like`` out of row-major
    order (``_like_fill_order``): a tensor of dtype ``d`` holding
    ``draw(mt, n)`` in that order; else None (the row-major draw is it)."""
    if memory_format is None and input._data.flags.c_contiguous or is_meta(device):
        return None
    mt = (generator or default_generator).eager_mt()
    perm = None if mt is None or type(input._data) is not np.ndarray else \
        _like_fill_order(input, memory_format)
    if perm is None:
        return None
    t = drawn(ordered_draw(tuple(input.shape), perm, lambda n: draw(mt, n)), input.shape, d)
    return _finish(t, False, device)


def carrier(d) -> np.dtype:
    """The NumPy dtype eager draws for ``d`` are made in."""
    return np.dtype(np.float32) if d is dt.bfloat16 else d.np


@_factory(varsize=True)
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    if is_meta(device):
        return _on_meta(size, _float_dtype(dtype), requires_grad)
    g = generator or default_generator
    if dtype is not None and dt.to_dtype(dtype).category == 3:
        return _finish(_complex_draw(rand, size, dt.to_dtype(dtype), generator, 1),
                       requires_grad, device)
    d = _float_dtype(dtype)
    shape = _size(size)
    mt = g.eager_mt()
    if mt is not None and all(isinstance(k, int) for k in shape):
        u = drawn(torch_rng.uniform(mt, math.prod(shape), carrier(d),
                                    reduced=d.name if d in (dt.float16, dt.bfloat16) else None),
                  shape, d)
        return _finish(u, requires_grad, device)
    u = g.uniform(shape, d)
    return _finish(u, requires_grad, device)


@_factory(varsize=True)
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    if is_meta(device):
        return _on_meta(size, _float_dtype(dtype), requires_grad)
    g = generator or default_generator
    if dtype is not None and dt.to_dtype(dtype).category == 3:
        # Each part is N(0, 1/2), so that E|z|^2 = 1.
        return _finish(_complex_draw(randn, size, dt.to_dtype(dtype), generator,
                                     math.sqrt(0.5)), requires_grad, device)
    d = _float_dtype(dtype)
    shape = _size(size)
    n = math.prod(shape)
    mt = g.eager_mt()
    if mt is not None and isinstance(n, int):
        z = torch_rng.normal(mt, n, carrier(d), reduced=d in (dt.float16, dt.bfloat16))
        return _finish(drawn(z, shape, d), requires_grad, device)
    if not RECORDERS and isinstance(n, int) and n >= _BLOCKED_RANDN and \
            d in (dt.float32, dt.float64) and type(g.state._data) is np.ndarray:
        return _finish(_blocked_randn(g, shape, n, d), requires_grad, device)
    with graph.no_grad():
        # Box-Muller in float64 for every dtype: rounded to float32, its
        # result no longer depends on the last ulp of log/cos, which NumPy
        # and a compiled backend need not agree on, so eager and compiled
        # randn stay bit-identical.
        work = dt.float64
        u = g.uniform((2, n), work)
        u1 = ops.slice_(u, (0, 0), (1, n), (1, 1))
        u2 = ops.slice_(u, (1, 0), (2, n), (1, 1))
        # Box-Muller; 1 - u1 lies in (0, 1], so the log is finite.
        r = ops.sqrt(ops.mul(ops.log(ops.sub(1.0, u1)), -2.0))
        z = ops.reshape(ops.mul(r, ops.cos(ops.mul(u2, 2 * math.pi))), shape)
        if z.dtype is not d:
            z = ops.cast(z, d)
    return _finish(z, requires_grad, device)


#: Eager randn of at least this many elements is drawn block by block.
_BLOCKED_RANDN = 1 << 16


def _blocked_randn(g, shape, n, d) -> Tensor:
    """Eager ``randn``'s numbers (bit for bit: the same draws and the same
    NumPy operations in the same order as the recordable path below) made
    block by block, so that the float64 temporaries stay in cache instead
    of five arrays of 8n bytes (VGG's 100M-element classifier init)."""
    from tracec.ops.random import _BLOCK, _uniform_impl, in_parallel
    seed, offset = (int(v) for v in g.state._data)
    out = np.empty(n, d.np)
    two_pi = np.float64(2 * math.pi)

    def fill(start, stop):      # (on several threads for a large draw: random.in_parallel)
        with np.errstate(all="ignore"):
            for lo in range(start, stop, _BLOCK):
                m = min(_BLOCK, stop - lo)
                u1 = _uniform_impl((seed, offset + lo), shape=(m,), dtype=dt.float64)
                u2 = _uniform_impl((seed, offset + n + lo), shape=(m,), dtype=dt.float64)
                r = np.subtract(np.float64(1.0), u1)
                np.log(r, out=r)
                np.multiply(r, np.float64(-2.0), out=r)
                np.sqrt(r, out=r)
                np.multiply(u2, two_pi, out=u2)
                np.cos(u2, out=u2)
                np.multiply(r, u2, out=r)
                out[lo:lo + m] = r
    in_parallel(n, fill)
    g._skip(2 * n)
    return Tensor._make(out.reshape(shape), d)


def _randint_bounds(args, bounds, size):
    """``(low, high, size)`` from randint's overloads, ``(high, size)`` and
    ``(low, high, size)``, the bounds positional or by keyword: low is 0 when
    only high is given (``randint(10, (3,))``, TransE-PyTorch's
    ``randint(high=2, size=...)``); ``low=`` without a high is refused, as
    torch refuses it, rather than read as the high."""
    for k in bounds:
        if k not in ("low", "high"):
            raise TypeError(f"randint() got an unexpected keyword argument '{k}'")
    args = list(args)
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = args.pop()                      # randint(high, size), as nanoGPT calls it
    if size is None and len(args) == 3:
        size = args.pop()
    if len(args) + len(bounds) > 2 or ("low" in bounds and args):
        raise TypeError("randint() received an invalid combination of arguments: it takes "
                        "(high, size) or (low, high, size)")
    if "high" in bounds:
        low, high = (args[0] if args else bounds.get("low", 0)), bounds["high"]
    elif len(args) == 2:
        low, high = args
    elif args:
        low, high = 0, args[0]
    elif "low" in bounds:
        raise TypeError('randint() missing 2 required positional argument: "high", "size"')
    else:
        high = None
    if high is None or size is None:
        raise TypeError("randint() received an invalid combination of arguments: it takes "
                        "(high, size) or (low, high, size)")
    return low, high, size


@_factory()
def _eager_int(v):
    """``v``, or its value where it is a one-element integer tensor: eager
    draws read such a count or bound as torch does (hashnerf's
    ``randint(0, resolution - cube_size, (3,))``, orobix's
    ``randperm(self.numel_per_class[label_idx])``), so they take torch's
    stream. Only for eager draws: traced, the tensor's value is not known."""
    if isinstance(v, Tensor) and v.numel() == 1 and v.dtype.category == 1:
        return int(v.item())
    return v


def randint(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False,
            **bounds) -> Tensor:
    low, high, size = _randint_bounds(args, bounds, size)
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")
    if is_meta(device):
        return _on_meta(size if isinstance(size, (tuple, list)) else (size,),
                          dt.to_dtype(dtype) if dtype is not None else dt.int64, requires_grad)
    g = generator or default_generator
    shape = _size(size if isinstance(size, (tuple, list)) else (size,))
    d = dt.to_dtype(dtype) if dtype is not None else dt.int64
    mt = g.eager_mt()
    if mt is not None:
        low, high = _eager_int(low), _eager_int(high)
    if mt is not None and all(isinstance(k, int) for k in shape) and \
            isinstance(low, (int, np.integer)) and isinstance(high, (int, np.integer)):
        r = torch_rng.randint(mt, math.prod(shape), int(low), int(high)).reshape(shape)
        return _finish(Tensor._make(r.astype(d.np, copy=False), d), requires_grad, device)
    with graph.no_grad():
        u = g.uniform(shape, dt.float64)
        r = ops.add(ops.cast(ops.mul(u, float(high - low)), dt.int64), low)
        if d is not dt.int64:
            r = ops.cast(r, d)
    return _finish(r, requires_grad, device)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None) -> Tensor:
    if layout is not None:
        _check_layout(layout)
    d = _like(input, dtype)
    t = _drawn_like(input, memory_format, generator, _like_device(input, device), d,
                    lambda mt, n: torch_rng.uniform(
                        mt, n, carrier(d),
                        reduced=d.name if d in (dt.float16, dt.bfloat16) else None)) \
        if d.is_floating_point and d.category != 3 else None
    if t is None:
        t = rand(input.shape, dtype=d, generator=generator, device=_like_device(input, device))
    return _formatted(t, input, memory_format, requires_grad)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None) -> Tensor:
    if layout is not None:
        _check_layout(layout)
    d = _like(input, dtype)
    # (the new tensor is not contiguous: PyTorch's scalar normal path)
    t = _drawn_like(input, memory_format, generator, _like_device(input, device), d,
                    lambda mt, n: torch_rng.normal(mt, n, carrier(d), contiguous=False)) \
        if d.is_floating_point and d.category != 3 else None
    if t is None:
        t = randn(input.shape, dtype=d, generator=generator, device=_like_device(input, device))
    return _formatted(t, input, memory_format, requires_grad)


def randint_like(input, low, high=None, *, generator=None, dtype=None, layout=None,
                 device=None, requires_grad=False, memory_format=None) -> Tensor:
    if layout is not None:
        _check_layout(layout)
    bounds = (low,) if high is None else (low, high)
    d = _like(input, dtype)
    lo, hi = (0, low) if high is None else (low, high)
    t = _drawn_like(input, memory_format, generator, _like_device(input, device), d,
                    lambda mt, n: torch_rng.randint(mt, n, int(lo), int(hi))) \
        if isinstance(lo, (int, np.integer)) and isinstance(hi, (int, np.integer)) and lo < hi \
        else None
    if t is None:
        t = randint(*bounds, input.shape, dtype=d, generator=generator,
                    device=_like_device(input, device))
    return _formatted(t, input, memory_format, requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None) -> Tensor:
    # The order of n uniforms: recorded (argsort is a primitive), so a
    # compiled function draws a new permutation at every call.
    if is_meta(device):
        return _on_meta((n,), dt.to_dtype(dtype or dt.int64), False)
    g = generator or default_generator
    d = dt.to_dtype(dtype or dt.int64)
    mt = g.eager_mt()
    if mt is not None:
        n = _eager_int(n)
    if mt is not None and isinstance(n, (int, np.integer)):
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
        perm = torch_rng.randperm(mt, int(n))
        return _finish(Tensor._make(perm.astype(d.np, copy=False), d), False, device)
    u = g.uniform((n,), dt.float64)
    perm = ops.argsort(u, 0)
    return _finish(perm if d is dt.int64 else ops.cast(perm, d), False, device)


#: PyTorch's message for a tensor of probabilities outside [0, 1].
BAD_P = "Expected p_in >= 0 && p_in <= 1 to be true, but got false."


def checked_probabilities(p: Tensor) -> Tensor:
    """``p``, checked to lie in [0, 1] (NaN passes, as in PyTorch): in Python
    in eager mode, by a recorded ``check`` while tracing (so that a compiled
    call checks its own ``p``)."""
    if RECORDERS:
        return ops.check(p, ops.logical_not(ops.logical_or(ops.lt(p, 0), ops.gt(p, 1))), BAD_P)
    if np.any((p._data < 0) | (p._data > 1)):
        raise RuntimeError(BAD_P)
    return p


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    if p is not None:           # bernoulli(input, p): input's shape and dtype, probability p
        return input.bernoulli(p, generator=generator)
    input = checked_probabilities(input)
    g = generator or default_generator
    mt = g.eager_mt()
    if mt is not None and type(input._data) is np.ndarray:
        hit = torch_rng.bernoulli_tensor(mt, np.asarray(input._data))
        draws = Tensor._make(hit.astype(input.dtype.np), input.dtype)
    else:
        u = g.uniform(input.shape, input.dtype)
        with graph.no_grad():
            draws = ops.cast(ops.lt(u, input), input.dtype)
    if not (input.requires_grad and graph.is_grad_enabled()):
        return draws
    from tracec.methods import filled   # PyTorch's result keeps input's history (zero gradient)
    return filled(input, draws, "BernoulliBackward0")

