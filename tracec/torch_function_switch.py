"""The switches of the ``__torch_function__`` protocol (``torch._C``'s
``DisableTorchFunctionSubclass``, ``DisableTorchFunction`` and
``_disabled_torch_function_impl``); the protocol itself is
``tracec.subclass_dispatch``.

Also the stack of ``TorchFunctionMode``s (``tracec.overrides``) entered on
this thread, which see every call first.

Invariant: the switches are per thread and nest; ``off()`` is true inside
any ``DisableTorchFunctionSubclass`` or ``DisableTorchFunction`` block on
this thread, ``modes_on()`` false inside a ``DisableTorchFunction`` one or
with no mode entered.
"""
from __future__ import annotations

import threading

__all__ = ["DisableTorchFunctionSubclass", "DisableTorchFunction", "disabled_torch_function_impl",
           "off", "WRAPPER_CODES", "caller", "unwrapped", "public_of", "mode_stack", "modes_on",
           "ENTERED"]

_state = threading.local()

#: Code objects of tracec.subclass_dispatch's dispatching wrappers: code
#: that reads its caller's frame (``item()``'s speculation, masked reads)
#: looks through them (``caller``).
WRAPPER_CODES: set = set()


def caller(frame):
    """``frame``, or the first frame outside the dispatching wrappers."""
    while frame is not None and frame.f_code in WRAPPER_CODES:
        frame = frame.f_back
    return frame


def unwrapped(fn):
    """The implementation behind a dispatching wrapper (else ``fn``)."""
    return getattr(fn, "__tracec_unwrapped__", fn)


#: id(implementation) -> its dispatching wrapper, which now holds its name.
PUBLIC_OF: dict = {}


def public_of(fn):
    """The dispatching wrapper installed under ``fn``'s name, or None."""
    return PUBLIC_OF.get(id(fn))


def off() -> bool:
    """Whether calls on this thread skip Tensor subclasses' __torch_function__."""
    return getattr(_state, "depth", 0) > 0


#: How many TorchFunctionModes are entered, on all threads (a cheap test
#: that lets every call skip the per-thread stack when none is).
ENTERED = [0]


def mode_stack() -> list:
    """This thread's entered TorchFunctionModes, innermost last."""
    stack = getattr(_state, "modes", None)
    if stack is None:
        stack = _state.modes = []
    return stack


def modes_on() -> bool:
    """Whether calls on this thread go to the innermost TorchFunctionMode."""
    return ENTERED[0] > 0 and bool(mode_stack()) and getattr(_state, "all_off", 0) == 0


class DisableTorchFunctionSubclass:
    """``torch._C.DisableTorchFunctionSubclass``: inside the block, calls go
    straight to their implementations (nesting allowed; per thread)."""

    def __enter__(self):
        _state.depth = getattr(_state, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _state.depth -= 1
        return False


class DisableTorchFunction(DisableTorchFunctionSubclass):
    """``torch._C.DisableTorchFunction``: turns off TorchFunctionModes too."""

    def __enter__(self):
        _state.all_off = getattr(_state, "all_off", 0) + 1
        return super().__enter__()

    def __exit__(self, *exc):
        _state.all_off -= 1
        return super().__exit__(*exc)


def disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """``torch._C._disabled_torch_function_impl``: a class setting
    ``__torch_function__`` to this (``Parameter`` does) opts out: its
    instances are plain tensors to the protocol."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))
