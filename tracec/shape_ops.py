"""Shape and structure functions: reshape/view, permute, transpose,
squeeze/unsqueeze, expand, flatten, cat/stack/split/chunk, masked_fill,
gather, one_hot, clone, contiguous and dtype conversion.

Invariant: ``view`` and friends never copy (PyTorch raises where a view is
impossible); ``reshape`` copies only when it must.
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec import graph, ops
from tracec.functions import _named, _operand, promote
from tracec.ops.core import normalize_axis
from tracec.ops.elementwise import INDEX_VALUE
from tracec.symbolic import Sym, count_of
from tracec.tensor import (RECORDERS, SPARSE, SYM_SHAPES, Tensor, _new_tensor, bind_movement,
                           concrete, eager_direct, mark_multi_output)


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if type(s) is not int:
            break
    else:  # plain ints (the common case): nothing to convert
        return shape
    out = []
    for s in shape:
        if isinstance(s, Tensor):
            s = int(s)
        if isinstance(s, Sym):   # a symbolic size of a traced call
            out.append(s)
            continue
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"shape must be a sequence of ints, got {type(s).__name__}")
        out.append(int(s))
    return tuple(out)


def _infer(x, shape: tuple) -> tuple:
    """``shape`` with its -1 filled in, checked against ``x``'s size."""
    n = x.numel() if SYM_SHAPES else x._data.size
    known, hole, bad = 1, -1, False
    for i, s in enumerate(shape):
        if s == -1:
            if hole >= 0:
                raise RuntimeError("only one dimension can be inferred")
            hole = i
        else:
            known *= s
            bad = bad or s < 0
    if hole >= 0:
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
        shape = shape[:hole] + (n // known,) + shape[hole + 1:]
    elif known != n:
        bad = True
    if bad:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
    return shape


_RESHAPE = ops.movement.reshape_p


def _reshape(x, shape: tuple):
    return _named(bind_movement(_RESHAPE, x, {"shape": shape}), "ViewBackward0")


def _one_keyword(args, value, name, fn):
    # ``f(x, *sizes)`` also takes PyTorch's keyword (``reshape(x, shape=(2, 3))``).
    if value is None:
        return args
    if args:
        raise TypeError(f"{fn}() got multiple values for argument '{name}'")
    return (value,)


def reshape(input, *shape_, shape=None):
    if shape is not None:
        shape_ = _one_keyword(shape_, shape, "shape", "reshape")
    return _reshape(input, _infer(input, _shape_arg(shape_)))


def view(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], dt.DType):
        raise NotImplementedError("view(dtype) is not supported")
    out = _reshape(x, _infer(x, _shape_arg(shape)))
    # The eager bind links a result to its source iff it shares its memory.
    if out._base is None and x._data.size:
        raise RuntimeError("view size is not compatible with input tensor's size and stride "
                           "(at least one dimension spans across two contiguous subspaces). "
                           "Use .reshape(...) instead.")
    return out


def view_as(x, other):
    return view(x, *other.shape)


def reshape_as(x, other):
    return reshape(x, *other.shape)


def permute(input, *dims_, dims=None):
    dims = _shape_arg(_one_keyword(dims_, dims, "dims", "permute") if dims is not None
                      else dims_)
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {input.ndim} is not equal to len(dims) = {len(dims)}")
    perm = tuple(normalize_axis(d, input.ndim) for d in dims)
    if len(set(perm)) != len(perm):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _named(ops.transpose(input, perm), "PermuteBackward0")


