"""The eager ``Tensor``: NumPy storage, define-by-run autograd, views.

Invariants:
  * ``_data`` is a NumPy array whose dtype is ``dtype.np``; bfloat16 data is
    float32 rounded to bfloat16 after every op.
  * A view (made by reshape/transpose/expand/slicing when NumPy can avoid
    a copy) shares ``_data`` memory and the ``_vbox`` version box with its root
    ``_base``, and records ``_view_chain``, the movement primitives that
    derive it from the root, so in-place writes through it can be replayed
    functionally for autograd and for the tracer.
  * Every primitive application goes through ``_bind_primitive``; listeners
    registered in ``RECORDERS`` (the tracer) see each one.
"""
from __future__ import annotations

import copy
import copyreg
import numbers
import re

import sys
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import expand_writes, graph, graph_hooks, mem_overlap, tensor_str
from tracec.arg_arrays import _WATCHES, ArgArray, foreign, watched
from tracec.removable_handle import RemovableHandle
from tracec.item_value import ItemValue
from tracec.meta_array import USED as _META_USED, MetaArray
from tracec.ops import core, creation as creation_ops, elementwise as ew, movement
from tracec.ops.core import ShapeError
from tracec.runtime_int import SPECIALIZE_ON_REPLAY, RuntimeInt, operand as runtime_operand, \
    view_replayed
from tracec.symbolic import Sym
from tracec.torch_function_switch import caller

_WARNED = {"float_requires_grad": False}

#: PyTorch's refusal of ``detach_()`` on a view (``VariableTypeManual.cpp``)
_DETACH_VIEW_MSG = (
    "Can't detach views in-place. Use detach() instead. If you are using "
    "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, "
    "gradients are views of DDP buckets, and hence detach_() cannot be called on these "
    "gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
    "torch/optim/optimizer.py as the solution.")

__all__ = ["Size", "Tensor", "RECORDERS", "made_before_call", "apply_direct", "as_tensor_operand",
           "attach_node",
           "bind_movement", "eager_direct", "weak_scalar"]

# Callables ``(prim, inputs, params, out)`` notified of every primitive
# application while registered (the tracer registers one while recording).
RECORDERS: list = []
# Callables ``(name, start_ns, arrays)`` told of each eager primitive after it
# ran (``tracec.profiler``); while any is registered, composites take the
# ``_bind_primitive`` path (``eager_direct`` is False) so every op is seen.
OP_OBSERVERS: list = []

# Callables ``(tensor, "get" | "set", value)`` told of every read and write
# of a tensor's ``.grad`` attribute (the tracer tracks gradient state).
GRAD_HOOKS: list = []

# Callables ``(snapshot_fn)``: code whose behaviour depends on Python state
# (an optimizer's hyperparameters, the shape of its state) reports a function
# returning that state, so a compiled caller can guard on it.
GUARD_HOOKS: list = []
#: ``(leaf, hook)`` registered while a call is traced (the tracer clears it)
LEAF_HOOKS_ADDED: list = []
# The records of sparse tensors' dense stand-ins (tracec.contraction):
# id(tensor) -> (weakref to it, [indices, values or None, coalesced]) for
# COO, or -> (weakref, a tracec.sparse_compressed.Compressed) for CSR / CSC.
SPARSE: dict = {}

# While a symbolic trace is recorded: one callable ``(tensor) -> shape or
# None`` giving a tensor's shape with its symbolic sizes (``Sym``, see
# ``tracec.symbolic``), so Python reading ``x.shape[0]`` computes with
# the size symbolically; None for a tensor of static shape.  (The list
# lives in ``graph``, whose tape saves operands' shapes with it.)
SYM_SHAPES = graph.SYM_SHAPES

# Tensors record the epoch they were born in; the tracer starts a new epoch,
# so it can tell tensors made during a trace from those that existed before.
EPOCH = [0]


def made_before_call(t: "Tensor") -> "Tensor":
    """Mark ``t`` (made while a call is traced, by no recorded op) as if it
    existed before the call: the trace reads it as state, an input of every
    compiled call, instead of baking it in as a constant.  For state a call
    creates that later calls reuse (an optimizer's zero-initialized moments)."""
    t._birth = -1
    return t


def note_guard(snapshot) -> None:
    """Report that the running code depends on ``snapshot()``'s value."""
    for h in GUARD_HOOKS:
        h(snapshot)


# Callables ``(tensor, why)`` asked before a tensor's value leaves tensor-land
# (item(), bool(), tolist(), numpy(), mask indexing): the tracer raises there.
CONCRETE_CHECKS: list = []
# Callables ``(tensor, caller_frame)`` asked first by ``item()``: one may give
# what item() returns instead (the tracer: a number the call returns,
# ``tracec.item_value``), or None.
ITEM_HOOKS: list = []
# While a call is traced: one callable ``(name) -> context manager`` inside
# which code that cannot be recorded (a ``torch.library`` custom op's body
# reading tensor data in NumPy) makes the traced call run eagerly, with
# that reason, instead of failing the trace (``tracec.library``).
OPAQUE_CALLS: list = []


def concrete(t: "Tensor", why: str) -> np.ndarray:
    """``t``'s data, for a use that makes Python depend on its value."""
    for check in CONCRETE_CHECKS:
        check(t, why)
    if _META_USED[0] and type(t._data) is MetaArray:
        if why == "numpy()":
            raise TypeError("can't convert meta device type tensor to numpy. Use "
                            "Tensor.cpu() to copy the tensor to host memory first.")
        if why.startswith(("item()", "bool(", "int(", "float(")):
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    return t._data


# Read-only 0-d arrays of the Python scalars operands use most (0, 1, 0.5...):
# converting a scalar costs more than the small ops it feeds.
_SCALAR_ARRAYS: dict = {}

_VIEW_PRIMS = frozenset(("reshape", "transpose", "broadcast_to", "slice"))
_BFLOAT16 = dt.bfloat16
_new_object = object.__new__
_PY_SCALARS = frozenset((int, float, bool))


#: Whether ``inference_mode`` is on (``tracec.config.inference_mode`` sets it).
INFERENCE = [False]
INFERENCE_INPLACE = ("Inplace update to inference tensor outside InferenceMode is not allowed."
                     "You can make a clone to get a normal tensor before doing inplace update."
                     "See https://github.com/pytorch/rfcs/pull/17 for more details.")



#: PyTorch's warning on reading ``.grad`` of a non-leaf tensor that does not
#: retain its gradient (``TensorBase::grad()``)
_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information.")


def _check_assigned_grad(t: "Tensor", g) -> None:
    """PyTorch's checks on ``t.grad = g`` (``THPVariable_set_grad``): a
    tensor of ``t``'s size and dtype (its default ``grad_dtype``)."""
    if not isinstance(g, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                        f"{type(g).__name__}")
    if tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(f"attempting to assign a gradient of size '{list(g.shape)}' to a tensor "
                           f"of size '{list(t.shape)}'. Please ensure that the gradient and the "
                           "tensor are the same size")
    if g.dtype is not t.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{dt.C_TYPE_NAMES[g.dtype.name]}' to a "
            f"tensor with grad_dtype '{dt.scalar_type_name(t.dtype)}'. The gradient must match "
            "the tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's "
            "grad_dtype attribute with a specific dtype, or None to allow any dtype. Set "
            "grad_dtype with caution. Diverging the dtypes of a tensor and its gradient may "
            "break downstream systems that assume they match.")


class InferenceVersion(list):
    """The version box of an inference tensor: one made while
    ``inference_mode`` was on, and the views, ``detach()`` aliases and
    ``.data`` of it (they share or copy the box, so ``is_inference`` is
    ``type(t._vbox) is InferenceVersion``).  As PyTorch's inference
    tensors, it refuses any in-place update outside ``inference_mode``: a
    bump of the box is the one step every in-place path takes, after its
    write, which is when PyTorch raises too (its ADInplaceOrView kernel
    bumps the version after the op: the data is written, then refused)."""

    __slots__ = ()

    def __setitem__(self, i, v):
        if not INFERENCE[0]:
            raise RuntimeError(INFERENCE_INPLACE)
        list.__setitem__(self, i, v)


def _new_tensor(data: np.ndarray, dtype: dt.DType) -> Tensor:
    # Every field of a new tensor, set inline (the eager hot path).
    t = _new_object(Tensor)
    t._data = data
    t.dtype = dtype
    t.requires_grad = False
    t._grad = None
    t._birth = EPOCH[0]
    t._node = None
    t._accum = None
    t._vbox = InferenceVersion((0,)) if INFERENCE[0] else [0]
    t._base = None
    t._view_chain = None
    t._view_version = 0
    t._hooks = None
    t._retains_grad = False
    return t


