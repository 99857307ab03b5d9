"""Writing checkpoints in PyTorch's zip format (what ``torch.save`` writes,
what ``torch.load`` reads), for scripts run as PyTorch (``tracec run``,
``install_as_torch``): a checkpoint such a script saves is one PyTorch
loads, as its author expects.

Layout, as ``torch.save`` makes it (``torch/serialization.py``): a zip of
stored (uncompressed) records under one folder named after the file,
``data.pkl`` (pickle protocol 2), ``.format_version`` ``1``,
``.storage_alignment`` ``64``, ``byteorder``, one ``data/<key>`` per storage
(its raw little-endian bytes, 64-byte aligned in the file), ``version``
``3`` and ``.data/serialization_id``.  In the pickle a tensor is
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, OrderedDict())``, a Parameter ``torch._utils._rebuild_parameter
(tensor, requires_grad, OrderedDict())``, a storage the persistent id
``("storage", torch.<Type>Storage, key, "cpu", numel)``; tensors that share
memory share a storage.  dtypes, devices and ``torch.Size`` are pickled as
PyTorch's.  
``encodable(obj)`` says whether an object is only what
``torch.load(weights_only=True)`` accepts.  Other objects (a whole module,
``torch.save(model, f)``; an ``argparse.Namespace``) are pickled whole,
with tracec's classes and functions under PyTorch's names
(``tracec.torch_names``: ``nn.Linear`` as ``torch.nn.modules.linear.Linear``)
and tracec's watched containers as the plain ones PyTorch has, so that
``torch.load(f, weights_only=False)`` rebuilds PyTorch's own objects; an
object reaching a tracec class PyTorch has no name for, or a tensor it has
no storage for, raises ``NotEncodable`` (``tracec.save`` then keeps
tracec's own format).

The pickle globals ``torch.*`` are written by name (the pure-Python
pickler with one dispatch entry): torch need not be installed, and under
``install_as_torch`` ``import torch`` is tracec itself.
"""
from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import types
import zipfile
from collections import OrderedDict, defaultdict

import numpy as np

from tracec import dtypes as dt
from tracec import mutation
from tracec.device import device
from tracec.nn.parameter import Buffer
from tracec.tensor import Size, Tensor
from tracec.torch_names import torch_name
from tracec import return_types as _return_types

__all__ = ["encodable", "save_torch", "torch_records", "write_records", "NotEncodable"]

_STORAGE = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
            "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
            "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
            "bool": "BoolStorage", "complex64": "ComplexFloatStorage",
            "complex128": "ComplexDoubleStorage"}
#: dtypes without a typed storage class: PyTorch saves them over an
#: ``UntypedStorage`` (its size in bytes) with ``_rebuild_tensor_v3``,
#: which names the dtype
_UNTYPED = frozenset(("uint16", "uint32", "uint64"))
_ALIGN = 64


