"""Tensor metadata as PyTorch reports it: ``stride``, ``is_contiguous``,
``storage_offset``, ``data_ptr``, ``untyped_storage``, ``nbytes``,
``itemsize``, the ``is_*`` flags, ``layout`` and the memory-format
constants (``tracec.strided``, ``contiguous_format``, ``channels_last``,
``preserve_format``).

Invariant: strides and offsets are read from the NumPy array that holds
the tensor (in elements, as PyTorch counts them), so a view reports the
strides of the memory it really shares with its base; nothing here
changes a tensor's values or its autograd graph except ``contiguous``,
which copies (through the ``cast`` primitive) only when the layout asked
for differs from the one the tensor has.
"""
from __future__ import annotations

import mmap
import os
import weakref

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.functions import _named
from tracec.ops.core import normalize_axis
from tracec.shape_ops import contiguous as _contiguous
from tracec.tensor import Tensor

__all__ = ["layout", "strided", "sparse_coo", "jagged", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
           "memory_format", "contiguous_format",
           "channels_last", "channels_last_3d", "preserve_format", "legacy_contiguous_format",
           "is_signed",
           "get_device", "is_inference", "UntypedStorage"]


class layout:  # noqa: N801 - PyTorch's class name
    """A tensor layout; tracec's tensors are all ``tracec.strided``."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self):
        return f"torch.{self._name}"

    def __reduce__(self):
        return self._name


class memory_format:  # noqa: N801
    """A memory format, accepted wherever PyTorch takes ``memory_format=``."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self):
        return f"torch.{self._name}"

    def __reduce__(self):
        return self._name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
# nested tensors with one ragged dimension (tracec.nested)
jagged = layout("jagged")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
# PyTorch's name for the format F.gumbel_softmax and older code pass to
# zeros_like: the same object as contiguous_format
legacy_contiguous_format = contiguous_format

# The dimension order, outermost first, of each format's dense layout.
_ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def _strides(t: Tensor) -> tuple:
    a = t._data
    strides = a.strides
    if not any(strides) and a.size == 0 and a.ndim:
        # (NumPy 2 zeroes an empty array's strides; PyTorch's are those
        # of its dense layout, each size counted as at least one)
        return _dense_strides(a.shape, tuple(range(a.ndim)))
    return tuple(s // a.itemsize for s in strides)


def _restrided(a: np.ndarray, strides: tuple) -> np.ndarray:
    """``a`` seen with ``strides`` (in elements) that differ from its own
    only at size-one dimensions, which address nothing: the same memory,
    the strides PyTorch reports."""
    return np.lib.stride_tricks.as_strided(a, a.shape, tuple(s * a.itemsize for s in strides))


def dense_copy(x: Tensor, fmt) -> Tensor:
    """A new tensor equal to ``x`` laid out densely in ``fmt`` with
    PyTorch's exact strides (those of size-one dimensions too), as
    ``empty(..., memory_format=fmt)`` and ``to(memory_format=fmt)`` give."""
    rank, order = _ORDERS.get(fmt, (x.ndim, tuple(range(x.ndim))))
    if x.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
    inverse = tuple(order.index(i) for i in range(rank))
    y = _named(ops.transpose(ops.cast(ops.transpose(x, order), x.dtype), inverse),
               "CloneBackward0")
    want = _dense_strides(y._data.shape, order)
    if type(y._data) is np.ndarray and y._data.size and _strides(y) != want:
        y._data = _restrided(y._data, want)
    return y


def _stride(self, dim=None):
    s = _strides(self)
    if dim is None:
        return s
    return s[normalize_axis(dim, self.ndim)]


def _dense_in_order(shape, strides, order) -> bool:
    """PyTorch's contiguity test in ``order`` (outermost first): sizes of 1
    may have any stride, and an empty tensor is contiguous."""
    if 0 in shape:
        return True
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def _check_format(fmt, name):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{name}(): argument 'memory_format' must be torch.memory_format, "
                        f"not {type(fmt).__name__}")


def _is_contiguous(self, memory_format=contiguous_format):
    _check_format(memory_format, "is_contiguous")
    shape, strides = self._data.shape, _strides(self)
    if memory_format in _ORDERS:
        rank, order = _ORDERS[memory_format]
        return self.ndim == rank and _dense_in_order(shape, strides, order)
    return _dense_in_order(shape, strides, tuple(range(self.ndim)))