def transpose(input, dim0, dim1):
    if input.ndim == 0:
        return input
    a, b = normalize_axis(dim0, input.ndim), normalize_axis(dim1, input.ndim)
    perm = list(range(input.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    out = _named(ops.transpose(input, perm), "TransposeBackward0")
    return _sparse_transposed(out, input, a, b) if SPARSE else out


def _sparse_transposed(out, input, a, b):
    """The transpose of a COO tensor over two of its sparse dims: a COO
    tensor, its index rows swapped (uncoalesced, as PyTorch's); of a CSR
    (CSC) matrix: the CSC (CSR) matrix of the same index arrays."""
    from tracec.contraction import mark_sparse, sparse_info
    info = sparse_info(input)
    if info is None:
        from tracec.sparse_compressed import compressed_transposed
        return compressed_transposed(out, input, a, b)
    indices = info[0]
    if max(a, b) >= indices.shape[0]:
        raise RuntimeError("transpose(): can only transpose sparse dims of a sparse COO tensor "
                           "(tracec: the dense dims too are not supported)")
    rows = list(range(indices.shape[0]))
    rows[a], rows[b] = rows[b], rows[a]
    values = info[1] if not info[2] else input._values()
    swapped = Tensor._make(np.ascontiguousarray(indices._data[rows]), indices.dtype)
    return mark_sparse(out, swapped, values, info[2] and (a == b or indices.shape[1] <= 1))


swapdims = transpose


def swapaxes(input, axis0, axis1):
    """``torch.swapaxes``: ``transpose`` under NumPy's argument names."""
    return transpose(input, axis0, axis1)


def t(input):
    if SPARSE and input.is_sparse and input.dense_dim():
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but "
                           f"got {input.sparse_dim()} sparse and {input.dense_dim()} dense "
                           "dimensions")
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return _named(transpose(input, 0, -1) if input.ndim == 2 else input, "TBackward0")


def T(x):
    return _named(ops.transpose(x, tuple(reversed(range(x.ndim)))), "PermuteBackward0")


def mT(x):
    return transpose(x, -2, -1)


def squeeze(input, dim=None):
    if dim is None:
        shape = tuple(s for s in input.shape if s != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = {normalize_axis(d, input.ndim) for d in dims}
        shape = tuple(s for i, s in enumerate(input.shape) if not (i in axes and s == 1))
    # PyTorch's overloads: squeeze(), squeeze(dim), squeeze(dims)
    name = "SqueezeBackward0" if dim is None else \
        "SqueezeBackward2" if isinstance(dim, (tuple, list)) else "SqueezeBackward1"
    return _named(ops.reshape(input, shape), name)


def unsqueeze(input, dim):
    d = normalize_axis(dim, input.ndim + 1)
    s = tuple(input.shape)      # (once: each slice of a Size is a Size)
    return _named(ops.reshape(input, s[:d] + (1,) + s[d:]), "UnsqueezeBackward0")


def expand(x, *sizes, size=None, implicit=False):
    if size is not None:
        sizes = _one_keyword(sizes, size, "size", "expand")
    sizes = _shape_arg(sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError(f"expand({x.type()}{{{list(x.shape)}}}, size={list(sizes)}): the "
                           f"number of sizes provided ({len(sizes)}) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({x.ndim})")
    lead = len(sizes) - x.ndim
    for i in range(lead):
        if sizes[i] == -1:
            raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                               f"non-existing dimension {i}")
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    return _named(ops.broadcast_to(x, shape), "ExpandBackward0")


def expand_as(x, other):
    return expand(x, *other.shape)


def broadcast_to(input, size):
    return expand(input, *size)


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, 1)
    a, b = normalize_axis(start_dim, input.ndim), normalize_axis(end_dim, input.ndim)
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = (tuple(input.shape[:a]) + (math.prod(input.shape[a:b + 1]),)
             + tuple(input.shape[b + 1:]))
    return reshape(input, shape)


def unflatten(input, dim, sizes):
    d = normalize_axis(dim, input.ndim)
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = input.shape[d]
    known = math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if (-1 in sizes and (known == 0 or n % known)) or (-1 not in sizes and known != n):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({n}) in the input tensor")
    if -1 in sizes:
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    return reshape(input, tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1:]))