def _meta_bind(prim, args, params, arrays, out_dtype, needs_grad, rec_args, rec_params):
    """A primitive with a meta operand: a meta result of the shape its rule
    gives (nothing runs), with autograd's node as for any result."""
    if RECORDERS:
        raise RuntimeError(f"{prim.name}: a tensor on the meta device inside a traced "
                           "(compiled) function; meta tensors have no data to compile with")
    try:
        shape = prim.shape_rule(*[np.shape(a) for a in arrays], **params)
    except (ValueError, TypeError) as e:
        raise RuntimeError(f"{prim.name}: {e} (operand shapes "
                           f"{', '.join(str(np.shape(a)) for a in arrays)})") from None
    for a in arrays:
        if type(a) is not MetaArray and np.ndim(a) > 0:
            raise RuntimeError("Tensor on device cpu is not on the expected device meta!")
    out = _new_tensor(MetaArray.of(shape, out_dtype.np), out_dtype)
    if needs_grad and prim.vjp is not None and graph.is_grad_enabled():
        attach_node(prim, params, args, out)
    return out


class Size(tuple):
    """``torch.Size``: what ``Tensor.shape`` and ``Tensor.size()`` return, a
    tuple of sizes (equal to, and hashing like, the plain tuple)."""

    __slots__ = ()

    def __repr__(self):
        return f"{dt.PUBLIC_NAME[0]}.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        # (batch,) + x.shape[1:] is a Size too (Python asks the subclass's
        # reflected method first)
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        r = tuple.__mul__(self, n)
        return r if r is NotImplemented else Size(r)

    __rmul__ = __mul__

    def __reduce__(self):
        return (Size, (tuple(self),))


