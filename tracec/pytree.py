"""Tensors inside the arguments of a compiled call: containers as trees.

A compiled function's arguments may hold tensors in tuples, lists, dicts,
namedtuples and dataclasses, nested (an RNN's ``hidden=(h, c)``).  This
module flattens such an argument list into

  * its *leaves*: ``(path, tensor)`` for every tensor, where a path is the
    argument's position (an int) or keyword (a str) followed by
    ``("i", index)``, ``("k", key)`` or ``("a", field)`` steps; and
  * its *spec*: a hashable description of everything else (container kinds
    and lengths, dict keys, dataclass fields, Python numbers and strings,
    the identity of other objects), which the compiler keys traces on.

Invariant: two argument lists with equal specs and tensors of equal
shape/dtype/requires_grad at the same paths are traced identically, and
``resolve(path, args, kwargs)`` finds, in a later call, the tensor that
took the traced tensor's place.  Written by hand: JAX's and PyTorch's
pytree utilities are not dependencies of tracec, and this one also keys on
scalar values and object identities, which theirs leave to the caller.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tracec.tensor import Tensor

__all__ = ["flatten_args", "flatten", "resolve", "path_name", "is_dataclass_instance"]

_SCALARS = (bool, int, float, complex, str, bytes, type(None))


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
    if is_dataclass_instance(x):
        names = _dataclass_fields(x)
        return ("D", tx, names, tuple(flatten(getattr(x, n), path + (("a", n),), leaves, others)
                                      for n in names))
    if isinstance(x, (np.number, np.bool_)):
        return ("V", tx.__name__, x.item())
    # Anything else (a module, an optimizer, a generator, a plain object) is
    # keyed by identity; what the function reads from it is guarded
    # separately (tracec.guards).
    if others is not None:
        others.append((path, x))
    return ("O", tx.__name__, id(x))


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
        x = getattr(x, k) if kind == "a" else x[k]
    return x


def path_name(path, arg_names=None) -> str:
    """A readable name: ``hidden[0]``, ``batch['x']``, ``state.h``."""
    if not isinstance(path, tuple):
        path = (path,)
    head = path[0]
    s = (arg_names[head] if arg_names is not None and isinstance(head, int)
         and head < len(arg_names) else (f"arg{head}" if isinstance(head, int) else head))
    for kind, k in path[1:]:
        s += f".{k}" if kind == "a" else f"[{k!r}]"
    return s
