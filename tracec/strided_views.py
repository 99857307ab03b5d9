"""Ops about a tensor's memory layout: ``as_strided`` / ``as_strided_``,
``empty_strided`` / ``new_empty_strided``, ``view(dtype)``, ``resize_`` /
``resize_as_``, and the in-place shape changes ``t_ transpose_ swapaxes_
swapdims_ squeeze_ unsqueeze_``.

Invariants:
  * Eager ``as_strided`` and ``view(dtype)`` return tensors that share
    memory with their input (NumPy stride tricks over the root's storage),
    as PyTorch's do.  A differentiable ``as_strided`` (input requires grad,
    or a trace is recording) is a view too (``composite_views.AS_STRIDED``:
    values, gradient and compiled form of a ``take`` of the computed
    positions), except of a complex or non-contiguous source: a copy.
  * An in-place shape change rebinds the tensor to the view the
    out-of-place op makes (same storage, version counter and autograd
    history), so the object the user holds takes the new shape.
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec import graph
from tracec import shape_ops as S
from tracec.composite_views import AS_STRIDED, link, view_of
from tracec.functions import _named
from tracec.tensor import RECORDERS, Tensor, concrete

__all__ = ["as_strided", "as_strided_", "empty_strided"]


def _root(t: Tensor) -> Tensor:
    return t._base if t._base is not None else t


def _alias(root: Tensor, arr: np.ndarray, dtype) -> Tensor:
    """A tensor over ``arr`` (memory of ``root``) that shares ``root``'s
    version counter, with no autograd link (a ``detach()``-style alias)."""
    t = Tensor._make(arr, dtype)
    t._vbox = root._vbox
    t._base = root
    t._view_chain = ()
    return t


def _ints(xs, what):
    xs = tuple(int(x) if isinstance(x, Tensor) and x.ndim == 0 and x.dtype.category == 1
               and x.dtype is not dt.bool_ else x for x in xs)   # 0-d integer tensors, as in PyTorch
    for x in xs:
        if not isinstance(x, (int, np.integer)) or isinstance(x, bool):
            raise TypeError(f"as_strided(): argument '{what}' must be tuple of ints, but found "
                            f"element of type {type(x).__name__}")
    return tuple(int(x) for x in xs)


def _storage_needed(size, stride, offset) -> int:
    if 0 in size:
        return 0
    return offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))


def as_strided(input, size, stride, storage_offset=None):
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    root = _root(input)
    rdata = root._data
    item = rdata.itemsize
    if storage_offset is None:
        storage_offset = (input._data.ctypes.data - rdata.ctypes.data) // item
    need = _storage_needed(size, stride, storage_offset)
    if need > rdata.size:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {storage_offset}, and itemsize {input.dtype.itemsize} "
                           f"requiring a storage size of {need * input.dtype.itemsize} are out "
                           f"of bounds for storage of size {rdata.size * input.dtype.itemsize}")
    differentiable = RECORDERS or (graph.is_grad_enabled() and input.requires_grad)
    if differentiable or not rdata.flags.c_contiguous:
        return _as_strided_take(input, size, stride, storage_offset)
    if input.dtype.category != 3 and root.dtype is input.dtype:   # (``_base``: the root, as PyTorch's)
        return view_of(AS_STRIDED, root, size=size, stride=stride, offset=storage_offset)
    flat = rdata.reshape(-1)[storage_offset:]
    arr = np.lib.stride_tricks.as_strided(flat, shape=size,
                                          strides=tuple(s * item for s in stride))
    return _alias(root, arr, input.dtype)


def _as_strided_take(input, size, stride, offset):
    """``as_strided`` as a gather from the flattened storage: from ``input``
    itself when its elements are one contiguous block of the storage holding
    every position read, else from the contiguous tensor ``input`` views
    (Longformer's ``as_strided`` of a ``view`` of a ``reshape``d transpose),
    whose gradient is the view's."""
    n = input.numel()
    root = _root(input)
    start = 0
    if input._base is not None and n:
        start = (input._data.ctypes.data - root._data.ctypes.data) // input._data.itemsize
    last = sum((k - 1) * s for k, s in zip(size, stride))
    if input._data.flags.c_contiguous and (0 in size or (offset >= start and
                                                         offset - start + last < n)):
        src, offset = input, offset - start
    elif root is not input and root._data.flags.c_contiguous and \
            (root.requires_grad or not input.requires_grad):
        src, n = root, root.numel()
    else:
        raise NotImplementedError("tracec: as_strided of a non-contiguous tensor that requires "
                                  "grad or is traced is not supported; call .contiguous() "
                                  "first")
    params = {"size": size, "stride": stride, "offset": offset}
    # a view of ``src``'s memory (writes through it reach ``src``, writes to
    # ``src`` are seen through it) whose values and node the gather gives
    y = link(AS_STRIDED, src, **params) if src.dtype.category != 3 else None
    return _named(AS_STRIDED.bind(src, **params) if y is None else y, "AsStridedBackward0")


def _rebind(self: Tensor, new: Tensor, op: str) -> Tensor:
    """Make ``self`` the view ``new`` of its own storage (an in-place
    metadata change)."""
    if graph.is_grad_enabled() and self.requires_grad and self._node is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    self._data = new._data
    if new._base is not None and new._base is not self and new._view_chain:
        # (a view of new's base now: under a trace resize_ to a bigger size
        # makes it one of a fresh tensor, which self had no chain to before)
        self._base = new._base
        self._view_chain = new._view_chain
        self._view_version = new._view_version
    if new._node is not None:
        self._node = new._node
        self.requires_grad = True
    if RECORDERS:
        for r in RECORDERS:
            r(None, (new,), {"inplace": "view"}, self)
    return self


def as_strided_(input, size, stride, storage_offset=None):
    return _rebind(input, as_strided(input, size, stride, storage_offset), "as_strided_")


def _meta_inplace(name, fn):
    def method(self, *args, **kwargs):
        return _rebind(self, fn(self, *args, **kwargs), name)
    method.__name__ = name
    method.__wrapped__ = fn   # its keywords are fn's (inspect.signature shows them)
    return method


def _resize(self, *sizes, size=None, memory_format=None):
    size = S._shape_arg(S._one_keyword(sizes, size, "size", "resize_"))
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: "
                           f"{list(size)}")
    n = math.prod(size)
    if RECORDERS:
        # Inside a trace the new shape must be recorded: the same view
        # (reshape of its first n elements, zeros past its end) rebound.
        flat = S.reshape(self, (-1,))
        k = min(n, flat.shape[0])
        new = flat[:k]
        if n > k:
            new = S.cat([new, self.new_zeros(n - k)])
        return _rebind(self, S.reshape(new, tuple(size)), "resize_")
    if n == self._data.size and self._data.flags.c_contiguous:
        if tuple(size) != self._data.shape:
            self._vbox[0] += 1     # a new shape counts as a write, as in PyTorch
        self._data = self._data.reshape(size)
        return self
    old = self._data.reshape(-1)
    if n <= old.size and self._base is None and self._data.flags.c_contiguous:
        self._data = old[:n].reshape(size)  # the same storage, as PyTorch keeps it
        self._vbox[0] += 1
        return self
    new = np.zeros(n, self.dtype.np)
    k = min(n, old.size)
    new[:k] = old[:k]
    self._data = new.reshape(size)
    self._base, self._view_chain = None, None
    self._vbox[0] += 1
    return self