def _size_int(d):
    """``d`` as one size of a legacy size constructor, or None: a Python or
    NumPy int, or (as PyTorch's ``__index__``) a one-element integer tensor."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
        return int(d)
    if isinstance(d, np.ndarray) and d.ndim == 0 and d.dtype.kind in "iu":
        return int(d)          # (its __index__: LongTensor(np.array(5)) has 5 elements)
    if isinstance(d, Tensor) and d.dtype.category == 1 and d.numel() == 1:
        return int(d.item())
    return None


def legacy_sizes(args) -> tuple | None:
    """The sizes of ``Tensor(3, 4)`` / ``LongTensor(n, t.max())`` /
    ``Tensor(torch.Size([2, 3]))`` / ``x.new(2, 3)``, or None when ``args``
    are data (one argument that is not an int nor a Size: ``Tensor(t)`` of a
    0-dim tensor is data, an alias of it, as in PyTorch)."""
    if not args:
        return None
    if len(args) == 1:
        if isinstance(args[0], Size):
            return tuple(args[0])
        if not isinstance(args[0], Tensor):
            s = _size_int(args[0])
            if s is None and isinstance(args[0], (bool, float, complex, np.generic)):
                # a lone number that is no size is no data either (torch.Tensor(3.0))
                kind = type(args[0])
                name = kind.__name__ if kind.__module__ == "builtins" else \
                    f"numpy.{kind.__name__}"
                raise TypeError(f"new(): data must be a sequence (got {name})")
            return None if s is None else (s,)
        return None
    sizes = tuple(_size_int(a) for a in args)
    return None if None in sizes else sizes



def py_type_name(value) -> str:
    """``value``'s type as PyTorch's argument errors name it: a builtin's
    bare name (``list``), else module-qualified (``numpy.ndarray``)."""
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"

class Tensor:
    """A multi-dimensional array with define-by-run autograd (API.md §1-2)."""

    __slots__ = ("_data", "dtype", "requires_grad", "_grad", "_birth", "_node", "_accum", "_vbox",
                 "_base", "_view_chain", "_view_version", "_hooks", "_retains_grad", "__weakref__",
                 "__dict__")

    __array_priority__ = 1000  # make ndarray <op> Tensor defer to Tensor
    _plain_repr = True         # printed as "tensor(...)" (a subclass: its name)

    @property
    def _version(self) -> int:
        """PyTorch's version counter, an int: the in-place writes so far to
        this tensor's storage (through it or any view; ``_vbox``, the
        one-element list they share, holds it)."""
        return self._vbox[0]

    def __new__(cls, *data, dtype=None, requires_grad=False):
        if cls is Tensor and len(data) == 1 and isinstance(data[0], Tensor) and \
                dtype is None and not requires_grad:
            # PyTorch's legacy ``torch.Tensor(other)`` returns an alias of
            # ``other``: its storage, dtype and autograd (AliasBackward0), not
            # a float copy (old code's ``torch.Tensor(t)``, then writes into it).
            return data[0][...]
        return _new_object(cls)

    def __init__(self, *data, dtype=None, requires_grad=False, **kwargs):
        if hasattr(self, "_data"):     # (a slot: unset until initialized)
            # Made by a subclass's __new__ (Tensor._make_subclass): as in
            # PyTorch, whose tensors are built in __new__, nothing to do,
            # whatever that __new__ took (fastai: ``TensorBase(x, img_size=..)``).
            return
        if kwargs:
            raise TypeError(f"Tensor.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        sizes = legacy_sizes(data)
        if sizes is not None:
            # The legacy size constructor ``Tensor(3, 4)``: zeros (PyTorch leaves
            # them uninitialised).
            for n in sizes:
                if not isinstance(n, Sym) and n < 0:
                    raise RuntimeError(f"Trying to create tensor with negative dimension {n}: "
                                       f"{list(sizes)}")
            data = (np.zeros(sizes, dtype=(dtype and dt.to_dtype(dtype).np) or np.float32),)
        if len(data) > 1:
            raise TypeError("Tensor(): expected sizes (ints) or one data argument")
        if data and isinstance(data[0], str):
            raise TypeError(f"new(): invalid data type '{type(data[0]).__name__}'")
        if data and (data[0] is None or isinstance(data[0], (float, bool, complex, dict, set,
                                                            np.floating, np.bool_,
                                                            np.complexfloating))):
            # (a number is data only inside a sequence: Tensor(2.0) is refused)
            kind = type(data[0])
            name = f"numpy.{kind.__name__}" if kind.__module__ == "numpy" else kind.__name__
            raise TypeError(f"new(): data must be a sequence (got {name})")
        # torch.Tensor(data) is the legacy FloatTensor constructor: float by default.
        from_data = Tensor._from_data(data[0] if data else [], dtype or dt.get_default_dtype())
        self._init(from_data._data, from_data.dtype)
        if RECORDERS:   # a traced call: this new object holds the recorded copy's value
            _tell_recorders(self, from_data, "Tensor")
        self.requires_grad = bool(requires_grad)

    def _init(self, data, dtype):
        # The fields of a fresh tensor (_new_tensor is the hot path and sets
        # them inline); for constructors and subclasses (Parameter, Buffer).
        fresh = _new_tensor(data, dtype)
        for name in _FIELDS:
            setattr(self, name, getattr(fresh, name))

    # Every op's result is made here: a plain function (no classmethod
    # binding) with ``_init`` inlined, since the call costs as much as the stores.
    _make = staticmethod(_new_tensor)

    @staticmethod
    def _from_data(data, dtype=None) -> "Tensor":
        """A new tensor (a copy) from Python or NumPy data."""
        if type(data) is RuntimeInt:   # a number read at run time: its tensor, copied
            data = runtime_operand(data)
            if not isinstance(data, Tensor):
                return Tensor._from_data(data, dtype)
        elif type(data) is ArgArray and watched(data) is not None:
            # an argument array of a traced call: a copy of its input
            data = watched(data).tensor()
        elif _WATCHES and isinstance(data, np.ndarray):
            foreign(data)
        if isinstance(data, Tensor):
            # A copy made by a primitive (cast copies): inside tracec.compile it
            # is recorded, so it holds the traced tensor's value at every call.
            return ew.cast(data.detach(), data.dtype if dtype is None else dt.to_dtype(dtype))
        nested = None
        if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
            nested, data = data, _nested_to_numpy(data)
        try:
            arr = np.array(data)
        except (ValueError, TypeError) as e:
            raise _data_error(data) or TypeError(
                f"tensor(): could not convert {type(data).__name__} to a tensor: {e}") from None
        if arr.dtype.kind == "O" and any(type(x) in (ItemValue, RuntimeInt) for x in arr.flat):
            # a traced item() (refused while tracing: it would be a constant;
            # a number read at run time in a list: specialized)
            arr = np.array([x.use("tensor() data") if type(x) in (ItemValue, RuntimeInt) else x
                            for x in arr.flat]).reshape(arr.shape)
        if arr.dtype.kind in "OUSV":
            raise _data_error(data) or TypeError(
                f"tensor(): unsupported data of type {arr.dtype} "
                f"(expected numbers, got {type(data).__name__})")
        inferred = None if dtype is not None else _inferred_dtype(data if nested is None else nested)
        if dtype is not None:
            d = dt.to_dtype(dtype)
        elif inferred is not None:
            d = inferred
        elif arr.dtype.kind == "f":
            d = dt.get_default_dtype() if not isinstance(data, np.ndarray) \
                else dt.from_numpy_dtype(arr.dtype)
        elif arr.dtype.kind == "b":
            d = dt.bool_
        elif arr.dtype.kind in "iu":
            d = dt.int64 if not isinstance(data, np.ndarray) else dt.from_numpy_dtype(arr.dtype)
        elif arr.dtype.kind == "c":
            d = dt.get_default_complex() if not isinstance(data, np.ndarray) \
                else dt.from_numpy_dtype(arr.dtype)
        else:
            d = dt.get_default_dtype()
        if nested is not None and RECORDERS:
            return _nested_recorded(nested, d, arr.shape)
        if d is dt.float16:
            arr = dt.to_float16(arr)
        elif arr.dtype.kind == "f" and arr.dtype.itemsize > d.np.itemsize:
            with np.errstate(over="ignore"):   # (1e300 as float32 is inf, silently)
                arr = np.array(arr, dtype=d.np, copy=True)
        else:
            arr = np.array(arr, dtype=d.np, copy=True)
        if d is dt.bfloat16:
            arr = dt.round_bfloat16(arr)
        return Tensor._make(arr, d)

    # --- primitive application ---------------------------------------------

    @classmethod
    def _bind_primitive(cls, prim, args, params):
        # The eager hot path: a tiny op costs little more than this, so one
        # pass over the operands and no work for features not in use (weak
        # scalars, views, grad, recorders each have their own helper).
        if OP_OBSERVERS:
            return _observed_bind(cls, prim, args, params)
        needs_grad = scalars = False
        arrays, dtypes_ = [], []
        rec_args, rec_params = args, params
        if SYM_SHAPES:
            # Symbolic sizes among the operands or parameters: the eager op
            # runs on their values; the recorder sees the symbols.
            args, params = _size_values(args), _size_values(params)
        for a in args:
            if isinstance(a, Tensor):
                if a._view_chain and a._view_version != a._vbox[0]:
                    a._refresh_view()
                if a.requires_grad:
                    needs_grad = True
                arrays.append(a._data)
                dtypes_.append(a.dtype)
            else:
                scalars = True
                arrays.append(None)
                dtypes_.append(None)
        if scalars:
            _weak_scalars(prim, args, arrays, dtypes_)
        # (no ``**params`` when there are none: unpacking an empty dict
        # costs as much as the rule)
        out_dtype = prim.dtype_rule(*dtypes_, **params) if params else prim.dtype_rule(*dtypes_)
        if _META_USED[0] and any(type(a) is MetaArray for a in arrays):
            return _meta_bind(prim, args, params, arrays, out_dtype, needs_grad,
                              rec_args, rec_params)
        try:
            res = prim.impl(*arrays, **params) if params else prim.impl(*arrays)
        except (ValueError, TypeError) as e:
            if prim is ew.check_p:      # a failed value check: its own error (ops.VALUE_ERROR)
                raise
            prim.shape_rule(*[a.shape for a in arrays], **params)
            raise RuntimeError(f"{prim.name}: {e} (operand shapes "
                               f"{', '.join(str(a.shape) for a in arrays)})") from None
        if type(res) is not np.ndarray:
            res = np.asarray(res)
        npd = out_dtype.np
        if res.dtype is not npd and res.dtype != npd:
            res = res.astype(npd)
        if out_dtype is _BFLOAT16 and prim.kind != "movement":
            res = dt.round_bfloat16(res)
        out = _new_tensor(res, out_dtype)
        if res.base is not None and prim.name in _VIEW_PRIMS:
            _link_view(out, prim, rec_params, args[0], arrays[0])
        if needs_grad and prim.vjp is not None and graph.is_grad_enabled() and \
                (out_dtype.is_floating_point or out_dtype.category == 3):
            # (an integer or bool result never requires grad, as in PyTorch:
            # ``(x * 4).long()`` has no grad_fn; no gradient flows through
            # one anyway, the cast back's VJP stops it)
            # The node keeps the symbolic sizes the recorder sees: a VJP run
            # inside a trace (autograd.grad there) computes with the symbol
            # (mean's 1/T), not the traced size baked in as a constant.
            attach_node(prim, rec_params, rec_args, out)
        if RECORDERS:
            for r in RECORDERS:
                r(prim, rec_args, rec_params, out)
        return out

    # --- attributes ----------------------------------------------------------

    @property
    def grad(self):
        if GRAD_HOOKS:
            for h in GRAD_HOOKS:
                h(self, "get", self._grad)
        g = self._grad
        if g is None and self._node is not None and not self._retains_grad:
            # (PyTorch's TensorBase::grad() warns at each such read)
            warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            _check_assigned_grad(self, value)
        if GRAD_HOOKS:
            for h in GRAD_HOOKS:
                h(self, "set", value)
        self._grad = value

    @property
    def shape(self) -> tuple:
        if SYM_SHAPES:
            s = SYM_SHAPES[0](self)
            if s is not None:
                return Size(s)
        return Size(self._data.shape)

    def size(self, dim=None):
        shape = self.shape
        if dim is None:
            return shape
        return shape[core.normalize_axis(dim, self.ndim)]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        if SYM_SHAPES:
            n = 1
            for d in self.shape:
                n = n * d
            return n
        return int(self._data.size)

    def nelement(self) -> int:
        return self.numel()    # (a symbolic size's product while tracing, as numel)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def device(self):
        from tracec.device import cpu, meta
        return meta if type(self._data) is MetaArray else cpu

    @property
    def is_meta(self) -> bool:
        return type(self._data) is MetaArray

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def grad_fn(self):
        if self._view_chain and self._view_version != self._vbox[0]:
            self._refresh_view()
        return graph.named(self._node)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def data(self) -> "Tensor":
        # detach() with its own version counter, as PyTorch's ``.data``: an
        # in-place write through it (``out.data.masked_fill_(mask, 0)``, an
        # optimizer's ``p.data.add_``) is hidden from autograd, so the saved
        # tensors of the ops that read ``self`` stay valid.
        t = self.detach()
        t._vbox = [0] if type(self._vbox) is list else InferenceVersion((0,))
        return t

    @data.setter
    def data(self, value: "Tensor"):
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {py_type_name(value)}")
        if self.requires_grad and not (value.dtype.is_floating_point or value.dtype.category == 3):
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               "point or complex dtype")
        same = value._data.shape == self._data.shape and value.dtype is self.dtype
        if RECORDERS and not same:
            # A traced tensor given another shape or dtype: not recordable.
            why = ".data = a tensor of another shape or dtype"
            concrete(self, why)
            concrete(value, why)
        if RECORDERS and same:
            # Eagerly the ops that saved this tensor read its new value in
            # their backward (PyTorch's set_data keeps the TensorImpl they
            # saved: SAGAN's SpectralNorm reassigns u.data and v.data after
            # sigma = u.dot(W.mv(v)) read them): the tracer is told first.
            for r in RECORDERS:
                r(None, (self,), {"data_rebind": True}, self)
        self._data = value._data
        self.dtype = value.dtype
        if RECORDERS and same:
            # A traced call: this tensor now holds ``value``'s value (no grad
            # through it), written back at the end if it existed before.
            _tell_recorders(self, value.detach(), ".data =")

    @property
    def is_floating_point_(self):
        return self.dtype.is_floating_point

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        # len() must be a Python int: a symbolic size is specialized (under a
        # guard), never the traced call's number baked in
        return int(self.shape[0]) if SYM_SHAPES else self._data.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        if self.requires_grad and graph.is_grad_enabled():  # PyTorch iterates over unbind(0)
            return iter(self.unbind(0))
        return (self[i] for i in range(len(self)))

    def __hash__(self):
        return id(self)

    def __reduce_ex__(self, proto):
        # Pickled as PyTorch pickles a tensor (a joblib worker's returned loss
        # and model): a non-leaf as a leaf holding its values (requires_grad
        # kept) without its graph, whose nodes hold closures; a view as a
        # tensor of its own (its values copied, as PyTorch's pickle copies
        # each tensor's storage), without its base and replay chain.
        rv = object.__reduce_ex__(self, proto)
        if (self._node is None and not self._view_chain) or not (
                isinstance(rv, tuple) and len(rv) > 2 and isinstance(rv[2], tuple)
                and len(rv[2]) == 2):
            return rv
        d, slots = rv[2]
        slots = {**slots, "_node": None, "_accum": None, "_hooks": None, "_retains_grad": False,
                 "_vbox": [0]}
        if self._view_chain:
            slots.update(_base=None, _view_chain=None)
        return (*rv[:2], (d, slots), *rv[3:])

    def __deepcopy__(self, memo):
        # PyTorch's refusal of a non-leaf (an old-style weight_norm module hits
        # it); not for the tensors a copied tensor refers to inside (a detached
        # tensor's base).
        if not self.is_leaf and not memo.get(_IN_TENSOR_COPY):
            raise RuntimeError(
                "Only Tensors created explicitly by the user "
                "(graph leaves) support the deepcopy protocol at the moment.  "
                "If you were attempting to deepcopy a module, this may be because "
                "of a torch.nn.utils.weight_norm usage, "
                "see https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        outer = memo.get(_IN_TENSOR_COPY)
        memo[_IN_TENSOR_COPY] = True
        try:
            # (a plain tensor copies every field, its graph and view chain
            # too: Tensor.__reduce_ex__'s pickling forms are for pickles)
            rv = object.__reduce_ex__(self, 4) if type(self).__reduce_ex__ is \
                Tensor.__reduce_ex__ else self.__reduce_ex__(4)
            if rv[0] is copyreg.__newobj__ and type(self) is not Tensor:
                # A subclass's copy is made without its __new__, as PyTorch
                # makes it (fastai's TensorBase.__new__ takes the data)
                rv = (_new_object, *rv[1:])
            out = copy._reconstruct(self, memo, *rv)
        finally:
            memo[_IN_TENSOR_COPY] = outer
        if self._view_chain and out._base is not None:
            _share_copied_base(out, self)
        if RECORDERS:   # a traced call: the copy holds this call's value, not a constant
            _tell_recorders(out, self.detach(), "deepcopy")
        if SPARSE:      # (a COO buffer in a deep-copied state_dict stays COO)
            from tracec.contraction import keep_sparse
            keep_sparse(out, self)
        return out

    def __repr__(self):
        extra = []
        if type(self._data) is MetaArray:     # PyTorch's form: no values to show
            extra = [f"device='meta'", f"size={tuple(self._data.shape)}"]
            if self.dtype is not dt.get_default_dtype():
                extra.append(f"dtype={self.dtype!r}")
        if self._node is not None:
            extra.append(f"grad_fn=<{self._node.name()}>")
        elif self.requires_grad:
            extra.append("requires_grad=True")
        a = self._data
        if type(a) is MetaArray:
            return f"tensor(..., {', '.join(extra)})"
        from tracec.contraction import raw_record
        rec = raw_record(self)
        if rec is not None:
            if type(rec) is not list:       # CSR / CSC (tracec.sparse_compressed)
                from tracec.sparse_compressed import compressed_repr
                return compressed_repr(self, rec, extra)
            return self._sparse_repr(extra)
        if self.dtype is dt.bfloat16 or self.dtype is dt.float16:
            a = a.astype(np.float32)
        default = dt.get_default_dtype()
        # A subclass shows its own name (``MyT([1., 2.])``), as PyTorch's
        # _str_intern; Tensor and Parameter (``_plain_repr``) show "tensor(".
        prefix = "tensor(" if type(self).__dict__.get("_plain_repr") else f"{type(self).__name__}("
        return tensor_str.tensor_repr(
            a, self.dtype.is_floating_point or self.dtype.category == 3, extra, repr(self.dtype),
            self.dtype in (default, dt.int64, dt.bool_, dt.get_default_complex()),
            self.dtype is default, prefix)

    def _sparse_repr(self, extra) -> str:
        """PyTorch's text of a COO tensor: its indices and values, then its
        size, nnz, dtype and layout (the first of them on a new line)."""
        indices, values = self._indices().detach(), self._values().detach()
        ind = tensor_str.body_text(indices._data, False, 7 + len("indices=tensor("))
        if indices._data.size == 0:
            ind += ", size=" + str(tuple(indices.shape))
        va = values._data
        if values.dtype is dt.bfloat16 or values.dtype is dt.float16:
            va = va.astype(np.float32)
        val = tensor_str.body_text(va, values.dtype.is_floating_point
                                   or values.dtype.category == 3, 7 + len("values=tensor("))
        if va.size == 0:
            val += ", size=" + str(tuple(values.shape))
        suffixes = [f"size={tuple(self.shape)}", f"nnz={self._nnz()}"]
        default = dt.get_default_dtype()
        if self.dtype not in (default, dt.int64, dt.bool_, dt.get_default_complex()):
            suffixes.append(f"dtype={self.dtype!r}")
        suffixes.append(f"layout={self.layout!r}")
        text = "tensor(indices=tensor(" + ind + "),\n" + " " * 7 + "values=tensor(" + val + ")"
        return tensor_str._add_suffixes(text, suffixes + extra, 7, force_newline=True)

    __str__ = __repr__

    # --- conversion ----------------------------------------------------------

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The NumPy array (shared memory); ``force=True``: of a tensor that
        requires grad too (``detach()`` first, as PyTorch's ``force``)."""
        if not force:
            self._no_numpy_of_grad()
        concrete(self, "numpy()")
        if self.__dict__.get("_conj_bit"):
            raise RuntimeError("Can't call numpy() on Tensor that has conjugate bit set. Use "
                               "tensor.resolve_conj().numpy() instead.")
        if self.dtype is dt.bfloat16:
            return self._data.copy()
        return self._data

    def _no_numpy_of_grad(self):
        """PyTorch's refusal of a NumPy view of a tensor that requires grad
        (``numpy()``, and ``np.asarray`` / ``np.array`` / NumPy functions,
        which go through ``__array__`` -> ``numpy()``)."""
        if self.requires_grad and graph.is_grad_enabled():
            # (PyTorch checks grad mode too: under no_grad, as in a custom
            # op's body, numpy() of a tensor that requires grad is allowed)
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")

    def __array__(self, dtype=None, copy=None):
        self._no_numpy_of_grad()
        a = concrete(self, "conversion to a NumPy array (np.asarray, __array__)")
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, stream=None, **kwargs):
        """The DLPack capsule of this tensor's memory (shared, as PyTorch's
        ``__dlpack__``; NumPy makes it, so NumPy's limits apply: bfloat16
        has no DLPack form there)."""
        if self.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        return self.numpy().__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return (1, 0)   # (kDLCPU, device 0): tracec tensors live in host memory

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A NumPy ufunc on a tensor gives a tensor back, as in PyTorch
        (``np.sin(t)``, ``np.isnan(t)``, ``np.maximum(t, arr)``; a 0-d result
        stays a 0-d tensor, never a NumPy scalar): the ufunc's array,
        shared, with PyTorch's workaround of bool results as uint8."""
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        return Tensor._make(array, dt.from_numpy_dtype(array.dtype))

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be "
                               "converted to Scalar")
        for hook in ITEM_HOOKS:
            r = hook(self, caller(sys._getframe(1)))
            if r is not None:
                return r
        return concrete(self, "item()").reshape(()).item()

    def tolist(self):
        return concrete(self, "tolist()").tolist()

    def _one_element(self):
        # (Python's conversions: PyTorch's ValueError, not item()'s error)
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")

    def __complex__(self):
        self._one_element()
        return complex(self.item())

    def __float__(self):
        self._one_element()
        if self.requires_grad and not _WARNED["float_requires_grad"] and graph.is_grad_enabled():
            # PyTorch's TORCH_WARN_ONCE: the first such conversion in the process
            _WARNED["float_requires_grad"] = True
            import warnings
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead "
                          "to unexpected behavior.\nConsider using tensor.detach() first.",
                          UserWarning, stacklevel=2)
        return float(self.item())

    def __int__(self):
        self._one_element()
        return int(self.item())

    def __index__(self):
        if self.dtype.category != 1 and self.dtype is not dt.bool_ or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted "
                            "to an index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is "
                               "ambiguous")
        return bool(concrete(self, "bool()").reshape(()).item())

    def detach(self) -> "Tensor":
        t = Tensor._make(self._data, self.dtype)
        t._vbox = self._vbox
        # An alias (``_view_chain`` empty) of this very tensor, or of the one
        # this aliases: same storage and version counter, no autograd link.
        t._base = self._base if self._base is not None and not self._view_chain else self
        t._view_chain = ()
        if SPARSE:
            from tracec.contraction import keep_sparse
            keep_sparse(t, self)
        return t

    def detach_(self) -> "Tensor":
        """Detaches in place; a view (not a root or a detach() alias) is
        refused, as by PyTorch: its base would keep a graph it shares."""
        if self._view_chain:
            raise RuntimeError(_DETACH_VIEW_MSG)
        self._node = None
        self.requires_grad = False
        return self

    def _creation_requires_grad(self) -> "Tensor":
        """A factory's or Parameter's ``requires_grad=True``: PyTorch's
        creation check says "Only ... floating point and complex dtype"
        where ``requires_grad_()`` says "only ... floating point dtype"."""
        if not (self.dtype.is_floating_point or self.dtype.category == 3):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        # (the class's own method: a __torch_function__ wrapper installed on
        # Tensor would show this internal call to subclasses and modes)
        return _REQUIRES_GRAD_(self, True)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if not self.is_leaf and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you "
                               "want to use a computed variable in a subgraph that doesn't "
                               "require differentiation use var_no_grad = var.detach().")
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.category == 3):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self) -> None:
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.is_leaf:
            return
        if self._retains_grad:
            return
        self._retains_grad = True

        def keep(g, self=self):
            if self.grad is None:
                self.grad = g.detach() if not graph.is_grad_enabled() else g
            else:
                self.grad = self.grad + g
        keep._retains_grad = True
        self._add_node_hook(keep)

    def register_hook(self, hook):
        """Call ``fn(grad)`` when this tensor's gradient is computed; a
        returned tensor replaces the gradient."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._node is None:
            if self._hooks is None:
                self._hooks = []
            self._hooks.append(hook)
            hooks = self._hooks
            if RECORDERS:     # (a traced call: tracing._leaf_hook_guard)
                LEAF_HOOKS_ADDED.append((self, hook))
        else:
            hooks, hook = self._add_node_hook(hook)
        return _HookHandle(hooks, hook)

    def _add_node_hook(self, fn):
        """Add ``fn`` to the hooks the node producing this tensor runs on
        its incoming gradient; returns the list and what was added (for an
        output of a multi-output Function: ``fn`` on its slot, at the
        Function's node)."""
        node = self._node
        if getattr(node, "public_node", None) is not None:     # (a multi-output Function's)
            fn, node = graph_hooks.slot_hook(fn, node.index), node.node
        hooks = node.pre_hooks
        if hooks is None:
            hooks = node.pre_hooks = []
        if hooks and getattr(hooks[-1], "_retains_grad", False):
            # PyTorch runs retain_grad's hook after every tensor hook
            hooks.insert(len(hooks) - 1, fn)
        else:
            hooks.append(fn)
        return hooks, fn

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from tracec.autograd import backward as _backward
        _backward([self], None if gradient is None else [gradient],
                  retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # --- in-place machinery ---------------------------------------------------

    def _check_inplace(self, op: str, others_require_grad: bool = False) -> None:
        """Refuse the in-place ops PyTorch refuses with grad mode on
        (``others_require_grad``: an operand other than this tensor requires
        grad)."""
        if not graph.is_grad_enabled():
            return
        cf = self.__dict__.get("_custom_function_view")
        if cf is not None and self.requires_grad:
            # PyTorch's creation meta IN_CUSTOM_FUNCTION: rebasing the view
            # would override the custom Function's backward
            raise RuntimeError(
                f"Output {cf[0]} of {cf[1]} is a view and is being modified inplace. This view "
                "was created inside a custom Function (or because an input was returned as-is) "
                "and the autograd logic to handle view+inplace would override the custom "
                "backward associated with the custom Function, leading to incorrect gradients. "
                "This behavior is forbidden. You can fix this by cloning the output of the "
                "custom Function.")
        ng = self.__dict__.get("_no_grad_view") if self._view_chain else None
        if ng is not None and (self._base.requires_grad or others_require_grad):
            # PyTorch's creation meta NO_GRAD_MODE: whether the write should
            # reach the base's graph is ambiguous, so it is refused
            head = ("A view was created in no_grad mode" if ng is True else
                    f"Output 0 of {ng} is a view of a view which was created in no_grad mode")
            raise RuntimeError(f"{head} and is being modified inplace with grad mode enabled. "
                               "Given that this use case is ambiguous and error-prone, it is "
                               "forbidden. You can clarify your code by moving both the view and "
                               "the inplace either both inside the no_grad block (if you don't "
                               "want the inplace to be tracked) or both outside (if you want the "
                               "inplace to be tracked).")
        if self.requires_grad and self.__dict__.get("_component_view"):
            # .real/.imag/view_as_real/view_as_complex share memory with a
            # tensor in the graph, but autograd does not see writes through them.
            raise RuntimeError(f"{op}: an in-place write through a real/complex view "
                               "(.real, .imag, view_as_real, view_as_complex) of a tensor that "
                               "requires grad is not supported by tracec; write under "
                               "torch.no_grad() or into a clone.")
        mo = self.__dict__.get("_multi_output") if self._view_chain else None
        if mo is not None and (self.requires_grad or others_require_grad):
            # PyTorch's handle_view_on_rebase: a view made by split / chunk /
            # unbind (or a view of one) cannot be rebased onto an in-place
            # op's node, since its grad_fn serves its siblings too.
            gf = self.grad_fn if self.requires_grad else None
            head = (f"Output {mo} of {re.sub(r'Backward[0-9]*$', '', gf.name())} is a view and is "
                    "being modified inplace." if gf is not None else
                    "A view was created in no_grad mode and is being modified inplace with grad "
                    "mode enabled.")
            raise RuntimeError(f"{head} This view is the output of a function that returns "
                               "multiple views. Such functions do not allow the output views to "
                               "be modified inplace. You should replace the inplace operation by "
                               "an out-of-place one.")
        # (PyTorch's wording exactly, without the op's name: tutorials print
        # this error for ``w -= lr * w.grad`` outside no_grad)
        if not self._view_chain:  # a root or a detach() alias
            if self.requires_grad and self._node is None:
                raise RuntimeError("a leaf Variable that requires grad is being used "
                                   "in an in-place operation.")
        elif self._base.requires_grad and self._base._node is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is "
                               "being used in an in-place operation.")

    def _write_data(self, new: "Tensor", op: str) -> None:
        if type(self._data) is MetaArray:   # in-place ops on meta tensors do nothing
            self._vbox[0] += 1
            return
        try:
            np.copyto(self._data, new._data if new.shape == self.shape
                      else np.broadcast_to(new._data, self.shape))
        except ValueError as e:
            a = self._data
            shared = mem_overlap.internal_overlap(a)
            if not a.flags.writeable and not shared:
                # A view of an expanded tensor with distinct elements of its
                # own (``x[0]`` of ``ones(1, 3).expand(4, 3)``): PyTorch
                # writes into the shared memory
                if (not RECORDERS or expand_writes.through_expand(self._view_chain)) and \
                        mem_overlap.write_shared(a, new._data):
                    self._vbox[0] += 1
                    return
                raise RuntimeError(f"{op}: tracec cannot write to this tensor: it shares the "
                                   "memory of a NumPy array marked read-only (PyTorch writes "
                                   "there regardless); copy the array, or make it writable, "
                                   "before converting it") from None
            if shared and op in _SHARED_WRITES and (
                    not RECORDERS or expand_writes.through_expand(self._view_chain)) and \
                    not self.requires_grad and not new.requires_grad and \
                    mem_overlap.write_shared(a, new._data):
                # (PyTorch's fills and index writes skip the internal-overlap
                # check: each shared element holds one of the values written)
                if _SHARED_WRITES[op]:
                    import warnings
                    level, f = 3, sys._getframe(2)   # (the user's line, as PyTorch's warning)
                    while f is not None and f.f_globals.get("__name__", "").startswith("tracec."):
                        level, f = level + 1, f.f_back
                    warnings.warn(_SHARED_WRITES[op], UserWarning, stacklevel=level)
                self._vbox[0] += 1
                return
            if not self._data.flags.writeable:
                # (PyTorch's internal-overlap check names no op)
                raise RuntimeError("unsupported operation: more than one element of the "
                                   "written-to tensor refers to a single memory location. "
                                   "Please clone() the tensor before performing the "
                                   "operation.") from None
            if new.shape != self.shape:
                # (an in-place op's result, broadcast with the operands,
                # is larger than the tensor it is written to)
                raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the "
                                   f"broadcast shape {list(new.shape)}") from None
            raise RuntimeError(f"{op}: {e}") from None
        self._vbox[0] += 1

    def _assign(self, new: "Tensor", op: str) -> "Tensor":
        """Write ``new`` (already of this shape and dtype) into this tensor's
        storage; autograd and the tracer see the functional update."""
        self._check_inplace(op, new.requires_grad and not self.requires_grad)
        if new.dtype is not self.dtype:
            new = ew.cast(new, self.dtype)
        root = self._base
        if root is not None and not self._view_chain:
            # A detach() alias: the same storage, no autograd link to its root.
            kept = _grad_path_kept(root, new, op) if RECORDERS else new
            self._write_data(new, op)
            if new.requires_grad and graph.is_grad_enabled():
                # The alias itself joins the graph, as in PyTorch (Tacotron2's
                # ``attention_weights_cum += attention_weights`` into a
                # ``Variable(memory.data.new(B, T).zero_())``); its root does not.
                self._node = new._node
                self.requires_grad = True
            if RECORDERS:
                for r in RECORDERS:
                    r(None, (new,), {"inplace": op}, self)
                keep_grad = kept is not new
                if not keep_grad and new.requires_grad:
                    kept = ew.stop_gradient(new)
                _tell_recorders(root, kept, op, keep_grad=keep_grad)
            return self
        functional = bool(RECORDERS) or (graph.is_grad_enabled() and (
            new.requires_grad or self.requires_grad
            or (root is not None and root.requires_grad)))
        if functional and root is not None:
            self._rebase_view(root, new)
        self._write_data(new, op)
        if root is not None and "_no_grad_leaf" not in self.__dict__:
            # its node is the fresh one (a no_grad view stays stale: used in
            # grad mode after the write, _refresh_view refuses it as PyTorch)
            self._view_version = self._vbox[0]
        if functional and root is None and (self._node is not None or new.requires_grad):
            # A non-leaf (or a leaf written with a value that requires grad)
            # takes the new value's place in the graph; a leaf stays a leaf.
            self._node = new._node
            self.requires_grad = new.requires_grad
        if RECORDERS and root is None:
            for r in RECORDERS:
                r(None, (new,), {"inplace": op}, self)
        return self

    def _rebase_view(self, root: "Tensor", new: "Tensor") -> None:
        """``root`` becomes ``where(mask, adjoint(new), root)`` where adjoint
        undoes the view chain: exact for the injective views in-place writes
        allow, and built only from primitives and their VJPs."""
        chain = self._view_chain
        if SPECIALIZE_ON_REPLAY:
            view_replayed(chain)   # a view at an offset read at run time: now a number

        def adjoint(v):
            for prim, params, aval in reversed(chain):
                (v,) = prim.vjp(v, aval, out=None, **params)[:1]
            return v

        if expand_writes.through_expand(chain):
            # (a fill or index write into an expanded tensor: aliases)
            with graph.no_grad():
                new_root = expand_writes.rebased(chain, root, new)
        else:
            with graph.no_grad():
                # (a recorded fill, not a NumPy constant: in a symbolic trace
                # its shape stays the view's symbolic one, no size specialized)
                mask = ew.ne(adjoint(creation_ops.full(self.shape, 1, self.dtype, like=self)), 0)
            new_root = ew.where(mask, adjoint(new), root)
        if RECORDERS:
            for r in RECORDERS:
                r(None, (new_root,), {"inplace": "rebase"}, root)
            if root._base is not None:  # root is a detach() alias: its storage too
                _tell_recorders(root._base, new_root, "rebase")
        # Under no_grad the write changes values only, never the graph.
        grad_mode = graph.is_grad_enabled()
        if grad_mode:
            root._node = new_root._node
            root.requires_grad = root.requires_grad or new_root.requires_grad
            if new_root._node is not None:   # PyTorch's name for a write through a view
                new_root._node._name = "torch::autograd::CopySlices"
        view = root
        for prim, params, _ in chain:
            view = prim.bind(view, **params)
        if grad_mode:
            self._node = view._node
            self.requires_grad = self.requires_grad or view.requires_grad
            if view._node is not None:       # (PyTorch regenerates the view as as_strided)
                view._node._name = "AsStridedBackward0"
        if RECORDERS:
            for r in RECORDERS:
                r(None, (view,), {"inplace": "view"}, self)


    def _refresh_view(self) -> None:
        """This view's storage was written through its root or another view
        since its node was made: re-derive it from the root's current graph
        position (PyTorch regenerates a stale view's grad_fn likewise), so a
        gradient through it sees the write."""
        root = self._base
        grad_mode = graph.is_grad_enabled()
        if SPECIALIZE_ON_REPLAY and RECORDERS:
            view_replayed(self._view_chain)   # (see _rebase_view)
        if grad_mode and self.__dict__.get("_no_grad_leaf"):
            # PyTorch's NO_GRAD_MODE view whose storage changed: regenerating
            # its grad_fn would be ambiguous, so it is refused
            raise RuntimeError(
                "A view was created in no_grad mode and its base or another view of its base "
                "has been modified inplace with grad mode enabled. Given that this use case is "
                "ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
                "both the view and the inplace either both inside the no_grad block (if you "
                "don't want the inplace to be tracked) or both outside (if you want the inplace "
                "to be tracked).")
        if RECORDERS or (grad_mode and root.requires_grad):
            view = root
            for prim, params, _ in self._view_chain:
                view = prim.bind(view, **params)
            if grad_mode:
                self._node = view._node
                self.requires_grad = view.requires_grad
                if view._node is not None:
                    view._node._name = "AsStridedBackward0"
            if RECORDERS:
                for r in RECORDERS:
                    r(None, (view,), {"inplace": "view"}, self)
        if grad_mode or not root.requires_grad:
            self._view_version = self._vbox[0]  # else stale until grad mode is back


