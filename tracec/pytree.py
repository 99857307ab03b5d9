"""Tensors inside the arguments of a compiled call: containers as trees.

A compiled function's arguments may hold tensors in tuples, lists, dicts,
namedtuples and dataclasses, nested (an RNN's ``hidden=(h, c)``).  This
module flattens such an argument list into

  * its *leaves*: ``(path, tensor)`` for every tensor, where a path is the
    argument's position (an int) or keyword (a str) followed by
    ``("i", index)``, ``("k", key)`` or ``("a", field)`` steps; and
  * its *spec*: a hashable description of everything else (container kinds
    and lengths, dict keys, dataclass fields, Python numbers and strings,
    NumPy arrays' shapes, dtypes and contents, the identity of other
    objects), which the compiler keys traces on.

Plain objects of the user's classes (the Annotated Transformer's
``Batch(src, tgt)``, an ``argparse.Namespace``) are flattened like
dataclasses, through their ``__dict__``, when small (``PLAIN_BUDGET``
nodes) and holding no tracec object but tensors (an agent holding its
network and optimizer stays keyed by identity: the numbers that change in
it are lifted by ``tracec.lifted_state``): a new such object at every call
with tensors of the same shapes reuses the trace.  A class whose instance a traced call changed
(``self.n += 1``, ``batch.h = h``) is keyed by identity from then on
(``KEYED_BY_IDENTITY``), where ``tracec.guards`` and ``tracec.lifted_state``
follow the changes; so are tracec's, NumPy's and the standard library's
classes, and objects past the budget (a replay buffer's list).

Invariant: two argument lists with equal specs and tensors of equal
shape/dtype/requires_grad at the same paths are traced identically, and
``resolve(path, args, kwargs)`` finds, in a later call, the tensor that
took the traced tensor's place.  Written by hand: JAX's and PyTorch's
pytree utilities are not dependencies of tracec, and this one also keys on
scalar values and object identities, which theirs leave to the caller.
"""
from __future__ import annotations

import dataclasses
import hashlib
import sys
import types

import numpy as np

from tracec import dtypes as dt
from tracec.arg_arrays import LIFTED_DTYPES
from tracec.tensor import Tensor

__all__ = ["flatten_args", "flatten", "plain_class", "resolve", "path_name", "is_dataclass_instance",
           "plain_classes", "KEYED_BY_IDENTITY"]

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
#: Nodes (objects, containers, tensors, numbers) a plain object may hold,
#: nested objects included, to be flattened rather than keyed by identity.
PLAIN_BUDGET = 64
#: Classes whose instances are keyed by identity although plain: a traced
#: call changed one (``tracing.record``).
KEYED_BY_IDENTITY: set = set()
#: Standard-library data holders that are flattened all the same.
_PLAIN_STDLIB = {types.SimpleNamespace}
try:
    import argparse
    _PLAIN_STDLIB.add(argparse.Namespace)
except ImportError:  # pragma: no cover
    pass
# (under ``tracec run`` tracec's public classes carry PyTorch's module names)
_NOT_PLAIN_TOP = frozenset(sys.stdlib_module_names) | {"tracec", "torch", "torchvision", "numpy",
                                                        "builtins"}
_plain_class_cache: dict = {}
_tracec_cache: dict = {}


def is_dataclass_instance(x) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def _dataclass_fields(x):
    return tuple(f.name for f in dataclasses.fields(x))


