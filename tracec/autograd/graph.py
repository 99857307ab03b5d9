"""``torch.autograd.graph``: the autograd graph's public names.

``Node`` is the class of every ``grad_fn`` (``tracec.graph``'s engine).
``save_on_cpu`` keeps what backward saves in host memory, which is where
tracec's CPU tensors are saved already; tracec's engine has no pack/unpack
hooks for saved tensors, so ``saved_tensors_hooks`` (whose hooks would
change what backward reads) refuses when entered rather than ignoring them.
"""
from __future__ import annotations

from tracec.graph import Node

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
    """``with saved_tensors_hooks(pack_hook, unpack_hook):``: refused when
    entered (tracec's autograd saves tensors without hooks)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        raise NotImplementedError("torch.autograd.graph.saved_tensors_hooks: tracec's autograd "
                                  "engine has no pack/unpack hooks for saved tensors")

    def __exit__(self, *exc):
        return False


class save_on_cpu:
    """``with save_on_cpu(pin_memory=False, device_type="cuda"):``: tensors
    saved for backward live in host memory.  tracec's eager tensors are all
    host arrays (``tracec.device.EAGER_CUDA`` is False), so what backward
    saves is there already and reads back unchanged."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        self.pin_memory, self.device_type = pin_memory, device_type

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class disable_saved_tensors_hooks:
    """``with disable_saved_tensors_hooks(message):``: no hooks can be
    installed inside (tracec has none to install)."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
