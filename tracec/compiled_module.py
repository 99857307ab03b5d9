"""What ``tracec.compile(module)`` returns: an ``nn.Module``, as PyTorch's
``torch.compile(module)`` returns its ``OptimizedModule``.

Programs compile their model and go on treating it as one:
``model = torch.compile(model)`` then ``model.train()``, ``model.eval()``,
``model.parameters()``, ``model.state_dict()`` (keys prefixed
``_orig_mod.``, as PyTorch's: nanoGPT strips that prefix when it loads),
``model.some_attribute``.  Calls go through the ``CompiledFunction`` of the
original module; attributes the wrapper lacks are the original module's,
then the compiled function's (``cache_info()``, ``ir()``, ``profile()``).
Attributes set on the wrapper go to the original module, except the
wrapper's own (PyTorch's ``OptimizedModule.__setattr__``).

Invariant: ``_orig_mod`` is the module the user passed, registered as the
only child, so parameters, buffers, modes and hooks are that module's.
"""
from __future__ import annotations

from tracec.nn.modules.module import Module

__all__ = ["OptimizedModule"]

#: Attributes the wrapper keeps itself (the rest are the original module's).
_OWN = frozenset({"_orig_mod", "_compiled", "training", "forward", "__dict__"})


class OptimizedModule(Module):
    """``module`` compiled: calls run ``compiled`` (a ``CompiledFunction`` of
    ``module``); see the module docstring."""

    def __init__(self, module: Module, compiled) -> None:
        super().__init__()
        self._orig_mod = module
        self.__dict__["_compiled"] = compiled
        self.training = module.training

    def forward(self, *args, **kwargs):
        return self.__dict__["_compiled"](*args, **kwargs)

    def __len__(self) -> int:
        # As torch's OptimizedModule: the original module's length
        # (a compiled nn.Sequential / ModuleList)
        orig = self._modules["_orig_mod"]
        if hasattr(type(orig), "__len__"):
            return len(orig)
        raise TypeError(f"{type(orig).__name__} does not support len()")

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        d = self.__dict__
        mods = d.get("_modules")
        if mods is not None and "_orig_mod" in mods:
            try:
                return getattr(mods["_orig_mod"], name)
            except AttributeError:
                pass
        if "_compiled" in d:
            return getattr(d["_compiled"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        mods = self.__dict__.get("_modules")
        if (mods is None or "_orig_mod" not in mods or name in _OWN
                or hasattr(type(self), name) or name in self.__dict__):
            super().__setattr__(name, value)
        else:
            setattr(mods["_orig_mod"], name, value)
