"""``torch.autograd.graph``: the autograd graph's public names.

``Node`` is the class of every ``grad_fn`` (``tracec.graph``'s engine);
``saved_tensors_hooks`` and the contexts built on it push onto the engine's
``SAVED_HOOKS`` stack, which the engine consults whenever a node saves a
tensor.
"""
from __future__ import annotations

import contextlib

from tracec import graph as _graph
from tracec.graph import Node
from tracec.creation import empty_like

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "increment_version"]


def increment_version(tensor) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of a
    list), as an in-place op does: for writes autograd cannot see (a
    kernel writing through ``data_ptr``).  Inference tensors have no
    counter to bump, as in PyTorch."""
    from tracec.tensor import InferenceVersion, Tensor
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        if type(t._version) is InferenceVersion:
            continue
        t._version[0] += 1
        if t._view_chain:
            t._view_version = t._version[0]


class saved_tensors_hooks:
    """``with saved_tensors_hooks(pack_hook, unpack_hook):``: every tensor an
    op (or a custom Function's ``save_for_backward``) saves for backward
    inside is stored as ``pack_hook(tensor)``, and backward reads
    ``unpack_hook(packed)`` instead (``tracec.graph.SavedPacked``).  Nested,
    the innermost pair packs.  Inside a call ``tracec.compile`` records,
    packing is refused (``graph.UNRECORDABLE``: compiled code would not call
    the hooks)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def pack(self, tensor):
        return self.pack_hook(tensor)

    def unpack(self, packed):
        return self.unpack_hook(packed)

    def __enter__(self) -> None:
        if _graph.SAVED_HOOKS_DISABLED:
            raise RuntimeError(_graph.SAVED_HOOKS_DISABLED[-1])
        _graph.SAVED_HOOKS.append(self)

    def __exit__(self, *exc) -> None:
        if self in _graph.SAVED_HOOKS:
            _graph.SAVED_HOOKS.reverse()
            _graph.SAVED_HOOKS.remove(self)     # (the innermost entry of it)
            _graph.SAVED_HOOKS.reverse()


class save_on_cpu(saved_tensors_hooks):
    """``with save_on_cpu(pin_memory=False, device_type="cuda"):``: tensors
    saved for backward are packed as ``(device, tensor.cpu())`` and unpacked
    with ``.to(device)``, PyTorch's hooks (tracec's eager tensors live in
    host memory already, so the copies are cheap aliases)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack_to_cpu(tensor):
            if not pin_memory:
                return (tensor.device, tensor.cpu())
            packed = empty_like(tensor, device="cpu")
            packed.copy_(tensor)
            return (tensor.device, packed)

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks(contextlib.ContextDecorator):
    """``with disable_saved_tensors_hooks(error_message):``: installing
    saved-tensor hooks inside raises ``RuntimeError(error_message)``, and so
    does entering it while hooks are installed."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        _graph.SAVED_HOOKS_DISABLED.append(self.error_message)
        if _graph.SAVED_HOOKS:
            _graph.SAVED_HOOKS_DISABLED.pop()
            raise RuntimeError(self.error_message)

    def __exit__(self, *exc):
        _graph.SAVED_HOOKS_DISABLED.pop()
        return False
