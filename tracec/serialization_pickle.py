"""Whole objects in a ``tracec.save`` file: what PyTorch users save with
``torch.save(model, f)`` and load with ``torch.load(f, weights_only=False)``.

``tracec.save`` stores tensors, containers and plain values as structure
(``tracec.serialization``); another object (a whole ``nn.Module``, an
optimizer, a user's class) is pickled, with every tensor and NumPy array
it reaches taken out of the pickle (``persistent_id``) and stored as the
file's other tensors are: as safetensors entries under the CRC, shared
tensors once (tied weights stay tied).  The pickle itself is one uint8
entry.

Loading such an object imports and runs code named in the file (its
classes' constructors and ``__setstate__``), so ``tracec.load`` does it
only with ``weights_only=False``, the opt-in PyTorch asks for too; with
the default it raises, naming the object and that option, before any of
the pickle is read.  Nothing else in a file ever runs code.
"""
from __future__ import annotations

import collections
import importlib
import io
import json
import pickle
import types

import numpy as np

from tracec import mutation
from tracec.tensor import Tensor
from tracec.torch_function_switch import public_of, unwrapped

__all__ = ["dumps", "loads"]


class _Pickler(pickle.Pickler):
    def __init__(self, fh, to_node, user=None):
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._to_node = to_node
        self._ids: dict = {}
        self._keep: list = []      # stable ids while pickling
        #: the caller's pickle module's pickler (``torch_save.user_pickler``)
        self._user = user
        if user is not None and getattr(user, "dispatch_table", None) is not None:
            self.dispatch_table = user.dispatch_table

    def reducer_override(self, obj):
        # A function whose name a __torch_function__ wrapper now holds
        # (tracec.subclass_dispatch; an fx graph's call targets): saved as
        # that name, loaded as the implementation behind it again.
        if type(obj) is types.FunctionType:
            public = public_of(obj)
            if public is not None:
                return unwrapped, (public,)
        if self._user is not None and not isinstance(obj, (Tensor, np.ndarray)):
            return self._user.reducer_override(obj)
        return NotImplemented

    def persistent_id(self, obj):
        if isinstance(obj, (Tensor, np.ndarray)):
            pid = self._ids.get(id(obj))
            if pid is None:
                self._keep.append(obj)
                # JSON text: the node the structure decoder reads back.
                pid = self._ids[id(obj)] = json.dumps(self._to_node(obj))
            return pid
        return None


_TORCH_NAMED = {("torch", "Tensor"), ("torch", "Size"), ("torch", "dtype"), ("torch", "device"),
                ("torch.nn.parameter", "Parameter"), ("torch.nn.parameter", "Buffer")}


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh, from_node, allowed=None):
        super().__init__(fh)
        self._from_node = from_node
        #: None: any name (``weights_only=False``); else ``{(module, name): obj}``
        self._allowed = allowed

    def persistent_load(self, pid):
        return self._from_node(json.loads(pid))

    def find_class(self, module, name):
        if self._allowed is not None:
            obj = self._allowed.get((module, name)) or _CONTAINERS.get((module, name))
            if obj is None:
                raise _Refused(_torch_spelling(module, name))
            return obj
        # Under ``tracec run`` these classes carry PyTorch's names
        # (``tracec.as_torch``); they are tracec's own wherever it loads.
        if (module, name) in _TORCH_NAMED:
            module = "tracec" + module[len("torch"):]
        return super().find_class(module, name)


#: Allowed under ``weights_only`` besides the user's safe globals: the
#: containers PyTorch's weights-only unpickler allows by default, and
#: tracec's watched ones standing for the plain dicts and OrderedDicts
#: PyTorch's objects hold (a module's ``_parameters``, its hooks): the user
#: who allows a module class allows what its ``__dict__`` holds, as in PyTorch
_CONTAINERS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    **{("tracec.mutation", c.__qualname__): c
       for c in (mutation.WatchedList, mutation.WatchedDict, mutation.WatchedOrderedDict,
                 mutation.WatchedHookDict)},
}


class _Refused(pickle.UnpicklingError):
    """A weights-only load met a name outside the safe globals."""


def _torch_spelling(module: str, name: str) -> str:
    """How PyTorch's refusal names the global ``module.name``: a tracec
    class or function by the name ``torch.save`` would have pickled
    (``torch.nn.modules.loss.CrossEntropyLoss``), else as the file does.
    Only tracec's own modules are imported to find out."""
    if module.partition(".")[0] == "tracec":
        from tracec import torch_names
        try:
            obj = importlib.import_module(module)
            for part in name.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            return f"{module}.{name}"
        pickled = torch_names.torch_name(obj)
        if pickled is not None and len(pickled) == 2:
            return ".".join(pickled)
    return f"{module}.{name}"


def dumps(obj, to_node, user=None) -> bytes:
    """The pickle of ``obj``, its tensors and arrays replaced by the
    structure nodes ``to_node(x)`` returns for them (registered in the
    file's tensor table); ``user``: a pickler whose ``reducer_override``
    is consulted too (``torch_save.user_pickler``: ``torch.save``'s
    ``pickle_module``)."""
    fh = io.BytesIO()
    _Pickler(fh, to_node, user).dump(obj)
    return fh.getvalue()


def loads(data: bytes, from_node, allowed: dict | None = None):
    """The object pickled by ``dumps``, its tensors made by ``from_node``
    (one object per node: shared tensors stay shared).  Runs the code the
    pickle names: only for ``weights_only=False``, or (``allowed``) the
    classes and functions the user vouched for (``add_safe_globals``);
    another name raises ``_Refused`` naming it."""
    return _Unpickler(io.BytesIO(data), from_node, allowed).load()