def contiguous(self, memory_format=contiguous_format):
    """The tensor itself when already dense in ``memory_format``, else a
    copy laid out so (channels-last: the permuted copy seen through the
    inverse permutation, as PyTorch's strides are)."""
    _check_format(memory_format, "contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    if memory_format in _ORDERS:
        rank, order = _ORDERS[memory_format]
        if self.ndim != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {memory_format._name} "
                               "format")
        if _is_contiguous(self, memory_format):
            return self
        inverse = tuple(order.index(i) for i in range(rank))
        copy = ops.cast(ops.transpose(self, order), self.dtype)
        return _named(ops.transpose(copy, inverse), "CloneBackward0")
    return _contiguous(self) if not _dense_in_order(
        self._data.shape, _strides(self), tuple(range(self.ndim))) else self


def suggest_memory_format(t: Tensor) -> memory_format:
    """PyTorch's ``Tensor.suggest_memory_format``: ``channels_last``
    (``channels_last_3d``) for a 4-d (5-d) strided tensor whose strides are
    like that format's (``_strides_like_channels_last``), else
    ``contiguous_format``."""
    a = t._data
    if isinstance(a, np.ndarray) and not (a.flags.c_contiguous and min(a.shape[1:], default=0) > 1):
        # (row-major with no size-one dimension past the batch: its strides
        # are the standard ones, never channels-last-like)
        shape, strides = a.shape, _strides(t)
        for fmt, (rank, order) in _ORDERS.items():
            if t.ndim == rank and _strides_like_channels_last(shape, strides, order):
                return fmt
    return contiguous_format


def _strides_like_channels_last(shape, strides, order) -> bool:
    """PyTorch's ``is_channels_last_strides_2d`` / ``_3d`` (c10's
    MemoryFormat.h), the test behind ``suggest_memory_format``: the strides
    do not decrease from the channel dimension outwards in ``order``
    (innermost first: C, W, H, N), the running bound growing by each size
    above 1, so the strides of size-1 dimensions count (a batch of one whose
    batch stride is smaller than C*H*W is not channels-last); ambiguous
    cases (a zero channel stride, N111-like ties) are row-major."""
    if strides[1] == 0:
        return False
    bound = 0
    for d in (order[-1],) + tuple(reversed(order[1:-1])) + (0,):
        if shape[d] == 0 or strides[d] < bound:
            return False
        if d == 0 and bound == strides[1]:
            return False
        bound = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def _dense_strides(shape, order) -> tuple:
    """The strides of a tensor of ``shape`` laid out densely in ``order``
    (outermost first), as PyTorch computes them (a size-one dimension
    strides as if of size one)."""
    strides, step = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def row_major(y: Tensor) -> Tensor:
    """``y``, a result just made, laid out row-major, as PyTorch lays out
    the result of a kernel that allocates a contiguous output whatever its
    input's strides (masked_fill's copy, cumsum / cumprod); NumPy's
    elementwise ops would keep a permuted input's order, and a ``view`` of
    the result would fail where torch's succeeds.  Eagerly only, and only a
    fresh result, as ``keep_memory_format``."""
    from tracec.tensor import RECORDERS
    if RECORDERS or y._base is not None or type(y._data) is not np.ndarray \
            or y._data.flags.c_contiguous:
        return y
    y._data = np.ascontiguousarray(y._data)
    return y


def keep_memory_format(y: Tensor, *inputs) -> Tensor:
    """``y``, a result just made from ``inputs``, laid out in the
    channels-last format the first input that suggests one suggests, as
    PyTorch lays out a convolution's, batch norm's, pooling's, clone's or
    cast's result; else ``y`` unchanged.

    Eagerly only, and only a fresh result (not a view): its array is
    replaced by an equal one in the new layout, so its autograd node and
    identity stay (a traced value's layout is the compiled code's)."""
    from tracec.tensor import RECORDERS
    if RECORDERS or y._base is not None or type(y._data) is not np.ndarray:
        return y
    for t in inputs:
        fmt = suggest_memory_format(t) if isinstance(t, Tensor) else contiguous_format
        if fmt is not contiguous_format:
            rank, order = _ORDERS[fmt]
            # (PyTorch's exact strides, those of size-one dimensions
            # included: the next suggest_memory_format reads them)
            if y.ndim == rank and _strides(y) != _dense_strides(y._data.shape, order):
                # (a fresh array: ascontiguousarray keeps one numpy deems
                # contiguous already, whatever its size-one strides)
                moved = y._data.transpose(order)
                dense = np.empty(moved.shape, moved.dtype)
                dense[...] = moved
                y._data = dense.transpose(tuple(np.argsort(order)))
            return y
    return y