def _share_copied_base(out, view) -> None:
    """A deep-copied view ``out`` sees its copied base's memory, as the
    copy of ``view`` sees its base's (PyTorch deep-copies a storage once
    per deepcopy: ``deepcopy((x, x[1:]))`` gives a view of the copied
    ``x``), where the view is one NumPy can express (non-negative strides
    into a C-contiguous base)."""
    a, root, new_root = view._data, view._base._data, out._base._data
    if not (type(a) is type(root) is type(new_root) is np.ndarray and root.flags.c_contiguous
            and new_root.flags.c_contiguous and new_root.shape == root.shape) or SPARSE:
        return
    from tracec.serialization import _view_info
    info = _view_info(a, root)
    if info is None or any(s < 0 for s in info[1]):
        return
    offset, strides = info
    out._data = np.lib.stride_tricks.as_strided(
        new_root.reshape(-1)[offset:], shape=a.shape, strides=[s * a.itemsize for s in strides])


#: Tensor.requires_grad_ itself, before any __torch_function__ wrapper replaces it.
_REQUIRES_GRAD_ = Tensor.requires_grad_

# The per-tensor fields (every slot but __weakref__ and __dict__).
_IN_TENSOR_COPY = "tracec.tensor: copying inside a tensor"   # a deepcopy memo key
_FIELDS = tuple(n for n in Tensor.__slots__ if not n.startswith("__"))


