"""``torch.utils.checkpoint``: activation checkpointing.

PyTorch's ``checkpoint(fn, *args)`` frees ``fn``'s activations after the
forward and recomputes them in backward: a memory saving with the same
values and gradients.  tracec runs ``fn`` normally and keeps them (the
same numbers; only the memory saving is absent).  The arguments PyTorch
checks are checked the same way.
"""
from __future__ import annotations

import warnings

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. Starting in PyTorch 2.9, calling checkpoint without "
                      "use_reentrant will raise an exception. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
        use_reentrant = True
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run the modules of ``functions`` (a Sequential or a list) in order."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly.", stacklevel=2)
    mods = list(functions.children()) if hasattr(functions, "children") else list(functions)
    for m in mods:
        input = m(input)
    return input
