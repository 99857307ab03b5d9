"""``torch.ops.aten``: PyTorch's ATen operators by name, each overload a
callable that runs tracec's implementation of the op.

Libraries key tables by these objects (PyG's ``Index`` registers handlers
with ``@implements(aten.sort.default)`` at import) and call them directly
(``aten.mm.default(a, b)``, ``aten.slice.Tensor(x, 0, 1, 5)``).  The names,
overload names and positional argument names come from the schemas of the
pinned torch (``tracec/data/aten_ops.json``, written by
``scripts/aten_names.py``; a test keeps it equal), loaded on first use.

Invariants: ``aten.<name>`` and ``aten.<name>.<overload>`` exist exactly
when PyTorch's schemas list them, and are the same object on every access
(hashable, usable as keys).  A call runs the one tracec definition of the op
(``_resolve``: an adapter of ``_ADAPTERS`` where ATen's signature differs
from the public function's, else the ``torch``/``Tensor``/``F`` function of
the same name); an op with none raises ``NotImplementedError`` naming
``aten::name.overload``; nothing here computes.
"""
from __future__ import annotations

import json
import os

from tracec.library import OpOverload, OpOverloadPacket
from tracec.ops.namespaces import NAMESPACES

__all__ = ["AtenNamespace", "AtenOverload", "AtenPacket", "register"]

_TABLE: dict = {}


def _table() -> dict:
    if not _TABLE:
        here = os.path.join(os.path.dirname(__file__), "data", "aten_ops.json")
        with open(here) as f:
            _TABLE.update(json.load(f))
    return _TABLE


def _index(x, indices):
    return x[tuple(slice(None) if i is None else i for i in indices)]


def _slice(x, dim=0, start=None, end=None, step=1):
    key = [slice(None)] * x.dim()
    key[dim] = slice(start, end, step)
    return x[tuple(key)]


def _to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None,
             non_blocking=False, memory_format=None):
    kw = {} if memory_format is None else {"memory_format": memory_format}
    return x.to(device=device, dtype=dtype or x.dtype, copy=True, non_blocking=non_blocking, **kw)


def _convolution(input, weight, bias, stride, padding, dilation, transposed,  # noqa: A002
                 output_padding, groups, *rest):
    from tracec.nn import functional as F
    nd = weight.dim() - 2
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    return fn(input, weight, bias, stride, padding, dilation, groups)


def _native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    import tracec
    from tracec.nn import functional as F
    dims = tuple(range(input.dim() - len(normalized_shape), input.dim()))
    mean = input.mean(dims, keepdim=True)
    rstd = tracec.rsqrt(input.var(dims, unbiased=False, keepdim=True) + eps)
    return F.layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd


def _method(name):
    return lambda self, *args, **kwargs: getattr(self, name)(*args, **kwargs)


#: ATen ops whose signature or result differs from the public function of
#: that name (or that have none): what the op is in terms of public ones.
_ADAPTERS = {
    "index": _index,
    "slice": _slice,
    "_to_copy": _to_copy,
    "alias": lambda x: x.view(x.shape),
    "_unsafe_view": _method("view"),
    "convolution": _convolution,
    "native_layer_norm": _native_layer_norm,
    "sym_size": lambda x, dim=None: x.size() if dim is None else x.size(dim),
    "sym_stride": lambda x, dim=None: x.stride() if dim is None else x.stride(dim),
    "sym_numel": lambda x: x.numel(),
    "copy_": lambda self, src, non_blocking=False: self.copy_(src, non_blocking),
    "lift_fresh": lambda x: x,
    "detach": _method("detach"),
}


def _resolve(name: str):
    """The callable that runs ATen op ``name`` (see the module docstring), or None."""
    fn = _ADAPTERS.get(name)
    if fn is not None:
        return fn
    import tracec
    from tracec import fft, linalg, special
    from tracec.nn import functional as F
    if name.endswith("_") and not name.endswith("__"):
        return _method(name) if callable(getattr(tracec.Tensor, name, None)) else None
    for prefix, mod in (("linalg_", linalg), ("special_", special), ("fft_", fft)):
        if name.startswith(prefix) and callable(getattr(mod, name[len(prefix):], None)):
            return getattr(mod, name[len(prefix):])
    for mod in (tracec, F):
        fn = getattr(mod, name, None)
        if callable(fn) and not isinstance(fn, type):
            return fn
    if callable(getattr(tracec.Tensor, name, None)):
        return _method(name)
    return None


class AtenOverload(OpOverload):
    """``torch.ops.aten.<name>.<overload>``."""

    def __init__(self, packet: "AtenPacket", overload: str):
        self.overloadpacket = packet
        self._overloadname = overload
        self.__name__ = f"{packet._name}.{overload}"
        self.__qualname__ = self.name()
        self.namespace = "aten"

    @property
    def op(self):
        return self.overloadpacket

    def name(self) -> str:
        return f"aten::{self.overloadpacket._name}.{self._overloadname}"

    @property
    def _schema(self):
        args = _table()[self.overloadpacket._name][self._overloadname]
        return f"{self.name()}({', '.join(args)})"

    def __call__(self, *args, **kwargs):
        return self.overloadpacket._call(self.name(), args, kwargs)

    def __str__(self) -> str:
        return f"aten.{self.__name__}"

    def __repr__(self) -> str:
        return f"<OpOverload(op='aten.{self.overloadpacket._name}', overload='{self._overloadname}')>"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


class AtenPacket(OpOverloadPacket):
    """``torch.ops.aten.<name>``: its overloads as attributes, callable."""

    def __init__(self, name: str):
        self._name = name
        self.__name__ = name
        self._qualified_op_name = f"aten::{name}"
        self._overloads: dict = {}
        self._fn = None

    def overloads(self) -> list:
        return list(_table()[self._name])

    def __getattr__(self, overload: str):
        if overload.startswith("__") or overload not in _table().get(self.__dict__["_name"], ()):
            if overload.startswith("__"):
                raise AttributeError(overload)
            raise AttributeError(f"The underlying op of 'aten.{self._name}' has no overload "
                                 f"name '{overload}'")
        ov = self._overloads.get(overload)
        if ov is None:
            ov = self._overloads[overload] = AtenOverload(self, overload)
        self.__dict__[overload] = ov
        return ov

    @property
    def op(self):
        return self

    def _call(self, what: str, args, kwargs):
        if self._fn is None:
            self._fn = _resolve(self._name)
            if self._fn is None:
                raise NotImplementedError(f"tracec does not implement the ATen operator {what} "
                                          f"(torch.ops.aten.{self._name})")
        return self._fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._call(f"aten::{self._name}", args, kwargs)

    def __str__(self) -> str:
        return f"aten.{self._name}"

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='aten.{self._name}')>"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


class AtenNamespace:
    """``torch.ops.aten``: a packet per ATen operator name, made on first use."""

    name = "aten"

    def __init__(self):
        self._packets: dict = {}

    def __getattr__(self, name: str):
        if name.startswith("__") or name not in _table():
            if name.startswith("__"):
                raise AttributeError(name)
            raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
        p = self._packets.get(name)
        if p is None:
            p = self._packets[name] = AtenPacket(name)
        self.__dict__[name] = p
        return p

    def __dir__(self):
        return sorted(_table())

    def __repr__(self) -> str:
        return "<module 'torch.ops.aten' from 'torch.ops'>"


def register() -> None:
    """Make ``tracec.ops.aten`` (``torch.ops.aten``) this namespace."""
    NAMESPACES.setdefault("aten", AtenNamespace())