class _Ref:
    """A global pickled by name (``module.name``), not looked up here."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):    # (pickle checks that a reduce's function is callable)
        raise TypeError(f"{self.module}.{self.name} is only written to a checkpoint")


class _StorageRef:
    """One storage: its key, PyTorch type name, element count and bytes."""

    __slots__ = ("key", "kind", "numel", "data", "root")

    def __init__(self, key, kind, numel, data, root):
        self.key, self.kind, self.numel, self.data = key, kind, numel, data
        self.root = root    # (kept alive: the storages are found by its id)


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class _Pickler(pickle._Pickler):
    """Protocol 2 with PyTorch's persistent ids and globals by name."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, fh, pickle_module=None, protocol=2):
        super().__init__(fh, protocol=protocol)
        self.storages: dict = {}        # id(root array) -> _StorageRef
        self.plain: dict = {}           # id(watched container) -> (it, its plain copy)
        self.user = user_pickler(pickle_module, protocol)
        if self.user is not None and getattr(self.user, "dispatch_table", None) is not None:
            self.dispatch_table = self.user.dispatch_table

    def reducer_override(self, obj):
        # what the caller's pickle module reduces its own way (cloudpickle:
        # local functions and classes by value); the rest as pickle does,
        # and tracec's classes and functions by PyTorch's names (save_global)
        if self.user is None or (isinstance(obj, (type, types.FunctionType,
                                                  types.BuiltinFunctionType))
                                 and torch_name(obj) is not None):
            return NotImplemented
        return self.user.reducer_override(obj)

    def save_ref(self, obj: _Ref):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
        self.memoize(obj)
    dispatch[_Ref] = save_ref

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            module = "torch.storage" if obj.kind == "UntypedStorage" else "torch"
            return ("storage", _Ref(module, obj.kind), obj.key, "cpu", obj.numel)
        return None

    def save(self, obj, save_persistent_id=True):
        if id(obj) in self.memo:
            # saved before (a tensor two entries share): the pickler's memo
            # reference, not a second copy (whose POP weights-only loading refuses)
            return super().save(obj, save_persistent_id)
        if isinstance(obj, dt.DType):
            return self.save_ref(_Ref("torch", obj.name))
        if isinstance(obj, Size):
            return self.save_reduce(_Ref("torch", "Size"), (tuple(int(d) for d in obj),),
                                    obj=obj)
        if type(obj) is device:
            return self.save_reduce(_Ref("torch", "device"), (str(obj),), obj=obj)
        if isinstance(obj, Tensor):
            if type(obj).__name__ in ("Tensor", "Parameter"):
                return self.save_reduce(*self._tensor(obj), obj=obj)
            if type(obj) is Buffer:
                # PyTorch pickles an nn.Buffer as a plain tensor with its flags
                fn, args = self._tensor(obj)
                return self.save_reduce(
                    _Ref("torch._tensor", "_rebuild_from_type_v2"),
                    (fn, _Ref("torch", "Tensor"), args,
                     {"persistent": bool(getattr(obj, "persistent", True)), "_is_buffer": True}),
                    obj=obj)
            if torch_name(type(obj)) is not None or \
                    type(obj).__module__.partition(".")[0] in ("tracec", "torch"):
                raise NotEncodable(f"a tensor of class {type(obj).__qualname__}")
            # A user's subclass, as PyTorch pickles one: the plain tensor's
            # rebuild, the class by name and the instance's attributes.
            fn, args = self._tensor(obj)
            return self.save_reduce(_Ref("torch._tensor", "_rebuild_from_type_v2"),
                                    (fn, type(obj), args, dict(vars(obj))), obj=obj)
        if isinstance(obj, tuple) and getattr(_return_types, type(obj).__name__, None) is type(obj):
            # a torch.return_types named tuple, reduced as PyTorch's are
            return self.save_reduce(_Ref("torch.return_types", type(obj).__name__),
                                    (tuple(obj), {}), obj=obj)
        if isinstance(obj, _module_class()) and self.memo.get(id(obj)) is None:
            return self._module(obj)
        if type(obj) in _PLAIN:
            # (one plain copy per container: objects sharing it still do)
            kept = self.plain.get(id(obj))
            if kept is None:
                kept = self.plain[id(obj)] = (obj, _PLAIN[type(obj)](obj))
            return super().save(kept[1], save_persistent_id)
        return super().save(obj, save_persistent_id)

    def _module(self, m):
        """A module as PyTorch pickles one (``copyreg.__newobj__`` and its
        ``__dict__``), with the hook tables PyTorch's ``Module`` has and
        tracec makes only on first use: PyTorch's ``__setstate__`` does not
        add them all, and its ``__call__`` reads them."""
        func, args, state, *rest = m.__reduce_ex__(2)
        if isinstance(state, dict):
            state = dict(state)
            for table in _TORCH_MODULE_TABLES:
                if state.get(table) is None:
                    state[table] = OrderedDict()
            state.setdefault("_is_full_backward_hook", None)
        self.save_reduce(func, args, state, *rest, obj=m)

    def save_global(self, obj, name=None):
        """A class or function by PyTorch's name for it (``torch_names``)."""
        named = torch_name(obj)
        if named is not None:
            if len(named) == 2:
                return self.save_ref(_Ref(*named))
            return self.save_reduce(getattr, (_Ref(named[0], named[1]), named[2]), obj=obj)
        module = getattr(obj, "__module__", None) or ""
        if module.partition(".")[0] in ("tracec", "torch", "torchvision"):
            raise NotEncodable(f"{module}.{getattr(obj, '__qualname__', obj)}, which PyTorch "
                               "has no name for")
        return super().save_global(obj, name)
    # (the copied table holds the base class's function for these)
    dispatch[types.FunctionType] = save_global
    dispatch[types.BuiltinFunctionType] = save_global

    def _tensor(self, t: Tensor):
        from tracec.nn.parameter import Parameter
        a = t.detach().numpy()
        d = t.dtype
        kind = _STORAGE.get(d.name) or ("UntypedStorage" if d.name in _UNTYPED else None)
        if kind is None:
            raise NotEncodable(f"a {d.name} tensor")
        root = _root(a)
        if not (root.flags.c_contiguous and root.dtype == a.dtype) or \
                any(st < 0 for st in a.strides):
            # (PyTorch has no negative strides, nor storages reinterpreted
            # as another type: such a view is saved as its own copy)
            root = a = np.ascontiguousarray(a)
        ref = self.storages.get(id(root))
        if ref is None:
            raw = root
            if d is dt.bfloat16:    # float32 storage in tracec: the bfloat16 bytes
                raw = (np.ascontiguousarray(root).view(np.uint32) >> 16).astype("<u2")
            ref = self.storages[id(root)] = _StorageRef(
                str(len(self.storages)), kind,
                int(root.size) * (root.itemsize if kind == "UntypedStorage" else 1),
                np.ascontiguousarray(raw).astype(raw.dtype.newbyteorder("<"), copy=False)
                .tobytes(), root)
        item = a.itemsize
        offset = (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // item
        stride = tuple(s // item for s in a.strides)
        size = Size(tuple(int(n) for n in a.shape))
        v3 = (d,) if kind == "UntypedStorage" else ()
        rebuild = _Ref("torch._utils", "_rebuild_tensor_v3" if v3 else "_rebuild_tensor_v2")
        if isinstance(t, Parameter):
            inner = _Rebuilt(rebuild, (ref, int(offset), size, stride, False, OrderedDict(), *v3))
            return (_Ref("torch._utils", "_rebuild_parameter"),
                    (inner, bool(t.requires_grad), OrderedDict()))
        return (rebuild, (ref, int(offset), size, stride, bool(t.requires_grad), OrderedDict(),
                          *v3))


class _Rebuilt:
    """A call pickled as its reduce value (a Parameter's inner tensor)."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


class NotEncodable(TypeError):
    """An object with no form ``torch.load`` rebuilds (see the module doc)."""


#: the hook tables of PyTorch's ``nn.Module`` (``Module.__init__``)
_TORCH_MODULE_TABLES = (
    "_backward_pre_hooks", "_backward_hooks", "_forward_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks", "_modules")


def _module_class():
    from tracec.nn.modules.module import Module   # (nn imports this module's users)
    return Module


#: tracec's watched containers -> the plain ones PyTorch's objects hold
#: (its modules' hook tables are OrderedDicts, their other tables dicts)
_PLAIN = {mutation.WatchedOrderedDict: dict, mutation.WatchedDict: dict,
          mutation.WatchedHookDict: OrderedDict,
          mutation.WatchedList: list,
          mutation.WatchedState: lambda d: defaultdict(dict, d)}


def encodable(obj, _seen=None) -> bool:
    """Whether ``obj`` is made only of what ``torch.load(weights_only=True)``
    accepts: tensors, dtypes, devices, sizes, numbers, strings, None, lists,
    tuples and dicts (OrderedDicts too).  Anything else (a whole module, an
    ``argparse.Namespace``, a NumPy scalar) keeps tracec's own format, which
    ``tracec.load(weights_only=False)`` reads (tracec never unpickles
    arbitrary objects from a file in PyTorch's format)."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return True
    seen.add(id(obj))
    if isinstance(obj, Tensor):
        return (obj.dtype.name in _STORAGE or obj.dtype.name in _UNTYPED) \
            and type(obj).__name__ in ("Tensor", "Parameter", "Buffer") \
            and not getattr(obj, "is_meta", False)
    if type(obj) in (dt.DType, Size, str, bytes, int, float, complex, bool, type(None)):
        return True
    if type(obj) is device:
        return True
    if type(obj) in (list, tuple):
        return all(encodable(v, seen) for v in obj)
    if type(obj) in (dict, OrderedDict):
        return all(encodable(k, seen) and encodable(v, seen) for k, v in obj.items())
    return False


def user_pickler(pickle_module, protocol):
    """A pickler of ``torch.save``'s ``pickle_module`` whose
    ``reducer_override`` (and ``dispatch_table``) the pickle of a checkpoint
    consults, as PyTorch pickles with that module's ``Pickler``
    (``cloudpickle``: fastai's ``Learner.export``); None for the standard
    ``pickle`` or a module without that hook."""
    cls = getattr(pickle_module, "Pickler", None)
    if pickle_module is None or pickle_module is pickle or not isinstance(cls, type) or \
            getattr(cls, "reducer_override", None) is None:
        return None
    return cls(io.BytesIO(), protocol=protocol)


def torch_records(obj, pickle_module=None, pickle_protocol=2) -> list:
    """The records of a PyTorch zip holding ``obj`` (``write_records``
    writes them), pickled with ``pickle_module``'s reductions where it has
    its own (``user_pickler``).  Raises ``NotEncodable`` for what has no
    PyTorch form."""
    data = io.BytesIO()
    p = _Pickler(data, pickle_module, pickle_protocol or 2)
    p.dump(obj)
    records = [("data.pkl", data.getvalue()), (".format_version", b"1"),
               (".storage_alignment", str(_ALIGN).encode()),
               ("byteorder", sys.byteorder.encode())]
    records += [(f"data/{r.key}", r.data) for r in p.storages.values()]
    records += [("version", b"3\n"),
                (".data/serialization_id", os.urandom(20).hex().encode())]
    return records


def save_torch(obj, fh, name: str) -> None:
    """Write ``obj`` in PyTorch's zip format to the binary file ``fh``; the
    records sit under the folder ``name`` (PyTorch uses the file's stem).
    Raises ``NotEncodable`` (a ``TypeError``) for what has no PyTorch form."""
    write_records(torch_records(obj), fh, name)


def write_records(records: list, fh, name: str) -> None:
    """The zip of ``records`` (``torch_records``) under the folder ``name``."""
    seekable = getattr(fh, "seekable", lambda: False)()
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        for rec, payload in records:
            info = zipfile.ZipInfo(f"{name}/{rec}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            if rec.startswith("data/") and seekable:
                # Pad the local header's extra field so the bytes start on a
                # 64-byte boundary, as PyTorch writes them (mmap loading).
                start = fh.tell() + 30 + len(info.filename.encode())
                pad = -(start + 4) % _ALIGN
                info.extra = struct.pack("<HH", 0x4654, pad) + b"Z" * pad
            z.writestr(info, payload)