def scalar_key(value, dtype: dt.DType) -> tuple:
    """A cache key for a scalar operand: -0.0 equals (and hashes as) 0.0,
    but ``x.mul_(-0.0)`` flips the signs of the zeros it makes; a complex
    scalar's parts carry their signs the same way (``1-0j == 1+0j``)."""
    if isinstance(value, (complex, np.complexfloating)):
        return (type(value), value, dtype.name,
                bool(np.signbit(value.real)), bool(np.signbit(value.imag)))
    if value == 0 and not isinstance(value, (int, np.integer, np.bool_)) and np.signbit(value):
        return (type(value), value, dtype.name, "-0")
    return (type(value), value, dtype.name)


def refuse_partial_overlap(out: "Tensor", operands) -> None:
    """PyTorch's ``assert_no_partial_overlap`` for a write into ``out`` that
    reads ``operands`` (tensors, lists of them; others ignored): an operand
    sharing some, not all, of ``out``'s memory in ``out``'s layout
    (``x[1:].copy_(x[:-1])``, ``x.t().add_(x)``) raises PyTorch's error, as
    tracec's out-of-place result would silently differ from PyTorch's."""
    a = out._data
    if type(a) is not np.ndarray:
        return
    for t in operands:
        if isinstance(t, (list, tuple)):
            refuse_partial_overlap(out, t)
        elif isinstance(t, Tensor):
            b = t._data
            # (two arrays owning their memory never share it: no bounds to compare)
            if b is a or type(b) is not np.ndarray or (a.base is None and b.base is None):
                continue
            if np.may_share_memory(a, b) and mem_overlap.partial_overlap(a, b):
                raise RuntimeError(mem_overlap.PARTIAL_MSG)