def tensor_sequence(tensors, name: str) -> list:
    """``tensors`` as a list; a single Tensor is refused as PyTorch's
    argument parser refuses it (iterating it would join its rows: SSD's
    ``center_size`` passes ``torch.cat(t, t, 1)``'s first tensor alone)."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        "not Tensor")
    tensors = list(tensors)
    for i, t_ in enumerate(tensors):
        if not isinstance(t_, Tensor):
            from tracec.functions import _arg_type_name
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{_arg_type_name(t_)}")
    return tensors


def cat(tensors, dim=0):
    tensors = tensor_sequence(tensors, "cat")
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    # PyTorch skips legacy empty 1-D tensors, but they still take part in
    # the result's dtype (DINO's MultiCropWrapper grows its output from
    # torch.empty(0): cat((empty(0), int64 tensor)) is float32).
    cast, _ = promote("cat", *tensors)
    tensors = [c for c, t_ in zip(cast, tensors)
               if not (t_.ndim == 1 and t_.shape[0] == 0)] or cast[:1]
    d = normalize_axis(dim, tensors[0].ndim)
    if len(tensors) == 1:
        return _named(ops.reshape(tensors[0], tensors[0].shape), "CatBackward0")
    return ops.concatenate(tensors, d)


def concat(tensors, dim=0):
    """``torch.concat``: ``cat`` under its alias's name."""
    return cat(tensor_sequence(tensors, "concat"), dim)


def concatenate(tensors, dim=0):
    """``torch.concatenate``: ``cat`` under its alias's name."""
    return cat(tensor_sequence(tensors, "concatenate"), dim)


_CONCATENATE = ops.movement.concatenate_p


def _stack_direct(tensors, shape: tuple, d: int):
    """``stack``'s result (a DataLoader's collate: many samples) from the
    reshape and concatenate impls on the tensors' arrays, as the ops below
    run them, when no node is recorded (nothing requires grad, or grad
    mode is off), nothing traces or observes, and every tensor has one
    dtype (no promotion; not bfloat16); else None."""
    dtype = tensors[0].dtype
    if dtype is dt.bfloat16:
        return None
    grad = graph.is_grad_enabled()
    unsqueezed = shape[:d] + (1,) + shape[d:]
    arrays = []
    for t_ in tensors:
        a = t_._data
        if t_.dtype is not dtype or type(a) is not np.ndarray or not eager_direct(t_) or (
                grad and t_.requires_grad):
            return None
        arrays.append(_RESHAPE.impl(a, shape=unsqueezed))
    return _new_tensor(_CONCATENATE.impl(*arrays, axis=d), dtype)


def stack(tensors, dim=0):
    tensors = tensor_sequence(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0].shape
    for k, t_ in enumerate(tensors):
        if t_.shape != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(shape)} at entry 0 and {list(t_.shape)} at entry {k}")
    d = normalize_axis(dim, len(shape) + 1)
    if len(tensors) > 1 and not SPARSE:
        out = _stack_direct(tensors, tuple(shape), d)
        if out is not None:
            return out
    out = _named(cat([unsqueeze(t_, d) for t_ in tensors], d), "StackBackward0")
    if SPARSE:
        from tracec.sparse_rows import sparse_stacked
        return sparse_stacked(out, tensors, d)
    return out


def _slice_dim(x, d, start, stop):
    starts = tuple(start if i == d else 0 for i in range(x.ndim))
    stops = tuple(stop if i == d else s for i, s in enumerate(x.shape))
    return _named(ops.slice_(x, starts, stops, (1,) * x.ndim), "SplitBackward0")


def split_method(self, split_size, dim=0):
    """``Tensor.split``: PyTorch names its size argument ``split_size`` there."""
    return split(self, split_size, dim)


def split(tensor, split_size_or_sections, dim=0):
    pieces = split_views(tensor, split_size_or_sections, dim)
    mark_multi_output(pieces)
    return pieces