def flatten(x, path: tuple, leaves: list, others: list | None = None):
    """The spec of ``x``; appends ``(path, tensor)`` for each tensor in it
    and, if ``others`` is given, ``(path, object)`` for each object keyed by
    identity."""
    if isinstance(x, Tensor):
        leaves.append((path, x))
        return "T"
    tx = type(x)
    if x is None or tx in _SCALARS:
        return ("V", tx.__name__, x)
    if isinstance(x, tuple):
        if hasattr(x, "_fields"):   # a namedtuple: its class and fields
            return ("N", tx, tuple(flatten(v, path + (("i", i),), leaves, others)
                                   for i, v in enumerate(x)))
        return ("t" if tx is tuple else ("t", tx),
                tuple(flatten(v, path + (("i", i),), leaves, others) for i, v in enumerate(x)))
    if isinstance(x, list):
        return ("l" if tx is list else ("l", tx),
                tuple(flatten(v, path + (("i", i),), leaves, others) for i, v in enumerate(x)))
    if isinstance(x, dict):
        try:
            hash(tuple(x))
        except TypeError:
            return ("O", tx.__name__, id(x))
        return ("d", tx, tuple((k, flatten(v, path + (("k", k),), leaves, others))
                               for k, v in x.items()))
    if getattr(tx, "__tracec_flatten__", None) is not None:
        # a wrapper tensor (tracec.nested's NestedTensor): its tensors, as
        # items ``x[i]``, and the hashable rest of its structure
        children, aux = x.__tracec_flatten__()
        return ("W", tx, aux, tuple(flatten(c, path + (("i", i),), leaves, others)
                                    for i, c in enumerate(children)))
    if is_dataclass_instance(x):
        names = _dataclass_fields(x)
        return ("D", tx, names, tuple(flatten(getattr(x, n), path + (("a", n),), leaves, others)
                                      for n in names))
    if isinstance(x, (np.number, np.bool_)):
        return ("V", tx.__name__, x.item())
    if tx is np.ndarray and x.dtype.kind in "biufc":
        # A NumPy array argument (an observation, a mask): not keyed by
        # identity.  By shape and dtype where the trace reads it as an
        # input (tracec.arg_arrays: ``record`` finds it among ``others``),
        # so a fresh array each call reuses the trace; by contents too for
        # a function whose trace read one otherwise (``ARRAY_CONTENT``) and
        # for other dtypes, so an array whose values changed (in place,
        # past guards' small-array limit too) retraces instead of reusing
        # the values the trace read.
        if not ARRAY_CONTENT[0] and x.dtype in LIFTED_DTYPES:
            if others is not None:
                others.append((path, x))
            return ("A", x.shape, x.dtype.str)
        return ("A", x.shape, x.dtype.str, "contents", array_digest(x))
    if _plain_class(tx) and _fits(x, [PLAIN_BUDGET], 3):
        d = x.__dict__
        names = tuple(d)
        return ("P", tx, names, tuple(flatten(d[n], path + (("a", n),), leaves, others)
                                      for n in names))
    # Anything else (a module, an optimizer, a generator, a plain object) is
    # keyed by identity; what the function reads from it is guarded
    # separately (tracec.guards).
    if others is not None:
        others.append((path, x))
    return ("O", tx.__name__, id(x))


#: ``[bool]``: the compiled function being called keys NumPy array
#: arguments by contents (its trace read one by other means than a tensor
#: conversion: ``tracec.arg_arrays``); set by ``CompiledFunction.__call__``
ARRAY_CONTENT = [False]
#: the last step of the path of a NumPy array argument read as an input:
#: ``resolve`` gives a tensor sharing its memory
ARRAY_STEP = ("np", None)


def array_tensor(a: np.ndarray) -> Tensor:
    """A tensor of ``a``'s values (sharing its memory where it is
    contiguous): a NumPy array argument as the compiled code reads it."""
    a = np.ascontiguousarray(a)
    if not a.flags.writeable:
        a = a.copy()
    return Tensor._make(a, dt.from_numpy_dtype(a.dtype))


def array_digest(x: np.ndarray) -> bytes:
    """A digest of an array's contents (in C order)."""
    return hashlib.blake2b(np.ascontiguousarray(x).data if x.size else b"",
                           digest_size=16).digest()