def keep_layout(y: Tensor, x: Tensor) -> Tensor:
    """``y``, a fresh copy-like result of ``x`` (clone, a cast, ``*_like``),
    laid out as PyTorch's ``preserve_format`` lays it out: dense in the
    order of ``x``'s strides (``iter_layout.like``); a channels-last ``x``
    as ``keep_memory_format`` does (PyTorch's size-one strides too).
    Eagerly only, as ``keep_memory_format``."""
    from tracec.tensor import RECORDERS
    if RECORDERS or y._base is not None or type(y._data) is not np.ndarray or \
            not isinstance(x, Tensor) or type(x._data) is not np.ndarray:
        return y
    if x._data.flags.c_contiguous:
        # (dense row-major but for size-one strides: PyTorch's empty_like
        # copies every stride of a non-overlapping, dense tensor)
        if 1 in x._data.shape and y._data.size and y._data.shape == x._data.shape and \
                y._data.flags.c_contiguous and _strides(y) != _strides(x):
            y._data = _restrided(y._data, _strides(x))
        return y
    if suggest_memory_format(x) is not contiguous_format:
        return keep_memory_format(y, x)
    from tracec.ops.iter_layout import like
    y._data = like(y._data, x._data)
    return y


def keep_iter_layout(y: Tensor, *inputs) -> Tensor:
    """``y``, a fresh elementwise result of ``inputs`` computed through
    row-major steps, laid out as TensorIterator lays out the result of
    one kernel over ``inputs`` (``iter_layout.relayout``).  Eagerly only,
    as ``keep_memory_format``."""
    from tracec.tensor import RECORDERS
    if RECORDERS or y._base is not None or type(y._data) is not np.ndarray:
        return y
    arrays = [t._data for t in inputs if isinstance(t, Tensor)]
    if all(type(a) is not np.ndarray or a.flags.c_contiguous for a in arrays):
        return y
    from tracec.ops.iter_layout import like, relayout
    arrays = [a for a in arrays if type(a) is np.ndarray and a.ndim > 0]
    y._data = relayout(y._data, arrays) if len(arrays) > 1 else \
        like(y._data, np.broadcast_to(arrays[0], y.shape)) if arrays else y._data
    return y


def _root(t: Tensor) -> Tensor:
    """The tensor whose array is ``t``'s storage: its view base, or the
    storage a base not made by a view lies in (``_storage_root``: a
    checkpoint's storage that several loaded tensors view, the storage a
    ``set_`` put it in), while its array still lies in that memory."""
    r = t._base if t._base is not None else t
    d = r.__dict__
    s = d.get("_storage_root") if d else None
    if s is not None:
        a, b = r._data, s._data
        if type(a) is np.ndarray and type(b) is np.ndarray and \
                b.ctypes.data <= a.ctypes.data <= b.ctypes.data + b.nbytes:
            return s
    return r


def set_storage_root(t: Tensor, storage: np.ndarray) -> None:
    """Record that ``t`` (not a view) lies in ``storage``, an array of
    its dtype other tensors may lie in too (``_root``)."""
    root = storage if isinstance(storage, Tensor) else Tensor._make(storage, t.dtype)
    t.__dict__["_storage_root"] = root


def _storage_offset(self) -> int:
    root = _root(self)._data
    return (self._data.ctypes.data - root.ctypes.data) // self._data.itemsize


def _data_ptr(self) -> int:
    """The address of the tensor's first element.  A bfloat16 tensor's
    values are float32 here, so its address is in ``_bf16_bits`` (the
    2-byte patterns PyTorch would hold, refreshed by this call): code that
    reads ``numel * element_size()`` bytes from it (safetensors, ctypes)
    reads bfloat16 bytes."""
    root = _root(self)
    if root.dtype is dt.bfloat16:
        bits = _bf16_bits(root._data)
        return int(bits.ctypes.data) + (self._data.ctypes.data - root._data.ctypes.data) // 2
    return int(self._data.ctypes.data)