def _expanded_warning(op: str, example: str, line: int) -> str:
    return (f"Use of {op} on expanded tensors is deprecated. Please clone() the tensor before "
            f"performing this operation. This also applies to advanced indexing e.g. {example} "
            f"(Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/native/"
            f"TensorAdvancedIndexing.cpp:{line}.)")


#: in-place ops PyTorch runs on a tensor whose elements share memory (an
#: expanded one) -> the deprecation warning it gives (None: none)
_SHARED_WRITES = {
    "fill_": None, "zero_": None, "fill_diagonal_": None,
    "masked_fill_": _expanded_warning("masked_fill_", "tensor[mask] = scalar", 2450),
    "index_fill_": _expanded_warning("index_fill_", "tensor[mask] = scalar", 1913),
    "index_put_": _expanded_warning("index_put_", "tensor[indices] = tensor", 976),
}

def _data_error(data):
    """PyTorch's error for ``torch.tensor(data)`` that holds no numbers or
    ragged sequences, where it has one to give (else None): a string
    (``new(): invalid data type 'str'``), an object it cannot type
    (``Could not infer dtype of NoneType``), a sequence of another length
    than its first sibling's (``expected sequence of length 2 at dim 1 (got
    1)``), a number where a sequence belongs (``not a sequence``)."""
    def leaves(x):
        if isinstance(x, (list, tuple)):
            for v in x:
                yield from leaves(v)
        else:
            yield x
    for v in leaves(data):
        if isinstance(v, str):
            return TypeError("new(): invalid data type 'str'")
        if not isinstance(v, (numbers.Number, np.generic, np.ndarray, Tensor)):
            return RuntimeError(f"Could not infer dtype of {type(v).__name__}")
    sizes, x = [], data
    while isinstance(x, (list, tuple)):
        sizes.append(len(x))
        if not x:
            break
        x = x[0]

    def check(x, dim):
        if dim == len(sizes):
            return TypeError("'list' object cannot be interpreted as an integer") \
                if isinstance(x, (list, tuple)) else None
        if not isinstance(x, (list, tuple)):
            return TypeError("not a sequence")
        if len(x) != sizes[dim]:
            return ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} "
                              f"(got {len(x)})")
        for v in x:
            err = check(v, dim + 1)
            if err is not None:
                return err
        return None
    return check(data, 0)