def _plain_class(tx) -> bool:
    """Instances of ``tx`` may be flattened: a user's class (not tracec's,
    NumPy's or the standard library's, nor derived from them; modules,
    optimizers and data sets keep their identity) with a ``__dict__``."""
    if tx in KEYED_BY_IDENTITY:
        return False
    ok = _plain_class_cache.get(tx)
    if ok is None:
        mro = [c for c in tx.__mro__ if c is not object]
        ok = tx in _PLAIN_STDLIB or (bool(mro) and all(
            (getattr(c, "__module__", None) or "builtins").split(".")[0] not in _NOT_PLAIN_TOP
            for c in mro))
        _plain_class_cache[tx] = ok
    return ok


#: (public: a compiled call's returned plain objects are rebuilt by the same rule)
plain_class = _plain_class


def _fits(x, budget: list, depth: int) -> bool:
    """``x`` (a plain object) holds at most ``budget[0]`` nodes, nested at
    most ``depth`` plain objects deep (no cycles)."""
    budget[0] -= 1
    if budget[0] < 0 or depth <= 0:
        return False
    d = getattr(x, "__dict__", None)
    if type(d) is not dict:
        return False
    for v in d.values():
        if not _fits_value(v, budget, depth):
            return False
    return True


def _fits_value(v, budget: list, depth: int) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    tv = type(v)
    if isinstance(v, (list, tuple)):
        if len(v) > budget[0]:
            return False
        return all(_fits_value(e, budget, depth) for e in v)
    if isinstance(v, dict):
        if len(v) > budget[0]:
            return False
        return all(_fits_value(e, budget, depth) for e in v.values())
    if _plain_class(tv):
        return _fits(v, budget, depth - 1)
    # An object holding a module, an optimizer, a data set... owns state
    # the calls share (``self`` of an agent or a trainer): its identity
    # keys it, and guards lift the numbers that change in it (an epsilon,
    # a step count), which flattening would key by value.
    return isinstance(v, Tensor) or not _tracec_class(tv)


def _tracec_class(tx) -> bool:
    ok = _tracec_cache.get(tx)
    if ok is None:
        ok = _tracec_cache[tx] = any((getattr(c, "__module__", None) or "").startswith(
            ("tracec.", "torch.", "torchvision.")) for c in tx.__mro__)
    return ok


def plain_classes(spec) -> set:
    """The classes of the plain objects flattened into ``spec``."""
    out: set = set()

    def walk(s):
        if type(s) is tuple:
            if len(s) == 4 and s[0] == "P":
                out.add(s[1])
            for e in s:
                if type(e) is tuple:
                    walk(e)
    walk(spec)
    return out


def flatten_args(args: tuple, kwargs: dict, others: list | None = None):
    """``(spec, leaves)`` of a call's arguments (see the module docstring)."""
    leaves: list = []
    if not kwargs and others is None and all(type(a) is Tensor for a in args):
        # The common case, kept cheap: a call with tensors only.
        for i, a in enumerate(args):
            leaves.append(((i,), a))
        return (("T",) * len(args), ()), leaves
    spec = (tuple(flatten(a, (i,), leaves, others) for i, a in enumerate(args)),
            tuple((k, flatten(v, (k,), leaves, others)) for k, v in sorted(kwargs.items())))
    return spec, leaves


def resolve(path, args, kwargs):
    """The object at ``path`` (an int, a str, or a path tuple) in a call's
    arguments."""
    if not isinstance(path, tuple):
        return args[path] if isinstance(path, int) else kwargs[path]
    head = path[0]
    x = args[head] if isinstance(head, int) else kwargs[head]
    for kind, k in path[1:]:
        x = getattr(x, k) if kind == "a" else array_tensor(x) if kind == "np" else x[k]
    return x


def path_name(path, arg_names=None) -> str:
    """A readable name: ``hidden[0]``, ``batch['x']``, ``state.h``."""
    if not isinstance(path, tuple):
        path = (path,)
    head = path[0]
    s = (arg_names[head] if arg_names is not None and isinstance(head, int)
         and head < len(arg_names) else (f"arg{head}" if isinstance(head, int) else head))
    for kind, k in path[1:]:
        if kind != "np":
            s += f".{k}" if kind == "a" else f"[{k!r}]"
    return s
