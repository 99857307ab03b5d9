"""``tracec.nn.utils.init``: ``skip_init``, a module built without drawing
its initial values.

Invariant: the default generator's state after ``skip_init`` equals its
state before (as PyTorch's, which builds on the meta device and draws
nothing), so the random stream seen by later code is unchanged; the
parameters' values are unspecified, as after ``torch.empty``.
"""
from __future__ import annotations

import inspect

from tracec import creation
from tracec.nn.modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """Instantiate ``module_cls(*args, **kwargs)`` leaving its parameters'
    values unspecified; the class must take a ``device`` argument."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    gen = creation.default_generator
    state = gen.get_state()
    try:
        return module_cls(*args, **kwargs)
    finally:
        gen.set_state(state)
