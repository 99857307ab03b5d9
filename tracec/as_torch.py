"""``tracec.install_as_torch()``: make ``import torch`` (and every
``import torch.X.Y`` / ``from torch.X import Y``) resolve to tracec, and
``import torchvision`` (``torchvision.*``) to ``tracec.vision``, so that
an unmodified PyTorch script runs on tracec (``tracec run SCRIPT.py`` calls
it before running the script).

An import hook first in ``sys.meta_path`` claims the name ``torch`` and every
``torch.*``: ``torch.X.Y`` is the module ``tracec.X.Y`` itself (not a copy,
so ``torch.nn.Module is tracec.nn.Module``), and a ``torch.X`` that tracec
lacks raises ``ModuleNotFoundError`` naming it, never falling back to the
real torch.  Processes started with the ``spawn`` start method run the
install first (``_spawn_children_alias``), as forked ones inherit it;
under ``tracec run`` any other Python child does it at its first
``import torch`` (``children_import_tracec``, ``tracec.torch_shim``).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import sys

from tracec import dtypes as dt


class _AliasLoader(importlib.abc.Loader):
    """Loads ``torch.X`` as the already imported ``tracec.X``."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return self.target

    def exec_module(self, module):
        # module_from_spec replaced the module's __spec__ by the alias's:
        # give tracec.X its own back (nothing else was overwritten).
        module.__spec__ = self.original_spec

    def get_code(self, fullname):
        """``tracec.X``'s code: what ``python -m torch.X`` (runpy) runs as
        ``__main__`` (``tracec run -m torch.distributed.run``)."""
        return self.original_spec.loader.get_code(self.original_spec.name)

    def is_package(self, fullname):
        return hasattr(self.target, "__path__")


# aliased top-level name -> the tracec package standing in for it
_ALIASES = {"torch": "tracec", "torchvision": "tracec.vision"}


class _TorchAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``torch``/``torch.*`` to ``tracec``/``tracec.*`` and
    ``torchvision``/``torchvision.*`` to ``tracec.vision``/``tracec.vision.*``."""

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top not in _ALIASES:
            return None
        real = _ALIASES[top] + fullname[len(top):]
        try:
            if top == "torch" and (real + ".").startswith("tracec.vision."):
                # torchvision's stand-in is not a torch submodule
                raise ModuleNotFoundError(name=real)
            module = importlib.import_module(real)
        except ModuleNotFoundError as e:
            if e.name is not None and (e.name == real or real.startswith(e.name + ".")):
                raise ModuleNotFoundError(
                    f"No module named {fullname!r}: tracec (installed as {top} by "
                    f"tracec.install_as_torch) has no {real!r}", name=fullname) from None
            raise
        if _PENDING:
            _rename_table_classes()
        loader = _AliasLoader(module)
        loader.original_spec = module.__spec__
        spec = importlib.machinery.ModuleSpec(
            fullname, loader, origin=getattr(module.__spec__, "origin", None),
            is_package=hasattr(module, "__path__"))
        spec.has_location = getattr(module.__spec__, "has_location", False)
        return spec


class _AliasDistribution(importlib.metadata.Distribution):
    """The installed-package metadata of ``torch`` (``torchvision``) where
    no real distribution of it is installed: its version is the stand-in's
    ``__version__`` (libraries read ``importlib.metadata.version("torch")``
    at import time, accelerate among them)."""

    def __init__(self, name: str, version: str):
        self._text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"

    def read_text(self, filename):
        return self._text if filename in ("METADATA", "PKG-INFO") else None

    def locate_file(self, path):
        return path


def _find_distributions(context=importlib.metadata.DistributionFinder.Context()):
    """``importlib.metadata``'s hook: a real torch / torchvision distribution
    wins (the path finder finds it); else the stand-in's."""
    name = (context.name or "").lower()
    if name not in _ALIASES or not installed():
        return iter(())
    if next(iter(importlib.metadata.MetadataPathFinder.find_distributions(context)), None):
        return iter(())
    version = importlib.import_module(_ALIASES[name]).__version__
    return iter((_AliasDistribution(name, str(version)),))


_TorchAliasFinder.find_distributions = staticmethod(_find_distributions)
_FINDER = _TorchAliasFinder()


