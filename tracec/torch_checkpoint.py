"""Reading files written by ``torch.save`` (and plain pickles) without
running any of their code.

A pickle is a program; unpickling runs whatever callables it names.  Here
an ``Unpickler`` subclass resolves a name only through an allow-list (what
``torch.load(weights_only=True)`` accepts: the tensor rebuild functions,
storage types, dtypes, ``torch.device``, ``torch.Size``, ``OrderedDict``,
``set``...) to tracec's own reconstruction functions, and refuses any other
name, naming it and the file, before anything is called.  Storages come
from the archive through ``persistent_load`` as raw bytes; each tensor is
NumPy's ``as_strided`` over its storage (offset, sizes, strides), copied,
so views and storages shared between tensors load with the right values
(as separate tensors).

Formats: the zip archive (``ARCHIVE/data.pkl``, ``ARCHIVE/data/<key>``,
``ARCHIVE/byteorder``), the legacy stream (``_use_new_zipfile_serialization
=False``: magic number, protocol, system info, the object, the storage
keys, then each storage as an int64 element count and its bytes), and a
plain pickle of allowed objects.

Every integer dtype keeps its own (ByteStorage is uint8, CharStorage int8,
ShortStorage int16; uint16/32/64 as themselves); complex and float8 tensors
are refused.
"""
from __future__ import annotations

import _compat_pickle
import collections
import io
import math
import pickle
import types
import zipfile

import numpy as np

from tracec import dtypes as dt
from tracec import torch_names
from tracec.device import device
from tracec.nn.parameter import Parameter
from tracec.tensor import Size
from tracec.tensor import Tensor
from tracec.tensor_meta import set_storage_root

__all__ = ["load_torch", "CheckpointError", "WeightsOnlyError", "add_safe_globals",
           "clear_safe_globals", "get_safe_globals", "safe_globals", "weights_only_message"]

