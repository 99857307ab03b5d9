"""The names PyTorch's pickles give tracec's public classes and functions,
both ways: what ``torch.save(model, f)`` writes for ``nn.Linear``
(``torch.nn.modules.linear.Linear``), ``F.relu``
(``torch.nn.functional.relu``) or ``torch.relu``
(``getattr(torch._C._VariableFunctionsClass, "relu")``), and which object
of this process such a name stands for when a PyTorch pickle is loaded
with ``weights_only=False``.

The table (``tracec/data/torch_names.json``) is written by
``scripts/torch_names.py`` from the pinned torch and torchvision: key
``"<tracec module>:<qualname>"``, value ``[module, qualname]`` (one pickle
GLOBAL) or ``[module, qualname, attribute]`` (a builtin PyTorch pickles as
``getattr(module.qualname, attribute)``).  An object missing from it has
no PyTorch name (``torch_name`` returns None).
"""
from __future__ import annotations

import functools
import importlib
import json
import os

__all__ = ["torch_name", "resolve", "key"]

_DATA = os.path.join(os.path.dirname(__file__), "data", "torch_names.json")

#: PyTorch's C namespaces (the owners of its builtins) -> tracec's module
_C_SPACES = {
    ("torch._C", "_VariableFunctionsClass"): "tracec",
    ("torch._C", "_VariableFunctions"): "tracec",
    ("torch._C", "_nn"): "tracec.nn.functional",
    ("torch._C", "_linalg"): "tracec.linalg",
    ("torch._C", "_special"): "tracec.special",
    ("torch._C", "_fft"): "tracec.fft",
    ("torch._C", "_TensorBase"): "tracec.tensor:Tensor",
    ("torch", "Tensor"): "tracec.tensor:Tensor",
}

#: aliased top-level packages -> tracec's package standing in for them (as
#: ``as_torch._ALIASES``, which sits in a layer above this one)
_TOPS = {"torch": "tracec", "torchvision": "tracec.vision"}


@functools.cache
def _table() -> dict:
    with open(_DATA) as f:
        return json.load(f)


@functools.cache
def _reverse() -> dict:
    """``(module, qualname)`` of a PyTorch GLOBAL -> tracec's ``module:qualname``."""
    out: dict = {}
    for key, name in _table().items():
        if len(name) == 2:
            out.setdefault((name[0], name[1]), key)
    return out


def torch_name(obj) -> list | None:
    """How PyTorch's pickle names ``obj`` (a tracec class or function), or
    None when PyTorch has no such public name.  A class that
    ``install_as_torch`` renamed (``torch.Tensor``) already carries its
    PyTorch name, which is the answer when it stands for ``obj``."""
    k = key(obj) or ""
    name = _table().get(k)
    if name is None and k:
        module, _, qualname = k.partition(":")
        target = _reverse().get((module, qualname))
        if target is not None and _load(target) is obj:
            return [module, qualname]
    return name


def key(obj) -> str | None:
    """``obj``'s key in the table: ``"<module>:<qualname>"`` of the function
    itself, not of the dispatching wrapper a Tensor subclass installs in
    its place (``subclass_dispatch``: named after its public location)."""
    obj = getattr(obj, "__tracec_unwrapped__", obj)
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    return f"{module}:{qualname}"


def _attribute(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _load(target: str):
    module, _, qualname = target.partition(":")
    obj = importlib.import_module(module)
    return _attribute(obj, qualname) if qualname else obj


def resolve(module: str, name: str):
    """The object a PyTorch pickle's global ``module.name`` stands for in
    this process: tracec's counterpart for ``torch.*`` / ``torchvision.*``
    (from the table, else the same path under tracec, else the nearest
    enclosing package that has ``name``); anything else imported as named.
    Raises ``AttributeError`` / ``ImportError`` naming the global."""
    target = _reverse().get((module, name)) or _C_SPACES.get((module, name))
    if target is not None:
        return _load(target)
    top = module.partition(".")[0]
    if top not in _TOPS:
        return _attribute(importlib.import_module(module), name)
    path = _TOPS[top] + module[len(top):]
    while True:
        try:
            return _attribute(importlib.import_module(path), name)
        except (ImportError, AttributeError):
            if path == _TOPS[top]:
                break
            path = path.rpartition(".")[0]
    raise AttributeError(f"{module}.{name}: tracec has no counterpart of this PyTorch name")