# id(float32 storage of bfloat16 values) -> (weakref to it, its uint16 mirror)
_BF16_MIRRORS: dict = {}


def _bf16_bits(root: np.ndarray) -> np.ndarray:
    """A uint16 buffer laid out as ``root`` (at half its byte strides), now
    holding its values' bfloat16 bit patterns; the same buffer for the same
    storage, so pointers into it compare and offset as PyTorch's do."""
    key = id(root)
    entry = _BF16_MIRRORS.get(key)
    if entry is None or entry[0]() is not root:
        extent = 4 + sum((n - 1) * st for n, st in zip(root.shape, root.strides) if n > 0) \
            if root.size else 0
        ref = weakref.ref(root, lambda _, k=key: _BF16_MIRRORS.pop(k, None))
        entry = _BF16_MIRRORS[key] = (ref, np.zeros(max(extent // 4, 1), np.uint16))
    mirror = entry[1]
    if root.size:
        np.lib.stride_tricks.as_strided(mirror, root.shape, tuple(st // 2 for st in root.strides))[
            ...] = dt.bfloat16_bits(root)
    return mirror


class UntypedStorage:
    """The memory a tensor (and every view of it) lies in: what
    ``Tensor.untyped_storage()`` returns, for code that compares or sizes
    storages."""

    def __init__(self, root=0, bfloat16: bool = False):
        # torch.UntypedStorage(nbytes): fresh zeroed bytes
        self._root = root if isinstance(root, np.ndarray) else np.zeros(int(root), np.uint8)
        #: ``root`` holds bfloat16 values as float32: the storage's bytes
        #: are their 2-byte patterns (``_bf16_bits``)
        self._bfloat16 = bfloat16

    def element_size(self) -> int:
        return 1

    @classmethod
    def from_file(cls, filename, shared: bool = False, nbytes: int = 0) -> "UntypedStorage":
        """``nbytes`` bytes of ``filename`` memory-mapped: written through to
        the file when ``shared`` (which creates or grows it as needed), else
        private copy-on-write pages (the file must hold ``nbytes`` bytes)."""
        filename = os.fspath(filename)
        if shared:
            if not os.path.exists(filename) or os.path.getsize(filename) < nbytes:
                with open(filename, "ab") as f:
                    f.truncate(nbytes)
            mode = "r+"
        else:
            if os.path.getsize(filename) < nbytes:
                raise RuntimeError(f"unable to mmap {nbytes} bytes from file <{filename}>: "
                                   "Cannot allocate memory (12)")
            mode = "c"
        if nbytes == 0:
            return cls(np.zeros(0, np.uint8))
        return cls(np.memmap(filename, dtype=np.uint8, mode=mode, shape=(nbytes,)))

    def untyped(self) -> "UntypedStorage":
        return self

    def _bytes(self) -> np.ndarray:
        """The storage's memory as a flat uint8 array (no copy; bfloat16's
        bit patterns as of now)."""
        if self._bfloat16:
            return _bf16_bits(self._root).view(np.uint8)
        return self._root.reshape(-1).view(np.uint8)

    def __getitem__(self, i):
        """A byte (``int``), or a slice of the storage sharing its memory."""
        if isinstance(i, slice):
            return UntypedStorage(self._bytes()[i])
        return int(self._bytes()[i])

    def data_ptr(self) -> int:
        if self._bfloat16:
            return int(_bf16_bits(self._root).ctypes.data)
        return int(self._root.ctypes.data)

    def nbytes(self) -> int:
        return int(self._root.nbytes) // (2 if self._bfloat16 else 1)

    def size(self) -> int:
        return self.nbytes()

    __len__ = size

    def __sizeof__(self) -> int:
        # PyTorch's: the object and its bytes (torchinfo sums
        # sys.getsizeof(t.untyped_storage()) as "Input size (MB)")
        return object.__sizeof__(self) + self.nbytes()

    @property
    def device(self):
        from tracec.device import cpu
        return cpu

    def __repr__(self):
        return f"UntypedStorage(nbytes={self.nbytes()}, data_ptr={self.data_ptr()})"


def _untyped_storage(self) -> UntypedStorage:
    root = _root(self)
    return UntypedStorage(root._data, root.dtype is dt.bfloat16)


class TypedStorage(UntypedStorage):
    """``Tensor.storage()`` (deprecated in PyTorch): the storage counted in
    elements of the tensor's dtype."""

    def __init__(self, root: np.ndarray, dtype):
        super().__init__(root, dtype is dt.bfloat16)
        self.dtype = dtype

    def size(self) -> int:
        return int(self._root.size)

    __len__ = size

    def element_size(self) -> int:
        return int(self.dtype.itemsize)

    def tolist(self) -> list:
        return self._root.reshape(-1).tolist()

    def __repr__(self):
        return f"TypedStorage(dtype={self.dtype}, size={self.size()})"


def _storage(self) -> TypedStorage:
    import warnings
    warnings.warn("TypedStorage is deprecated. It will be removed in the future and "
                  "UntypedStorage will be the only storage class. This should only matter to "
                  "you if you are using storages directly.  To access UntypedStorage directly, "
                  "use tensor.untyped_storage() instead of tensor.storage()", UserWarning,
                  stacklevel=2)
    return TypedStorage(_root(self)._data, self.dtype)


def is_signed(input) -> bool:
    return input.dtype.is_signed


def get_device(input) -> int:
    return -1  # a CPU tensor


def is_inference(input) -> bool:
    """Whether ``input`` was made under ``inference_mode`` (or is a view or
    alias of such a tensor): its version box says so."""
    from tracec.tensor import InferenceVersion
    return type(input._vbox) is InferenceVersion


def _is_set_to(self, tensor) -> bool:
    """Same storage, offset, sizes and strides (PyTorch's rule)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"is_set_to(): argument 'tensor' must be Tensor, not "
                        f"{type(tensor).__name__}")
    return (_root(self)._data.ctypes.data == _root(tensor)._data.ctypes.data
            and self._data.ctypes.data == tensor._data.ctypes.data
            and self._data.shape == tensor._data.shape and _strides(self) == _strides(tensor)
            and self.dtype is tensor.dtype)


#: dtype name -> the C++ type PyTorch's messages name it by
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int", "int16": "short int",
            "int8": "signed char", "uint8": "unsigned char", "bool": "bool",
            "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _c_type(dtype) -> str:
    return _C_TYPES.get(dtype.name, dtype.name)


def _set_(self, source=None, storage_offset: int = 0, size=None, stride=None):
    """``Tensor.set_``: ``self`` now lies in ``source``'s memory, in place
    (fastai's HSV transforms, MONAI's MetaTensor unpickling, reversible
    networks).  ``source`` a tensor: its elements as they are laid out
    (or, given ``size``, from ``storage_offset`` of its storage with
    ``size`` / ``stride``, contiguous by default); a storage: the same from
    its bytes; nothing: an empty tensor.  Writes through either are seen
    by the other.  ``self`` is no longer a view of what it viewed; it lies
    in ``source``'s storage (``_root``): its ``storage_offset()`` counts
    from that storage's start, as PyTorch's."""
    from tracec import graph
    from tracec.tensor import RECORDERS, concrete
    if graph.is_grad_enabled() and self.requires_grad and self._node is None and \
            self._base is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if RECORDERS:
        concrete(self, "set_()")        # (not recordable: the trace runs eagerly)
    np_dtype = self._data.dtype
    root = None
    if source is None:
        arr = np.empty(0, np_dtype)
    else:
        if isinstance(source, Tensor):
            if source.dtype is not self.dtype:
                raise RuntimeError(f"Could not set tensor of type {_c_type(source.dtype)} to a "
                                   f"tensor of type {_c_type(self.dtype)}")
            if size is None and not storage_offset and stride is None:
                arr = source._data
                root = _root(source)
            else:
                source = _untyped_storage(source)
        if not isinstance(source, Tensor):
            if not isinstance(source, UntypedStorage):
                raise TypeError(f"set_(): argument 'source' must be Tensor or Storage, not "
                                f"{type(source).__name__}")
            if source._bfloat16 or self.dtype is dt.bfloat16:
                raise NotImplementedError("Tensor.set_ from a bfloat16 storage is not "
                                          "supported by tracec")
            flat = source._root.reshape(-1).view(np.uint8)
            n = flat.nbytes // np_dtype.itemsize
            typed = flat[:n * np_dtype.itemsize].view(np_dtype)
            if size is None:
                size = (n - storage_offset,)
            size = tuple(int(d) for d in size)
            if stride is None:
                stride, acc = [], 1
                for d in reversed(size):
                    stride.insert(0, acc)
                    acc *= max(d, 1)
            extent = storage_offset + 1 + sum((d - 1) * st for d, st in zip(size, stride) if d)
            if all(size) and extent > n:
                raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, "
                                   f"storage offset {storage_offset}, and itemsize "
                                   f"{np_dtype.itemsize} requiring a storage size of "
                                   f"{extent * np_dtype.itemsize} are out of bounds for "
                                   f"storage of size {n * np_dtype.itemsize}")
            arr = np.lib.stride_tricks.as_strided(
                typed[storage_offset:], size, tuple(int(st) * np_dtype.itemsize for st in stride))
            root = typed
    self._data = arr
    if self._base is not None:
        self._base, self._view_chain = None, None
    self.__dict__.pop("_storage_root", None)
    if root is not None:
        set_storage_root(self, root)
    self._vbox[0] += 1
    return self


def _self(self, *args, **kwargs):
    return self


def _false(self, *args, **kwargs):
    return False


# Shared memory for ``torch.multiprocessing`` (Hogwild): an anonymous
# MAP_SHARED mapping, which processes forked afterwards share.
def _is_shared(t: Tensor) -> bool:
    root = t._base if t._base is not None else t
    a = root._data
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


def _share_memory_(self: Tensor) -> Tensor:
    if _is_shared(self):
        return self
    if self._base is not None:
        raise RuntimeError("share_memory_(): tracec moves only a tensor that owns its storage "
                           "into shared memory, not a view; call it on the base tensor "
                           "before taking views")
    a = self._data
    buf = mmap.mmap(-1, max(a.nbytes, 1))
    shared = np.frombuffer(buf, dtype=a.dtype, count=a.size).reshape(a.shape)
    shared[...] = a
    self._data = shared
    return self




Tensor.stride = _stride
Tensor.is_contiguous = _is_contiguous
Tensor.contiguous = contiguous
Tensor.storage_offset = _storage_offset
Tensor.data_ptr = _data_ptr
Tensor.const_data_ptr = _data_ptr   # (PyTorch 2.2+: the same address, read-only by contract)
Tensor.untyped_storage = _untyped_storage
Tensor.storage = _storage
Tensor.is_signed = is_signed
Tensor.get_device = get_device
Tensor.is_inference = is_inference
Tensor.is_set_to = _is_set_to
Tensor.set_ = _set_
Tensor.ndimension = Tensor.dim
Tensor.pin_memory = _self
def _sparse_info(t):
    """A COO tensor's record (tracec.contraction.SPARSE), or None."""
    from tracec.contraction import sparse_info
    return sparse_info(t)


def _layout(t):
    """``t.layout``: strided, or the layout of its record in ``SPARSE``."""
    from tracec.contraction import raw_record
    rec = raw_record(t)
    if rec is None:
        return strided
    return sparse_coo if type(rec) is list else rec.layout


Tensor.share_memory_ = _share_memory_
Tensor.is_pinned = _false
Tensor.is_shared = _is_shared
Tensor.nbytes = property(lambda self: int(self._data.size) * self.dtype.itemsize)
Tensor.itemsize = property(lambda self: self.dtype.itemsize)
Tensor.is_cpu = property(lambda self: not self.is_meta)
Tensor.layout = property(_layout)
Tensor.is_sparse = property(lambda self: _sparse_info(self) is not None)
Tensor.is_quantized = property(lambda self: False)
Tensor.is_mkldnn = property(lambda self: False)
Tensor.is_nested = property(lambda self: False)
Tensor.retains_grad = property(lambda self: bool(self._retains_grad))
# Every tracec op has one output, except the tuple-returning composites
# whose parts are slices (split/unbind): PyTorch numbers those outputs, a
# detail no training program reads.
# (which output of a multi-output custom Function's node: its edge's index)
Tensor.output_nr = property(lambda self: getattr(self._node, "index", 0))