def _public_classes():
    """(class, PyTorch's module, PyTorch's name) of the classes PyTorch
    shows as ``torch.X``: ``print(type(x))`` is ``<class 'torch.Tensor'>``
    (and of the error ``torch.load`` refuses a pickle with)."""
    from tracec.device import device
    from tracec.nn.parameter import Buffer, Parameter
    from tracec.tensor import Size, Tensor
    from tracec.torch_checkpoint import WeightsOnlyError
    # (torch.load's weights-only refusal is a plain pickle.UnpicklingError:
    # `type(e).__name__` and tracebacks show _pickle.UnpicklingError)
    from tracec.autograd import Function
    from tracec.autograd.graph import Node
    return ((Function, "torch.autograd.function", "Function"),
            (Node, "torch.autograd.graph", "Node"),
            (Tensor, "torch", "Tensor"), (Size, "torch", "Size"), (dt.DType, "torch", "dtype"),
            (device, "torch", "device"), (Parameter, "torch.nn.parameter", "Parameter"),
            (Buffer, "torch.nn.parameter", "Buffer"),
            (WeightsOnlyError, "_pickle", "UnpicklingError"))


# class -> its own (__module__, __name__, __qualname__), while renamed
_RENAMED: dict = {}


def _return_types():
    """(class, "torch.return_types", its name) of ``torch.return_types``'
    named tuples (``type(torch.max(x, 0)).__module__``)."""
    from tracec import return_types
    return [(c, "torch.return_types", c.__name__) for c in vars(return_types).values()
            if isinstance(c, type) and c.__module__ == return_types.__name__
            and issubclass(c, tuple)]


def _rename_classes(install: bool) -> None:
    for cls, module, name in list(_public_classes()) + (_return_types() if install else []):
        if install and cls not in _RENAMED:
            _RENAMED[cls] = (cls.__module__, cls.__name__, cls.__qualname__)
            cls.__module__, cls.__name__, cls.__qualname__ = module, name, name
        elif not install and cls in _RENAMED:
            cls.__module__, cls.__name__, cls.__qualname__ = _RENAMED.pop(cls)
    _PENDING.clear()
    hooks = sys.modules["tracec"].LAZY_IMPORT_HOOKS
    if _rename_table_classes in hooks:
        hooks.remove(_rename_table_classes)
    if install:
        hooks.append(_rename_table_classes)
        from tracec import torch_names
        for key, name in torch_names._table().items():
            if len(name) == 2:
                module, _, qualname = key.partition(":")
                _PENDING.setdefault(module, []).append((qualname, name[0], name[1]))
        _rename_table_classes()
    else:
        for cls in list(_RENAMED):
            cls.__module__, cls.__name__, cls.__qualname__ = _RENAMED.pop(cls)


#: tracec module -> [(qualname, PyTorch's module, PyTorch's qualname)] of
#: the classes of ``torch_names``' table not renamed yet (while installed)
_PENDING: dict = {}


def _rename_table_classes() -> None:
    """Give the classes of the imported modules among ``_PENDING`` PyTorch's
    names (``type(nn.Linear(2, 2)).__module__`` is
    ``torch.nn.modules.linear``, ``torch.optim.Adam.__module__``
    ``torch.optim.adam``), as ``print(type(m))`` shows them under PyTorch.
    Only where that name, imported through the alias, is the class itself
    (so ``pickle`` finds it by that name); never an ``autograd.Function``
    (the tracer tells tracec's own by their module).  Modules imported
    later are renamed at the next ``import torch.X``."""
    from tracec.autograd import Function
    if _RENAMING:      # (an import _found_as makes comes back here)
        return
    _RENAMING.append(True)
    try:
        _rename_imported(Function)
    finally:
        _RENAMING.clear()


_RENAMING: list = []


def _rename_imported(Function) -> None:
    while True:
        ready = [m for m in _PENDING if m in sys.modules]
        if not ready:
            return
        _rename_modules(ready, Function)


def _rename_modules(ready: list, Function) -> None:
    for module in ready:
        for qualname, torch_module, torch_qualname in _PENDING.pop(module, ()):
            obj = sys.modules[module]
            try:
                for part in qualname.split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                continue
            if not isinstance(obj, type) or obj in _RENAMED or obj.__module__ != module or \
                    obj.__qualname__ != qualname or issubclass(obj, Function) or \
                    not _found_as(obj, torch_module, torch_qualname):
                continue
            _RENAMED[obj] = (obj.__module__, obj.__name__, obj.__qualname__)
            obj.__module__, obj.__qualname__ = torch_module, torch_qualname
            obj.__name__ = torch_qualname.rpartition(".")[2]