def weak_scalar(value, dtype: dt.DType) -> np.ndarray:
    """The read-only 0-d array a weakly typed scalar operand becomes."""
    t = type(value)
    if t is int or (t is float and value):
        # (scalar_key's key for these, built inline: the hot case)
        arr = _SCALAR_ARRAYS.get((t, value, dtype.name))
        if arr is not None:
            return arr
    key = scalar_key(value, dtype)
    arr = _SCALAR_ARRAYS.get(key)
    if arr is None:
        if dtype.category == 1 and not isinstance(value, (bool, np.bool_)) and \
                isinstance(value, numbers.Integral):
            value = dt.wrap_int(int(value), dtype)   # uint8 - 1 is 255, as in PyTorch
        # (float16 through float32, as PyTorch converts a wrapped number)
        arr = dt.to_float16(value) if dtype is dt.float16 else np.asarray(value, dtype=dtype.np)
        arr.flags.writeable = False
        if len(_SCALAR_ARRAYS) < 4096:
            _SCALAR_ARRAYS[key] = arr
    return arr


def _size_values(xs):
    """``xs`` (operands or parameters) with each symbolic size replaced by
    its value in the call being traced."""
    if isinstance(xs, dict):
        out = None
        for k, v in xs.items():
            w = _size_values(v) if isinstance(v, (tuple, list)) else (
                v.hint if isinstance(v, Sym) else v)
            if w is not v:
                if out is None:
                    out = dict(xs)
                out[k] = w
        return xs if out is None else out
    if any(isinstance(v, Sym) for v in xs):
        return type(xs)(v.hint if isinstance(v, Sym) else v for v in xs)
    return xs


def _weak_scalars(prim, args, arrays, dtypes_) -> None:
    """Fill in the Python-scalar operands of ``_bind_primitive``: weakly
    typed, they take the dtype of the (highest category) tensor operand."""
    ref = None
    for d in dtypes_:
        if d is not None and (ref is None or d.category > ref.category):
            ref = d
    for i, a in enumerate(args):
        if dtypes_[i] is None:
            if type(a) not in _PY_SCALARS and not isinstance(
                    a, (numbers.Number, np.number, np.bool_)):
                raise TypeError(f"{prim.name}(): expected a Tensor or a number as "
                                f"operand, got {type(a).__name__}")
            d = ref if ref is not None else _scalar_dtype(a)
            arrays[i] = weak_scalar(a, d)
            dtypes_[i] = d


def apply_direct(prim, params, args, res: np.ndarray, dtype: dt.DType) -> "Tensor":
    """The result of ``prim`` on ``args`` whose NumPy value ``res`` (of
    ``dtype``) the caller computed with ``prim.impl``, under ``eager_direct``:
    what ``_bind_primitive`` does after the impl (keep the two in step), for
    hot composites whose binds would cost more than their NumPy work."""
    out = _new_tensor(res, dtype)
    if res.base is not None and prim.name in _VIEW_PRIMS:
        _link_view(out, prim, params, args[0], args[0]._data)
    if prim.vjp is not None:
        for a in args:
            if isinstance(a, Tensor) and a.requires_grad:
                if graph.is_grad_enabled():
                    attach_node(prim, params, args, out)
                break
    if RECORDERS:
        for r in RECORDERS:
            r(prim, args, params, out)
    return out


def bind_movement(prim, x: "Tensor", params: dict) -> "Tensor":
    """``prim.bind(x, **params)`` for a movement primitive (views, reshapes:
    the hottest front-end ops), applied directly when ``eager_direct``."""
    if RECORDERS or OP_OBSERVERS or (x._view_chain and x._view_version != x._vbox[0]):
        return prim.bind(x, **params)
    return apply_direct(prim, params, (x,), prim.impl(x._data, **params), x.dtype)


def eager_direct(x: "Tensor") -> bool:
    """May a composite apply its primitives to ``x`` directly with NumPy
    (building the same tensors and nodes ``_bind_primitive`` would)?  Only
    while no recorder or observer must see them and ``x`` is no stale view."""
    return not RECORDERS and not OP_OBSERVERS and not (
        x._view_chain and x._view_version != x._vbox[0]) and not (
        _META_USED[0] and type(x._data) is MetaArray)


def _observed_bind(cls, prim, args, params):
    """``_bind_primitive`` timed for the observers (off the hot path)."""
    import time
    observers = OP_OBSERVERS[:]
    OP_OBSERVERS.clear()         # the bind below runs unobserved, once
    start = time.perf_counter_ns()
    try:
        out = cls._bind_primitive(prim, args, params)
    finally:
        OP_OBSERVERS.extend(observers)
    for h in observers:
        h(prim.name, start, args)
    return out


