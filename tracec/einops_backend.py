"""einops on tracec tensors with a plain ``import tracec as torch``.

einops picks a backend for a tensor by walking the subclasses of
``einops._backends.AbstractBackend`` whose ``framework_name`` names a module
in ``sys.modules``.  Its own ``TorchBackend`` (``framework_name = "torch"``)
recognises ``torch.Tensor`` only, so a program that imports tracec under its
own name (``import tracec as torch``) gets "Tensor type unknown to einops".
Under ``tracec run`` / ``tracec.install_as_torch()`` ``torch`` *is* tracec
and einops' TorchBackend already serves tracec tensors.

``TracecBackend`` below is einops' ``TorchBackend`` with the framework
``tracec``: the same methods (``permute``, ``amin``/``amax``, ``expand``,
``repeat``, ``torch.einsum``, ...) on ``tracec`` instead of ``torch``, so
einops does on tracec exactly what it does on torch, eagerly and inside
``tracec.compile``, gradients included.  Only ``__init__`` differs: it
neither imports torch nor einops' torch.compile registrations
(``einops._torch_specific``, which import torch).

Registration must not import einops when tracec is imported (einops costs
import time and may not be installed), yet the class must exist before
einops looks for a backend.  So ``tracec/__init__`` calls
:func:`register`: if ``einops._backends`` is already imported, the class is
defined at once; otherwise a one-shot finder is put on ``sys.meta_path``
that, when ``einops._backends`` is imported, lets the ordinary finders find
and load it and defines the class right after the module has run (before
the rest of einops' ``__init__`` goes on), then removes itself.  The finder
looks at one module name and otherwise answers ``None``, so it costs other
imports a string comparison.
"""
from __future__ import annotations

import importlib.abc
import sys

_BACKENDS = "einops._backends"
_registered = []   # the TracecBackend class, once defined


def _define(backends_module):
    """Defines ``TracecBackend`` as a subclass of einops' TorchBackend (once)."""
    if _registered:
        return _registered[0]

    class TracecBackend(backends_module.TorchBackend):
        framework_name = "tracec"

        def __init__(self):
            import tracec
            self.torch = tracec

    TracecBackend.__module__ = __name__
    TracecBackend.__qualname__ = "TracecBackend"
    _registered.append(TracecBackend)
    globals()["TracecBackend"] = TracecBackend
    return TracecBackend


class _Loader(importlib.abc.Loader):
    """Runs ``einops._backends`` with its own loader, then defines the backend."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # the module is einops' own: give it its own loader back
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _define(module)

    def __getattr__(self, name):   # get_source, get_resource_reader, ...
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Waits for ``einops._backends``'s import (one-shot, see the module doc)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _BACKENDS:
            return None
        _unhook()
        for finder in list(sys.meta_path):   # the other finders (this one is off now)
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


_FINDER = _Finder()


def _unhook():
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def register() -> None:
    """Make einops serve tracec tensors: now if ``einops`` is imported,
    otherwise when it is.  Idempotent; never imports einops itself."""
    if _registered:
        return
    module = sys.modules.get(_BACKENDS)
    if module is not None and hasattr(module, "TorchBackend"):
        _unhook()
        _define(module)
    elif _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)   # before the path finders that would load it