def _found_as(obj, module: str, qualname: str) -> bool:
    """Whether PyTorch's name ``module.qualname`` leads to ``obj`` here."""
    top = module.partition(".")[0]
    if top not in _ALIASES:
        return False
    try:
        found = importlib.import_module(_ALIASES[top] + module[len(top):])
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:     # (an import that fails: no such name here)
        return False
    return found is obj


#: what a ``spawn``ed child runs first (before unpickling its target or
#: importing the parent's ``__main__`` as ``__mp_main__``)
_SPAWN_PRELUDE = "import tracec.as_torch; tracec.as_torch.install_as_torch(); "
_SPAWN_ORIGINAL: list = []


def _spawn_command_line(**kwds) -> list:
    cmd = _SPAWN_ORIGINAL[0](**kwds)
    if "-c" in cmd:      # (a frozen executable takes no program)
        i = cmd.index("-c")
        cmd = cmd[:i + 1] + [_SPAWN_PRELUDE + cmd[i + 1]] + cmd[i + 2:]
    return cmd


def _spawn_children_alias(install: bool) -> None:
    """Processes started with the ``spawn`` start method (``mp.Process``
    after ``set_start_method("spawn")``, ``torch.multiprocessing.spawn``,
    DataLoader workers in a spawn context) are fresh interpreters: without
    this their ``import torch`` would find the real torch (or none).  Their
    command line installs the alias first, as ``fork``ed children inherit
    it."""
    import multiprocessing.spawn as spawn
    if install and not _SPAWN_ORIGINAL:
        _SPAWN_ORIGINAL.append(spawn.get_command_line)
        spawn.get_command_line = _spawn_command_line
    elif not install and _SPAWN_ORIGINAL:
        spawn.get_command_line = _SPAWN_ORIGINAL.pop()


def children_import_tracec() -> None:
    """Make the Python processes this one starts from now on, by any means
    (``subprocess`` running ``sys.executable``, loky's workers, ...),
    import tracec as torch: ``tracec.torch_shim``'s folder goes first on the
    ``PYTHONPATH`` they inherit, where their ``import torch`` /
    ``import torchvision`` finds the stand-ins that install it.  It goes
    first on this process's ``sys.path`` too, which workers that start by
    adopting their parent's (multiprocessing's and loky's ``prepare``)
    search; this process never reaches it, its ``import torch`` being
    answered by the alias finder ahead of every path.  For ``tracec run``,
    whose process runs the script alone."""
    import os
    shim = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_shim")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if shim not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([shim, *paths])
    if shim not in sys.path:
        sys.path.insert(0, shim)


def install_as_torch() -> None:
    """Make ``import torch`` and ``import torch.<sub>`` give tracec's modules.

    Idempotent.  Raises ``RuntimeError`` when the real torch is already
    imported in this process (its modules are in use and cannot be swapped).
    """
    for top, target in _ALIASES.items():
        mod = sys.modules.get(top)
        if mod is not None and mod is not importlib.import_module(target):
            raise RuntimeError(f"tracec.install_as_torch(): the real {top} is already imported "
                               "in this process; call install_as_torch() before any "
                               f"`import {top}`")
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    dt.PUBLIC_NAME[0] = "torch"
    # ``torch.__name__`` is "torch" (pyro's patch_dependency checks it; a
    # module's repr and its AttributeErrors name it)
    sys.modules["tracec"].__name__ = "torch"
    _rename_classes(True)
    _spawn_children_alias(True)
    # (multiprocessing's pickler refuses a non-leaf, as after `import torch`)
    importlib.import_module("tracec.multiprocessing")


def installed() -> bool:
    """Whether ``install_as_torch()`` is in effect."""
    return _FINDER in sys.meta_path


def uninstall_as_torch() -> None:
    """Undo ``install_as_torch()``: forget the ``torch`` aliases."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    dt.PUBLIC_NAME[0] = "tracec"
    sys.modules["tracec"].__name__ = "tracec"
    _rename_classes(False)
    _spawn_children_alias(False)
    for name in [n for n in sys.modules if n.partition(".")[0] in _ALIASES]:
        if getattr(sys.modules[name], "__name__", "").startswith("tracec"):
            del sys.modules[name]