#: What ``add_safe_globals`` allowed (PyTorch's API for the names a
#: weights-only load may resolve): classes and functions, or
#: ``(object, "module.name")`` pairs naming them as the file does.
_SAFE_GLOBALS: list = []


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes or functions (or ``(obj, "module.name")``
    pairs) in checkpoints, as ``torch.serialization.add_safe_globals``: the
    user vouches for them (``argparse.Namespace`` in a checkpoint's
    ``args``).  Loading then makes them as pickle does (a class's
    ``__new__`` and ``__setstate__``)."""
    for g in safe_globals:
        if isinstance(g, tuple):
            if len(g) != 2 or not isinstance(g[1], str):
                raise ValueError(f"expected (object, 'module.name'), got {g!r}")
        elif not callable(g):
            raise TypeError(f"add_safe_globals: {g!r} is not a class or function")
        _SAFE_GLOBALS.append(g)


def clear_safe_globals() -> None:
    """Forget every ``add_safe_globals`` entry."""
    _SAFE_GLOBALS.clear()


def get_safe_globals() -> list:
    """The ``add_safe_globals`` entries, in order."""
    return list(_SAFE_GLOBALS)


class safe_globals:
    """``with safe_globals([...]):`` allows them only inside the block."""

    def __init__(self, safe_globals: list):
        self.globals = list(safe_globals)

    def __enter__(self):
        self._before = list(_SAFE_GLOBALS)
        add_safe_globals(self.globals)

    def __exit__(self, *exc):
        _SAFE_GLOBALS[:] = self._before
        return False


def _safe_global_names() -> dict:
    """``(module, name)`` -> object for each allowed global: the name the
    pair gives, else the object's own name and, for a tracec class or
    function, PyTorch's name for it (``torch_names``: the name a checkpoint
    pickles, ``torch.nn.modules.loss.CrossEntropyLoss`` for tracec's
    ``nn.CrossEntropyLoss``)."""
    out = {}
    for g in _SAFE_GLOBALS:
        if isinstance(g, tuple):
            obj, name = g
            module, _, attr = name.rpartition(".")
        else:
            obj, module, attr = g, getattr(g, "__module__", ""), getattr(g, "__qualname__", "")
            pickled = torch_names.torch_name(g)
            if pickled is not None and len(pickled) == 2:
                out[pickled[0], pickled[1]] = obj
        out[module, attr] = obj
    return out


class CheckpointError(RuntimeError, ValueError):
    """A file that ``tracec.load`` cannot read (truncated, corrupt, a pickle,
    not a checkpoint)."""


class WeightsOnlyError(CheckpointError, pickle.UnpicklingError):
    """A checkpoint ``tracec.load`` refuses because loading it would import
    a class or function the file names: a ``tracec.save`` file holding a
    pickled object (DINO's checkpoint with its ``argparse.Namespace``), or a
    ``torch.save`` file naming a global outside the allow-list, under
    ``weights_only=True``, the default.  A ``pickle.UnpicklingError``,
    as ``torch.load``'s refusal is, so ``except pickle.UnpicklingError``
    code catches it."""

def weights_only_message(global_name: str) -> str:
    """PyTorch's text for a weights-only load refused at the global
    ``global_name`` (``torch.load``'s ``UnpicklingError``), verbatim: the
    two ways out, then the ``WeightsUnpickler error`` naming the global and
    the ``add_safe_globals`` / ``safe_globals`` call that allows it."""
    return ("Weights only load failed. This file can still be loaded, to do so you have two "
            "options, \x1b[1mdo those steps only if you trust the source of the "
            "checkpoint\x1b[0m. \n\t(1) In PyTorch 2.6, we changed the default value of the "
            "`weights_only` argument in `torch.load` from `False` to `True`. Re-running "
            "`torch.load` with `weights_only` set to `False` will likely succeed, but it can "
            "result in arbitrary code execution. Do it only if you got the file from a trusted "
            "source.\n\t(2) Alternatively, to load with `weights_only=True` please check the "
            "recommended steps in the following error message.\n\tWeightsUnpickler error: "
            f"Unsupported global: GLOBAL {global_name} was not an allowed global by default. "
            f"Please use `torch.serialization.add_safe_globals([{global_name}])` or the "
            f"`torch.serialization.safe_globals([{global_name}])` context manager to allowlist "
            "this global if you trust this class/function.\n\nCheck the documentation of "
            "torch.load to learn more about types accepted by default with weights_only "
            "https://pytorch.org/docs/stable/generated/torch.load.html.")


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001

# torch dtype name -> NumPy dtype of its little-endian bytes
_RAW = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<u2",
        "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1", "uint8": "u1",
        "bool": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
        "complex64": "<c8", "complex128": "<c16"}
_STORAGE_DTYPES = {"FloatStorage": "float32", "DoubleStorage": "float64",
                   "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
                   "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
                   "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                   "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}
# Names of torch dtypes that may appear as values (``torch.float16``).
_TORCH_DTYPE_NAMES = set(_RAW) | {"float", "double", "half", "long", "int", "short", "cfloat",
                                  "cdouble", "float8_e4m3fn", "float8_e5m2", "qint8",
                                  "quint8", "qint32"}


class _StorageType:
    """What ``torch.FloatStorage`` etc. stand for: an element dtype
    (``None`` for ``torch.storage.UntypedStorage``: bytes)."""

    def __init__(self, dtype):
        self.dtype = dtype


class _Storage:
    """A storage's raw bytes, its element dtype and where it was saved."""

    def __init__(self, data: bytes, dtype, location: str, big_endian: bool):
        self.data, self.dtype, self.location = data, dtype, location
        self.big_endian = big_endian

    def elements(self, dtype_name: str, error) -> np.ndarray:
        raw = _RAW[dtype_name]
        if self.big_endian and raw[0] == "<":
            raw = ">" + raw[1:]
        item = np.dtype(raw).itemsize
        if len(self.data) % item:
            raise error(f"a storage of {len(self.data)} bytes does not hold whole "
                        f"{dtype_name} elements")
        return np.frombuffer(self.data, dtype=raw)

    def flat(self, dtype_name: str, error) -> np.ndarray:
        """The elements as one writable native array of tracec's type
        for ``dtype_name`` (bfloat16 as float32 values, bool as bool), made
        once per dtype so every tensor over this storage views it."""
        cache = self.__dict__.setdefault("_flat", {})
        if dtype_name not in cache:
            raw = self.elements(dtype_name, error)
            if dtype_name == "bfloat16":
                a = (raw.astype(np.uint32) << 16).view(np.float32)
            elif dtype_name == "bool":
                a = raw != 0
            else:
                a = raw.astype(raw.dtype.newbyteorder("="))   # a writable copy
            cache[dtype_name] = a
        return cache[dtype_name]


class ForeignDType:
    """A torch dtype that tracec does not have, found as a value in a
    checkpoint (for example ``torch.complex64``); it prints as PyTorch does."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    def __eq__(self, other):
        return isinstance(other, ForeignDType) and other.name == self.name

    def __hash__(self):
        return hash(("torch", self.name))


def _dtype_name(d) -> str:
    return d.name if isinstance(d, (dt.DType, ForeignDType)) else str(d)


class _Builder:
    """The allowed callables, bound to one file (its storages, its errors,
    the caller's ``map_location``)."""

    def __init__(self, error, finish):
        self.error, self.finish = error, finish

    def tensor(self, storage, offset, size, stride, requires_grad=False, hooks=None,
               metadata=None, dtype=None):
        if not isinstance(storage, _Storage):
            raise self.error(f"a tensor's storage is {type(storage).__name__}, not a storage")
        name = _dtype_name(dtype) if dtype is not None else storage.dtype
        name = {"float": "float32", "double": "float64", "half": "float16",
                "long": "int64", "int": "int32", "short": "int16"}.get(name, name)
        if name not in _RAW:
            raise self.error(f"a tensor has dtype torch.{name}, which tracec does not support")
        flat = storage.flat(name, self.error)
        size, stride = tuple(size), tuple(stride)
        ints = (offset, *size, *stride)
        if len(size) != len(stride) or not all(isinstance(x, int) and x >= 0 for x in ints):
            raise self.error(f"a tensor has a bad layout (offset {offset}, size {size}, "
                             f"stride {stride})")
        if math.prod(size) == 0:
            arr = np.empty(size, flat.dtype)
        else:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= flat.size:
                raise self.error(f"a tensor (offset {offset}, size {size}, stride {stride}) "
                                 f"reaches past its storage of {flat.size} elements")
            arr = np.lib.stride_tricks.as_strided(
                flat[offset:], size, [s * flat.itemsize for s in stride])
            if any(s == 0 and n > 1 for n, s in zip(size, stride)):
                arr.flags.writeable = False
        if isinstance(metadata, dict) and (metadata.get("conj") or metadata.get("neg")):
            # PyTorch's conj / neg bit (a lazy ``x.conj()`` saved as its
            # storage plus the bit): the values it stands for, materialized
            arr = np.conj(arr) if metadata.get("conj") else arr.copy()
            if metadata.get("neg"):
                arr = np.negative(arr)
        t = Tensor._make(arr, dt.bfloat16 if name == "bfloat16" else dt.from_numpy_dtype(arr.dtype))
        if arr.size and not (isinstance(metadata, dict) and
                             (metadata.get("conj") or metadata.get("neg"))):
            # (views of one storage report it: offsets, untyped_storage)
            roots = storage.__dict__.setdefault("_roots", {})
            if name not in roots:
                roots[name] = Tensor._make(flat, t.dtype)
            set_storage_root(t, roots[name])
        if requires_grad:
            t.requires_grad_(True)
        return self.finish(t, storage.location)

    def tensor_v1(self, storage, offset, size, stride):
        return self.tensor(storage, offset, size, stride)

    def tensor_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype,
                  metadata=None):
        return self.tensor(storage, offset, size, stride, requires_grad, hooks, metadata,
                           dtype=dtype)

    def parameter(self, data, requires_grad, hooks=None, state=None):
        if not isinstance(data, Tensor):
            raise self.error(f"a Parameter's data is {type(data).__name__}, not a tensor")
        return Parameter(data, bool(requires_grad))

    def from_type(self, func, new_type, args, state):
        t = func(*args)
        if new_type is Parameter and not isinstance(t, Parameter):
            t = Parameter(t, t.requires_grad)
        elif isinstance(new_type, type) and issubclass(new_type, Tensor) and \
                not isinstance(t, new_type):
            # a user's Tensor subclass (only named under weights_only=False)
            t = t.as_subclass(new_type)
            for k, v in ((state[0] if isinstance(state, tuple) else state) or {}).items():
                setattr(t, k, v)
        elif new_type is Tensor and isinstance(state, dict):
            # a plain tensor's attributes (an nn.Buffer's persistent and
            # _is_buffer flags), set as PyTorch's _set_obj_state does
            for k, v in state.items():
                setattr(t, k, v)
        return t


def _encode(text, encoding="latin1"):
    """``_codecs.encode``, which protocol-2 pickles use for ``bytes``."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only as bytes' latin1 encoding")
    return text.encode("latin1")


def _torch_dtype(name):
    try:
        return dt.to_dtype(name)
    except TypeError:
        return ForeignDType(name)


def _allowed(builder: _Builder) -> dict:
    rc = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("collections", "Counter"): collections.Counter,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "complex"): complex,
        ("builtins", "bytearray"): bytearray,
        ("_codecs", "encode"): _encode,
        ("torch", "Size"): Size,
        ("torch", "device"): device,
        ("torch", "Tensor"): Tensor,
        ("torch.nn.parameter", "Parameter"): Parameter,
        ("torch._utils", "_rebuild_tensor"): builder.tensor_v1,
        ("torch._utils", "_rebuild_tensor_v2"): builder.tensor,
        ("torch._utils", "_rebuild_tensor_v3"): builder.tensor_v3,
        ("torch._utils", "_rebuild_parameter"): builder.parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): builder.parameter,
        ("torch._tensor", "_rebuild_from_type_v2"): builder.from_type,
        ("torch.storage", "UntypedStorage"): _StorageType(None),
    }
    for cls, name in _STORAGE_DTYPES.items():
        rc["torch", cls] = _StorageType(name)
    for name in _TORCH_DTYPE_NAMES:
        rc["torch", name] = _torch_dtype(name)
    rc.update(_safe_global_names())
    return rc


class _Unpickler(pickle.Unpickler):
    """Resolves only allow-listed names; storages come from ``storages``."""

    def __init__(self, fh, allowed, storages, error, open_globals=False):
        super().__init__(fh)
        self.allowed, self.storages, self.error = allowed, storages, error
        self.open_globals = open_globals

    def find_class(self, module, name):
        # Protocol-2 pickles use Python 2 names (__builtin__.set).
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[module, name]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        obj = self.allowed.get((module, name))
        if obj is None and self.open_globals:
            # weights_only=False: the caller trusts the file, as torch.load
            # then does: any global, PyTorch's names as tracec's objects.
            try:
                return torch_names.resolve(module, name)
            except (ImportError, AttributeError) as e:
                raise self.error(f"cannot load {module}.{name} ({e})") from None
        if obj is None:
            # PyTorch's refusal, verbatim (naming the global and the ways to
            # allow it), after the file's name
            raise WeightsOnlyError(str(self.error(weights_only_message(f"{module}.{name}"))))
        return obj

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and pid and pid[0] in ("module", b"module") \
                and self.open_globals:
            # a legacy stream's whole Module: (class, source file, source);
            # PyTorch only warns when the source changed, and uses the class
            return pid[1]
        if not (isinstance(pid, tuple) and pid and pid[0] in ("storage", b"storage")):
            raise self.error(f"unsupported persistent id {str(pid)[:60]!r} (only tensor "
                             "storages are read)")
        return self.storages(pid[1:])


def _unpickle(data, allowed, storages, error, open_globals=False):
    try:
        return _Unpickler(io.BytesIO(data) if isinstance(data, bytes) else data,
                          allowed, storages, error, open_globals).load()
    except RuntimeError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, ImportError, RecursionError, MemoryError) as e:
        raise error(f"the pickle is corrupt or unsupported ({type(e).__name__}: {e})") from None


def _storage_type(st, error):
    if not isinstance(st, _StorageType):
        raise error(f"a storage has type {type(st).__name__}, not a torch storage type")
    return st.dtype or "uint8"


def _load_zip(fh, error, finish, map_location, open_globals=False):
    try:
        z = zipfile.ZipFile(fh)
        names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise error(f"the zip archive is corrupt ({e})") from None
    pkls = sorted((n for n in names if n.endswith("data.pkl") and n.count("/") <= 1),
                  key=len)
    if any(n.endswith("constants.pkl") for n in names):
        # (its pickle names TorchScript classes, __torch__.*, whose code is TorchScript)
        raise error("this is a TorchScript archive (torch.jit.save), not a torch.save "
                    "checkpoint: tracec does not run TorchScript code; save the model's "
                    "state_dict (or the model with torch.save) in PyTorch instead")
    if not pkls:
        raise error("this is a zip archive, but neither a torch.save checkpoint (no data.pkl) "
                    "nor a tracec checkpoint")
    prefix = pkls[0][:-len("data.pkl")]
    read = _zip_reader(z, error)
    big = read(prefix + "byteorder", missing=b"little").strip() == b"big"
    cache: dict = {}

    def storages(args):
        if len(args) != 4:
            raise error(f"a storage id has {len(args)} fields, expected 4")
        st, key, location, numel = args
        key = key.decode("ascii") if isinstance(key, bytes) else str(key)
        if key not in cache:
            dtype = _storage_type(st, error)
            data = read(f"{prefix}data/{key}")
            cache[key] = _Storage(data, dtype, _decode(location), big)
        return cache[key]

    return _unpickle(read(prefix + "data.pkl"), _allowed(_Builder(error, finish)), storages,
                     error, open_globals)


def _zip_reader(z, error):
    def read(name, missing=None):
        try:
            return z.read(name)
        except KeyError:
            if missing is not None:
                return missing
            raise error(f"the archive has no entry {name} (truncated or corrupt)") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
            raise error(f"the archive is corrupt ({name}: {e})") from None
    return read


def _decode(location):
    return location.decode("ascii") if isinstance(location, bytes) else str(location)


def _load_stream(fh, error, finish, open_globals=False):
    """A legacy ``torch.save`` stream, or a plain pickle."""
    builder = _Builder(error, finish)
    allowed = _allowed(builder)

    def no_storages(args):
        raise error("a plain pickle refers to tensor storages it does not hold")
    first = _unpickle(fh, allowed, no_storages, error, open_globals)
    if first != _LEGACY_MAGIC:
        return first  # a plain pickle of allowed objects
    protocol = _unpickle(fh, allowed, no_storages, error)
    if protocol != _LEGACY_PROTOCOL:
        raise error(f"invalid protocol version {protocol!r} of a legacy torch.save file")
    _unpickle(fh, allowed, no_storages, error)  # system info: ints and strings
    pending: dict = {}

    def storages(args):
        if len(args) != 5:
            raise error(f"a legacy storage id has {len(args)} fields, expected 5")
        st, key, location, numel, view = args
        if view is not None:
            raise error("legacy storage views are not supported")
        key = _decode(key)
        if key not in pending:
            pending[key] = _Storage(b"", _storage_type(st, error), _decode(location), False)
        return pending[key]

    # Storages are filled in after the object is unpickled, so tensors are
    # built afterwards too: rebuild calls are recorded, then replayed.
    deferred = _Deferred(builder, allowed)
    result = _unpickle(fh, deferred.allowed, storages, error, open_globals)
    keys = _unpickle(fh, allowed, no_storages, error)
    for key in keys:
        key = _decode(key)
        if key not in pending:
            raise error(f"storage key {key!r} is not used by the object")
        s = pending[key]
        head = fh.read(8)
        if len(head) != 8:
            raise error("the file is truncated (a storage's size is missing)")
        n = int.from_bytes(head, "little")
        item = np.dtype(_RAW[s.dtype]).itemsize
        s.data = fh.read(n * item)
        if len(s.data) != n * item:
            raise error(f"the file is truncated (storage {key} needs {n * item} bytes)")
    return deferred.resolve(result)


class _Deferred:
    """Records tensor rebuilds during a legacy unpickle (storage bytes come
    later in the stream) and replaces the placeholders afterwards."""

    class Pending:
        def __init__(self, fn, args):
            self.fn, self.args = fn, args

    def __init__(self, builder, allowed):
        self.allowed = dict(allowed)
        self.real: dict = {}     # id(deferring stand-in) -> the rebuild function
        for key in (("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_tensor_v2"),
                    ("torch._utils", "_rebuild_tensor_v3"),
                    ("torch._utils", "_rebuild_parameter"),
                    ("torch._utils", "_rebuild_parameter_with_state"),
                    ("torch._tensor", "_rebuild_from_type_v2")):
            fn = allowed[key]
            self.allowed[key] = (lambda f: lambda *a: _Deferred.Pending(f, a))(fn)
            self.real[id(self.allowed[key])] = fn
        self.done: dict = {}

    def resolve(self, obj, seen=None):
        """``obj`` with every placeholder replaced by its tensor: in dicts,
        lists, tuples (of any tuple type: ``torch.Size``, namedtuples keep
        theirs) and objects' attributes (a whole pickled Module)."""
        seen = set() if seen is None else seen
        if isinstance(obj, _Deferred.Pending):
            if id(obj) not in self.done:
                # (a rebuild passed as an argument, _rebuild_from_type_v2's
                # func, is called for real, not deferred again)
                self.done[id(obj)] = obj.fn(*(self.real.get(id(a), None) or self.resolve(a, seen)
                                              for a in obj.args))
            return self.done[id(obj)]
        if isinstance(obj, (Tensor, type, str, bytes, int, float, complex, type(None))):
            return obj
        if id(obj) in seen:
            return obj
        seen.add(id(obj))
        if isinstance(obj, dict):
            for k in list(obj):
                obj[k] = self.resolve(obj[k], seen)
        elif isinstance(obj, list):
            obj[:] = [self.resolve(x, seen) for x in obj]
        elif isinstance(obj, tuple):
            items = tuple(self.resolve(x, seen) for x in obj)
            if all(a is b for a, b in zip(items, obj)):
                return obj
            if type(obj) is tuple:
                return items
            return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        if isinstance(getattr(obj, "__dict__", None), dict) and \
                not isinstance(obj, types.ModuleType):
            attrs = obj.__dict__
            for k in list(attrs):
                attrs[k] = self.resolve(attrs[k], seen)
        return obj


def load_torch(fh, kind: str, error, finish, map_location=None, weights_only=True):
    """The object in a ``torch.save`` file or plain pickle ``fh`` (seekable,
    at offset 0).  ``kind`` is ``"zip"`` or ``"pickle"``; ``error(msg)``
    makes the exception to raise; ``finish(tensor, saved_location)``
    applies ``map_location``.  ``weights_only=False`` (the caller trusts
    the file) resolves every global the pickle names (``torch_names``: a
    whole ``nn.Module`` PyTorch saved loads as tracec's); otherwise only
    what ``torch.load(weights_only=True)`` accepts."""
    if kind == "zip":
        return _load_zip(fh, error, finish, map_location, not weights_only)
    return _load_stream(fh, error, finish, not weights_only)


class PyTorchFileReader:
    """``torch.PyTorchFileReader``: the records of a ``torch.save`` zip
    archive by name (the archive's top folder left out: ``"data.pkl"``,
    ``"data/0"``), as lazy loaders read them (Lightning's ``_lazy_load``)."""

    def __init__(self, file):
        self._zip = zipfile.ZipFile(file)
        names = self._zip.namelist()
        top = names[0].split("/", 1)[0] + "/" if names and "/" in names[0] else ""
        self._prefix = top if all(n.startswith(top) for n in names) else ""
        self._records = [n[len(self._prefix):] for n in names]

    def get_all_records(self) -> list:
        return list(self._records)

    def has_record(self, name: str) -> bool:
        return name in self._records

    def get_record(self, name: str) -> bytes:
        if name not in self._records:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found")
        return self._zip.read(self._prefix + name)

    def get_record_size(self, name: str) -> int:
        return len(self.get_record(name))

    def get_storage_from_record(self, name: str, numel: int, dtype) -> Tensor:
        """The record's first ``numel`` elements of ``dtype`` as a 1-D tensor."""
        from tracec import dtypes as dt
        d = dt.to_dtype(dtype)
        raw = self.get_record(name)
        if d is dt.bfloat16:        # held as float32 here: the high half of each
            arr = (np.frombuffer(raw, np.uint16, numel).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=d.np, count=numel).copy()
        return Tensor._make(arr, d)