def split_views(tensor, split_size_or_sections, dim=0):
    """``split`` without marking the pieces as one multi-output view
    function's, so that in-place ops may modify them (PyTorch's
    ``unsafe_split`` / ``unsafe_chunk``)."""
    x = tensor
    d = normalize_axis(dim, x.ndim)
    n = x.shape[d]
    # a symbolic size (``x.split(q.size(0), 0)`` in a dynamic trace) is a size too
    by_size = isinstance(split_size_or_sections, (int, Sym))
    if by_size:
        size = split_size_or_sections
        if size <= 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, got {size}")
        if n == 0:
            bounds = [0, 0]
        else:
            # the number of pieces, ceil(n / size): a Python number (a
            # symbolic one is guarded on, not the sizes in it: one trace
            # serves every size with that many pieces)
            bounds = [k * size for k in range(count_of(-(-n // size)))] + [n]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sections}")
        bounds = [0]
        for s in sections:
            bounds.append(bounds[-1] + s)
    pieces = tuple(_slice_dim(x, d, a, b) for a, b in zip(bounds[:-1], bounds[1:]))
    if not by_size:
        for p in pieces:
            _named(p, "SplitWithSizesBackward0")
    return pieces


def chunk(input, chunks, dim=0):
    pieces = unsafe_chunk(input, chunks, dim)
    mark_multi_output(pieces)
    return pieces


def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` without the multi-output marking (``split_views``)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = normalize_axis(dim, input.ndim)
    size = -(-input.shape[d] // chunks) if input.shape[d] else 1
    return split_views(input, size, d)


def unbind(input, dim=0):
    d = normalize_axis(dim, input.ndim)
    pieces = tuple(_named(squeeze(s, d), "UnbindBackward0") for s in split_views(input, 1, d))
    if SPARSE:
        from tracec.sparse_rows import sparse_selected
        pieces = tuple(sparse_selected(p, input, d, i) for i, p in enumerate(pieces))
    mark_multi_output(pieces)
    return pieces


# The C type names PyTorch's dtype messages use.
_C_TYPE_NAMES = dt.C_TYPE_NAMES


def masked_fill(input, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        got = f", but got mask with dtype {_C_TYPE_NAMES.get(mask.dtype.name, mask.dtype.name)}" \
            if isinstance(mask, Tensor) else ""
        raise RuntimeError(f"masked_fill_ only supports boolean masks{got}")
    dt.check_fits(value, input.dtype)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("masked_fill only supports a 0-dimensional value tensor")
        value = ops.cast(value, input.dtype) if value.dtype is not input.dtype else value
    from tracec import tensor_meta as tm
    return tm.row_major(_named(ops.where(mask, value, input), "MaskedFillBackward0"))


def gather(input, dim, index, *, sparse_grad=False):
    if sparse_grad:
        raise NotImplementedError("tracec: gather(sparse_grad=True) (tracec's gradients are "
                                  "dense)")
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    d = normalize_axis(dim, input.ndim)
    if index.numel() == 0:     # PyTorch checks no shape then: an empty result of index's shape
        flat = ops.reshape(input, (input.numel(),))
        return _named(ops.reshape(ops.slice_(flat, (0,), (0,), (1,)), tuple(index.shape)),
                      "GatherBackward0")
    if max(index.ndim, 1) != max(input.ndim, 1):   # a 0-d tensor counts as 1-d here
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if input.ndim == 0 or index.ndim == 0:
        # PyTorch reads a 0-d input or index as one element: gather along
        # the flat input, the result of index's shape
        flat_index = ops.cast(ops.reshape(index, (index.numel(),)), dt.int64)
        flat = ops.gather(ops.reshape(input, (input.numel(),)),
                          _check_gather_range(flat_index, input.numel(), d), 0)
        return _named(ops.reshape(flat, tuple(index.shape)), "GatherBackward0")
    for i, (a, b) in enumerate(zip(index.shape, input.shape)):
        if i != d and a > b:
            raise RuntimeError(f"Size does not match at dimension {i} expected index "
                               f"{list(index.shape)} to be smaller than self {list(input.shape)} "
                               f"apart from dimension {d}")
    if any(a != b for i, (a, b) in enumerate(zip(index.shape, input.shape)) if i != d):
        input = ops.slice_(input, (0,) * input.ndim,
                       tuple(s if i == d else index.shape[i] for i, s in enumerate(input.shape)),
                       (1,) * input.ndim)
    if index.dtype is not dt.int64:
        index = ops.cast(index, dt.int64)
    index = _check_gather_range(index, input.shape[d], d)
    return ops.gather(input, index, d)


def _check_gather_range(index, size, d):
    """``index`` (``gather``'s, int64), checked as PyTorch checks it: every
    entry in ``[0, size)`` (a negative one does not count from the end), else
    ``RuntimeError("index 3 is out of bounds for dimension 1 with size 3")``;
    recorded while tracing, so a compiled call checks its own indices."""
    if RECORDERS:
        ok = ops.logical_and(ops.ge(index, 0), ops.lt(index, size))
        return ops.check(index, ok, f"index {INDEX_VALUE} is out of bounds for dimension {d} "
                         f"with size {size}")
    v = index._data
    if v.size and (v.min() < 0 or v.max() >= size):
        bad = v[(v < 0) | (v >= size)].flat[0]
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    return index


def scatter_add(x, dim, index, src):
    d = normalize_axis(dim, x.ndim)
    return ops.scatter_add(x, index, src, d)


def one_hot(tensor, num_classes=-1):
    if not isinstance(tensor, Tensor) or tensor.dtype is not dt.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        # The result's size depends on the values: a Python read (TraceError
        # inside tracec.compile, where it would freeze the first call's size).
        v = concrete(tensor, "one_hot(num_classes=-1) (its size depends on the values)")
        num_classes = int(v.max()) + 1 if tensor.numel() else 0
    if RECORDERS:
        # Recorded checks (a compiled call checks its own classes), chained
        # so that the sign is reported first, as below.
        tensor = ops.check(tensor, ops.ge(tensor, 0), "Class values must be non-negative.")
        tensor = ops.check(tensor, ops.lt(tensor, num_classes),
                           "Class values must be smaller than num_classes.")
    elif tensor.numel() and ((v := tensor._data).min() < 0 or v.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes." if v.min() >= 0
                           else "Class values must be non-negative.")
    elif eager_direct(tensor) and type(tensor._data) is np.ndarray:
        # Eagerly: ones written into zeros (calloc'd pages), not a compare
        # of every class and a cast (256 labels of 1000 classes: 180 -> ~40 µs)
        a = tensor._data
        out = np.zeros((a.size, num_classes), np.int64)
        out[np.arange(a.size), a.reshape(-1)] = 1
        return _new_tensor(out.reshape(a.shape + (num_classes,)), dt.int64)
    classes = ops.iota((num_classes,), dt.int64, 0, like=tensor)
    return ops.cast(ops.eq(ops.reshape(tensor, tensor.shape + (1,)), classes), dt.int64)


def clone(input, *, memory_format=None):
    """A copy of ``input``; under ``preserve_format`` (the default) a
    channels-last input's copy is channels-last, as PyTorch's; an explicit
    format lays the copy out so."""
    from tracec import tensor_meta as tm
    if memory_format in tm._ORDERS:
        return tm.dense_copy(input, memory_format)
    out = _named(ops.cast(input, input.dtype), "CloneBackward0")
    if SPARSE:
        from tracec.contraction import keep_sparse
        keep_sparse(out, input)
    if memory_format is None or memory_format is tm.preserve_format:
        tm.keep_layout(out, input)
    return out


def contiguous(x, memory_format=None):
    if x._data.flags.c_contiguous:
        return x
    from tracec.tensor_meta import contiguous_format
    return clone(x, memory_format=contiguous_format)


def to(x, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``.
    In the device form either slot may be None (PyTorch's defaults, as in
    ``t.to(device)`` with ``device=None``): that slot is left as it is."""
    if not kwargs and len(args) == 1 and args[0] is x.dtype:
        return x     # (to(its own dtype): what the general path below returns)
    from tracec.device import device as _device, to_device
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    copy = bool(kwargs.pop("copy", False))
    memory_format = kwargs.pop("memory_format", None)
    flags = []                    # positional non_blocking, copy (PyTorch's order)
    for i, a in enumerate(args):
        if a is None and (i == 0 or (i == 1 and (args[0] is None or isinstance(args[0], (str, _device))))):
            continue              # the device form's device / dtype slot, defaulted
        if isinstance(a, bool):
            flags.append(a)
            if len(flags) > 2:
                raise TypeError(f"to(): unexpected argument {a!r}")
            copy = copy or (len(flags) == 2 and a)
        elif isinstance(a, dt.DType):
            dtype = a
        elif isinstance(a, (str, _device)):
            dev = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
            dev = a.device
        else:
            raise TypeError(f"to(): unexpected argument {a!r}")
    from tracec.tensor_meta import preserve_format
    if memory_format is not None and memory_format is not preserve_format:
        # PyTorch's to_will_alias: the tensor itself when its suggested
        # format is the one asked for (a transposed matrix stays so under
        # contiguous_format), else a copy laid out densely so, with
        # PyTorch's strides; then converted.
        from tracec import tensor_meta as tm
        tm._check_format(memory_format, "to")
        if tm.suggest_memory_format(x) is not memory_format:
            x = tm.dense_copy(x, memory_format)
    if dev is not None:
        kind = to_device(dev).type
        if kind == "meta" and not x.is_meta:
            from tracec.meta_array import MetaArray
            d = x.dtype if dtype is None else dt.to_dtype(dtype)
            out = Tensor._make(MetaArray.of(x.shape, d.np), d)
            out.requires_grad = x.requires_grad
            return out
        if kind != "meta" and x.is_meta:
            _copy_out_of_meta()
    if dtype is not None and dt.to_dtype(dtype) is not x.dtype:
        out = ops.cast(x, dt.to_dtype(dtype))
        if SPARSE:      # a COO tensor's cast is COO (its values cast)
            from tracec.contraction import keep_sparse
            keep_sparse(out, x, dt.to_dtype(dtype))
        if memory_format is None or memory_format is preserve_format:
            from tracec.tensor_meta import keep_layout
            keep_layout(out, x)      # (PyTorch's preserve_format cast)
        return out
    if not copy:
        return x
    out = ops.cast(x, x.dtype)    # copy=True: always a new tensor
    if SPARSE:
        from tracec.contraction import keep_sparse
        keep_sparse(out, x)
    if memory_format is None or memory_format is preserve_format:
        from tracec.tensor_meta import keep_layout
        keep_layout(out, x)
    return out


def _copy_out_of_meta():
    raise NotImplementedError("Cannot copy out of meta tensor; no data! Please use "
                              "torch.nn.Module.to_empty() instead of torch.nn.Module.to() when "
                              "moving module from meta to a different device.")


def type_as(x, other):
    return to(x, other.dtype)


def _conv(d):
    def fn(x, memory_format=None):
        return to(x, d)
    return fn


float_, double, half, long, int_, bool_, bfloat16 = (
    _conv(dt.float32), _conv(dt.float64), _conv(dt.float16), _conv(dt.int64),
    _conv(dt.int32), _conv(dt.bool_), _conv(dt.bfloat16))
# PyTorch's names: byte() is uint8, char() is int8, short() is int16.
byte, char, short = _conv(dt.uint8), _conv(dt.int8), _conv(dt.int16)
