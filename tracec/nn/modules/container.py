"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``,
``ParameterList`` and ``ParameterDict``, with PyTorch's indexing rules.

Invariant: children are registered under the keys PyTorch uses ("0", "1",
... for the list-like containers, renumbered after a deletion), so state
dict keys match PyTorch's for the same architecture.
"""
from __future__ import annotations

import collections
import collections.abc

import itertools
import operator
from collections import OrderedDict

from tracec.mutation import WatchedOrderedDict
from itertools import islice
from typing import Any, Iterable, Iterator, Mapping

from tracec.nn.modules.module import Module, _addindent
from tracec.nn.parameter import Parameter
from tracec.tensor import Tensor

__all__ = ["Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict"]


def _index(n: int, idx) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class Container(Module):
    """PyTorch's deprecated ``nn.Container``: a Module holding the modules
    given as keyword arguments."""

    def __init__(self, **kwargs):
        super().__init__()
        import warnings
        warnings.warn("nn.Container is deprecated. All of it's functionality is now "
                      "implemented in nn.Module. Subclass that instead.", stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


class Sequential(Module):
    """Modules applied in order; built from modules or an ``OrderedDict``."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _item(self, iterator, idx):
        return next(islice(iterator, _index(len(self), idx), None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._item(self._modules.values(), idx)

    def __setitem__(self, idx, module: Module) -> None:
        key = self._item(self._modules.keys(), idx)
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._item(self._modules.keys(), idx))
        self._modules = WatchedOrderedDict(
            (str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        out = Sequential()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def __iadd__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        for m in list(other):
            self.append(m)
        return self

    def _factor(self, other) -> int:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        return other

    def __mul__(self, other: int) -> "Sequential":
        """A new Sequential of this one's modules ``other`` times over (the
        same module objects, as PyTorch repeats them)."""
        n = self._factor(other)
        out = Sequential()
        for _ in range(n):
            for m in self:
                out.add_module(str(len(out)), m)
        return out

    def __rmul__(self, other: int) -> "Sequential":
        return self.__mul__(other)

    def __imul__(self, other: int) -> "Sequential":
        n = self._factor(other)
        first = [self._modules[str(i)] for i in range(len(self))]
        for _ in range(n - 1):
            for m in first:
                self.add_module(str(len(self)), m)
        return self

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules = WatchedOrderedDict((str(i), m) for i, m in enumerate(mods))
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of registered submodules."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(len(self), idx))]

    def __setitem__(self, idx, module: Module) -> None:
        setattr(self, str(_index(len(self), idx)), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_index(len(self), idx)))
        self._modules = WatchedOrderedDict(
            (str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        out = ModuleList()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def insert(self, index: int, module: Module) -> None:
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if isinstance(modules, (Module, Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, m in enumerate(modules):
            self.add_module(str(offset + i), m)
        return self

    def __repr__(self) -> str:
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list[list] = []
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = []
        for a, b, r in blocks:
            s = f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}"
            lines.append(_addindent(s, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of registered submodules."""

    def __init__(self, modules: Mapping[str, Module] | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        if isinstance(modules, (OrderedDict, ModuleDict, Mapping)):
            for k, m in modules.items():
                self[k] = m
        else:
            for j, kv in enumerate(modules):
                if len(kv) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                     f"{len(kv)}; 2 is required")
                self[kv[0]] = kv[1]


def _params_repr(items, typename: bool = False) -> str:
    """PyTorch's lines: ParameterList names the dtype (``torch.float32``),
    ParameterDict the legacy type (``torch.FloatTensor``, ``typename``)."""
    lines = []
    for k, p in items:
        if isinstance(p, Tensor):
            kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
            lines.append(f"  ({k}): {kind} containing: [{p.type() if typename else p.dtype} "
                         f"of size {'x'.join(map(str, p.shape))}]")
        else:
            lines.append(f"  ({k}): Object of type: {type(p).__name__}")
    return "\n".join(lines)


def _as_param(value: Any) -> Any:
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of registered parameters (tensors are wrapped in Parameter)."""

    def __init__(self, values: Iterable[Any] | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(len(self), idx)))

    def __setitem__(self, idx: int, param: Any) -> None:
        setattr(self, str(_index(len(self), idx)), _as_param(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, params: Iterable[Any]) -> "ParameterList":
        return self.extend(params)

    def append(self, value: Any) -> "ParameterList":
        self._size += 1
        setattr(self, str(self._size - 1), _as_param(value))
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return _params_repr(enumerate(self))

    def __call__(self, *args, **kwargs):
        # (PyTorch's words; ModuleList / ModuleDict reach Module's refusal)
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of registered parameters."""

    def __init__(self, parameters: Any = None):
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        setattr(self, key, _as_param(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def extra_repr(self) -> str:
        return _params_repr(self.items(), typename=True)

    def update(self, parameters) -> None:
        """As PyTorch: an ``OrderedDict`` or ``ParameterDict`` in its order,
        any other mapping (a plain dict too) in sorted key order, an
        iterable of pairs in its order (the order of ``named_parameters``
        and of the state dict's keys)."""
        if isinstance(parameters, (collections.OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif isinstance(parameters, collections.abc.Mapping):
            items = sorted(parameters.items())
        else:
            items = parameters
        for k, v in items:
            self[k] = v

    def __call__(self, input):  # noqa: A002 - PyTorch's signature
        raise RuntimeError("ParameterDict should not be called.")