def _resize_as(self, the_template, memory_format=None):
    return _resize(self, *the_template.shape)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    d = dt.get_default_dtype() if dtype is None else dt.to_dtype(dtype)
    storage = np.zeros(_storage_needed(size, stride, 0), d.np)
    arr = np.lib.stride_tricks.as_strided(storage, shape=size,
                                          strides=tuple(s * storage.itemsize for s in stride))
    t = Tensor._make(arr, d)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                       requires_grad=False, pin_memory=False):
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         requires_grad=requires_grad)


def _check_view_dtype(self, a, d) -> None:
    """PyTorch's refusals of ``view(dtype)`` across element sizes."""
    if self.ndim == 0 and d.itemsize != self.dtype.itemsize:
        raise RuntimeError("self.dim() cannot be 0 to view "
                           f"{self.dtype} as {d} (different element sizes)")
    if a.ndim and a.strides[-1] != a.itemsize and d.itemsize != self.dtype.itemsize:
        raise RuntimeError("self.stride(-1) must be 1 to view "
                           f"{self.dtype} as {d} (different element sizes)")
    if a.ndim and (a.shape[-1] * self.dtype.itemsize) % d.itemsize:
        ratio = d.itemsize // self.dtype.itemsize
        raise RuntimeError(f"self.size(-1) must be divisible by {ratio} to view "
                           f"{dt.scalar_type_name(self.dtype)} as {dt.scalar_type_name(d)} "
                           f"(different element sizes), but got {a.shape[-1]}")


def _view(self, *shape, size=None, dtype=None):
    """``view(*shape)``, or ``view(dtype)``: the same bytes read as a dtype
    (sharing memory; the last dimension scales by the size ratio; no
    gradient, as PyTorch's).  PyTorch's keywords: ``size=``, ``dtype=``."""
    if size is not None or dtype is not None:
        shape = S._one_keyword(shape, size if dtype is None else dtype,
                               "size" if dtype is None else "dtype", "view")
    if len(shape) == 1 and isinstance(shape[0], dt.DType):
        d = shape[0]
        a = self._data
        if dt.bfloat16 in (d, self.dtype) and d is not self.dtype:
            # tracec keeps bfloat16 values as float32: the bytes PyTorch
            # would reinterpret are made (their 16-bit patterns), and the
            # result is a copy, not sharing memory
            _check_view_dtype(self, a, d)
            if RECORDERS:
                concrete(self, f"view({d}) (a reinterpretation of the bytes)")
            raw = np.ascontiguousarray(dt.bfloat16_bits(a) if self.dtype is dt.bfloat16 else a)
            raw = raw.reshape(a.shape if a.ndim else (1,))
            if d is dt.bfloat16:
                out = dt.bfloat16_from_bits(raw.view(np.uint16))
            else:
                out = raw.view(d.np)
            return Tensor._make(out.reshape(out.shape if a.ndim else ()), d)
        _check_view_dtype(self, a, d)
        if RECORDERS and d is not self.dtype:
            # No primitive reinterprets bytes: a traced tensor's value cannot
            # be recorded (TraceError); a constant's view is a constant.
            concrete(self, f"view({d}) (a reinterpretation of the bytes)")
            return Tensor._make(a.view(d.np).copy(), d)
        return _alias(_root(self), a.view(d.np), d)
    return S.view(self, *shape)


Tensor.as_strided = as_strided
Tensor.as_strided_ = as_strided_
Tensor.resize_ = _resize
Tensor.resize_as_ = _resize_as
Tensor.new_empty_strided = _new_empty_strided
Tensor.view = _view
Tensor.t_ = _meta_inplace("t_", S.t)
Tensor.transpose_ = _meta_inplace("transpose_", S.transpose)
Tensor.swapaxes_ = _meta_inplace("swapaxes_", S.swapaxes)
Tensor.swapdims_ = _meta_inplace("swapdims_", S.transpose)
Tensor.squeeze_ = _meta_inplace("squeeze_", S.squeeze)
Tensor.unsqueeze_ = _meta_inplace("unsqueeze_", S.unsqueeze)