def _link_view(out: Tensor, prim, params, src: Tensor, src_data: np.ndarray) -> None:
    """``out`` came from a view primitive as a NumPy view: if it shares
    ``src``'s memory it becomes a view of ``src``'s root (storage, version
    counter, the chain of movement steps from the root)."""
    res = out._data
    rb = res.base
    # NumPy points a view's ``base`` at the memory's owner, so a non-empty
    # result based on ``src`` or on its owner lies in ``src``'s memory:
    # may_share_memory only for the other cases (and to keep its answer
    # for empty arrays, which share nothing).
    if not ((rb is src_data or rb is src_data.base) and res.size) \
            and not np.may_share_memory(res, src_data):
        return
    version = src._vbox
    out._vbox = version
    out._view_version = version[0]
    step = ((prim, params, core.Aval.of(src_data.shape, src.dtype)),)
    if src._view_chain:  # a view of a view: the chain starts at the root
        out._base, out._view_chain = src._base, src._view_chain + step
        if "_multi_output" in src.__dict__ and graph.is_grad_enabled():
            # (a view of split's output is one too, as its own output 0)
            out._multi_output = 0
    else:  # of a root, or of a detach() alias (no autograd link beyond it)
        out._base, out._view_chain = src, step
    if not graph.is_grad_enabled():
        if not INFERENCE[0] and _differentiable(out):
            out._no_grad_view = True    # (_check_inplace: PyTorch's NO_GRAD_MODE views)
            if src.requires_grad:
                # PyTorch: a view keeps its base's requires_grad even when
                # made under no_grad, as a leaf without grad_fn whose
                # gradient reaches neither it nor its base (_accumulate)
                out.requires_grad = True
                out._no_grad_leaf = True
    elif src._view_chain and src.__dict__.get("_no_grad_view") is not None:
        # a view of one made with grad mode on: PyTorch names its node when
        # it has one (its root requires grad)
        out._no_grad_view = _VIEW_NODE_NAMES.get(prim.name, prim.name.capitalize()) \
            if out._base.requires_grad else True


def _differentiable(t: Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


#: PyTorch's backward-node names of the view primitives' most common uses,
#: for the message about a view of a view made in no_grad mode
_VIEW_NODE_NAMES = {"slice": "Slice", "reshape": "View", "transpose": "Permute",
                    "broadcast_to": "Expand"}


def mark_multi_output(pieces) -> None:
    """Mark the views ``pieces`` (split / chunk / unbind's outputs, made
    with grad mode on) as outputs of one multi-output view function, whose
    in-place modification ``_check_inplace`` refuses when autograd would
    track it (the base requires grad, or the value written does), as
    PyTorch does."""
    if graph.is_grad_enabled():
        for k, p in enumerate(pieces):
            if p._view_chain and _differentiable(p):
                p._multi_output = k


def attach_node(prim, params, args, out: Tensor) -> None:
    """Record ``out``'s backward node, as ``_bind_primitive`` does (call it
    with grad mode on and some operand requiring grad)."""
    nd = prim.nondiff_argnums
    edge_of = graph.edge_of
    nexts = []
    live = False  # some differentiable operand requires grad
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and i not in nd:
            e = edge_of(a)
            if e is not None:
                live = True
            nexts.append(e)
        else:
            nexts.append(None)
    if live:
        out.requires_grad = True
        out._node = graph.Node(prim, params, args, out, tuple(nexts))


def _grad_path_kept(root: Tensor, new: Tensor, op: str) -> Tensor:
    """For the tracer: ``new``'s value, written into ``root`` through a
    ``.data`` / ``detach()`` alias, with ``root``'s place in the graph.
    Eagerly such a write changes the values and keeps ``root``'s grad_fn
    (Tacotron2's ``alignment.data.masked_fill_(mask, -inf)`` before the
    softmax: the gradient still reaches the energies' layers), so the
    traced value must be ``new`` with the gradient flowing into ``root``'s
    old value: ``new - (sg(root) - root)``, whose subtrahend is an exact +0
    (so ``new`` is exact, -0.0 included) where ``root`` is finite, and 0,
    with no gradient, where it is not.  A leaf (a parameter updated through
    ``p.data``) keeps the plain write: its gradient is taken at its current
    value.  The root is first shown to the tracer, which refuses a later
    backward when an op already read the old value.  (A root that requires
    no grad is not: Tacotron2's ``Variable(memory.data.new(B, T).zero_())``
    accumulators are updated with ``+=`` after ``torch.cat`` copied them.
    Such a root is shown as ``alias_write_input``: the tracer refuses a
    later backward only when a recorded convolution's weight gradient read
    it, as PyTorch's reads the input as it is at backward time.)"""
    if not (root.requires_grad and root._node is not None and new.dtype is root.dtype
            and root.dtype.is_floating_point and new.shape == root.shape):
        for r in RECORDERS:
            r(None, (root,), {"alias_write_input": op}, root)
        return new
    for r in RECORDERS:   # (an op already read the old value: see tracing)
        r(None, (root,), {"alias_write": op}, root)
    with graph.enable_grad():
        z = ew.sub(ew.stop_gradient(root), root)
        z = ew.where(ew.eq(z, 0.0), z, 0.0)
        return ew.sub(new.detach(), z)


def _tell_recorders(t: Tensor, new: Tensor, op: str, keep_grad: bool = False) -> None:
    """Tell the recorders (only) that ``t``'s storage now holds ``new``
    (``keep_grad``: ``new`` is ``_grad_path_kept``'s value, whose gradient
    reaches ``t``'s old one, so a view's root is rebased with grad on:
    its new node passes the same gradient to the old one)."""
    if t._view_chain:
        with graph.enable_grad() if keep_grad else graph.no_grad():
            t._rebase_view(t._base, new)
        return
    for r in RECORDERS:
        r(None, (new,), {"inplace": op}, t)
    if t._base is not None:
        _tell_recorders(t._base, new, op)


def _scalar_dtype(a) -> dt.DType:
    if isinstance(a, (bool, np.bool_)):
        return dt.bool_
    if isinstance(a, numbers.Integral):
        return dt.int64
    if isinstance(a, (complex, np.complexfloating)):
        return dt.get_default_complex()
    return dt.get_default_dtype()


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _nested_recorded(xs, d: dt.DType, shape: tuple) -> "Tensor":
    """``tensor(xs)`` for a nested list holding tensors, while a call is
    traced: each tensor cast to ``d`` and the rows stacked with primitives,
    so the result follows the traced values (NumPy's copy would be a
    constant of the trace)."""
    like = next(x for x in _flat(xs) if isinstance(x, Tensor))   # the array module

    def build(x):
        if isinstance(x, Tensor):
            return ew.cast(x.detach(), d)
        if isinstance(x, (list, tuple)):
            rows = [build(r) for r in x]
            return movement.concatenate([movement.reshape(r, (1,) + tuple(r.shape))
                                         for r in rows], 0)
        return creation_ops.full((), x, d, like=like)   # a number: a constant
    out = build(xs)
    if tuple(out.shape) != tuple(shape):
        raise TypeError(f"tensor(): could not convert a nested list of shape {tuple(shape)}")
    return out


def _inferred_dtype(x):
    """The dtype ``torch.tensor(x)`` gives (tensor_new.cpp's
    infer_scalar_type): a Python number the default of its kind, a tensor,
    NumPy array or NumPy scalar its own dtype, a list or tuple the promotion
    of its items' (empty: the default dtype); None for anything else (then
    the caller goes by NumPy's conversion)."""
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, (np.ndarray, np.generic)):     # first: np.float64 is a float
        try:
            return dt.from_numpy_dtype(x.dtype)
        except TypeError:
            return None
    if isinstance(x, bool):
        return dt.bool_
    if isinstance(x, int):
        return dt.int64
    if isinstance(x, float):
        return dt.get_default_dtype()
    if isinstance(x, complex):
        return dt.get_default_complex()
    if isinstance(x, (list, tuple)):
        if not x:
            return dt.get_default_dtype()
        d = None
        for item in x:
            di = _inferred_dtype(item)
            if di is None:
                return None
            d = di if d is None else dt.promote_types(d, di)
            if d is dt.complex128:      # no item can widen it further
                return d
        return d
    return None


def _nested_to_numpy(xs):
    if isinstance(xs, Tensor):
        return xs._data
    if isinstance(xs, (list, tuple)):
        return [_nested_to_numpy(x) for x in xs]
    return xs


def as_tensor_operand(x):
    """A Tensor, or a number left as a (weakly typed) Python scalar."""
    if type(x) is RuntimeInt:              # a number read at run time (tracec.runtime_int)
        return runtime_operand(x)
    if isinstance(x, Tensor) or isinstance(x, (numbers.Number, np.bool_)):
        return x
    if isinstance(x, np.ndarray):
        return Tensor._from_data(x)
    if type(x).__name__ == "SymScalar":    # a traced Python number (tracec.sym_scalar)
        from tracec.sym_scalar import concrete_operand
        return concrete_operand(x)
    raise TypeError(f"expected a Tensor or a number, got {type(x).__name__}")


class _HookHandle(RemovableHandle):
    """What ``register_hook`` returns: a ``RemovableHandle`` (as PyTorch's)
    whose ``remove`` takes ``fn`` out of the list of hooks it was added to."""

    def __init__(self, hooks, fn):
        self._hooks, self._fn = hooks, fn
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.hooks_dict_ref = lambda: None
        self.extra_dict_ref = ()

    def remove(self):
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)
