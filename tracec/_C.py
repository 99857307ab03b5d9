"""``torch._C``: the few names of torch's extension module that public
Python code calls directly (torchvision's ``_log_api_usage_once`` in every
model's constructor, ``_get_tracing_state`` in TorchScript-aware code)."""
from __future__ import annotations

import os
import sys

_LOGGED: set = set()


def _log_api_usage_once(*args) -> None:
    """Record an API-usage event, once per event name.  Like c10's default
    logger: silent unless ``PYTORCH_API_USAGE_STDERR`` is set, then one line
    ``PYTORCH_API_USAGE <event>`` on stderr."""
    if len(args) != 1:
        raise TypeError(f"torch._C._log_api_usage_once() takes exactly one argument ({len(args)} given)")
    event = args[0]
    if not isinstance(event, str):
        raise TypeError("bad argument type for built-in operation")
    if event in _LOGGED:
        return None
    _LOGGED.add(event)
    if os.environ.get("PYTORCH_API_USAGE_STDERR"):
        sys.stderr.write(f"PYTORCH_API_USAGE {event}\n")
    return None


class _LinAlgError(RuntimeError):
    """``torch._C._LinAlgError``, i.e. ``torch.linalg.LinAlgError`` (a
    ``RuntimeError``): a factorization that cannot complete (a matrix not
    positive-definite, a singular one).  Its name is torch's class name, as
    ``type(e).__name__`` and ``repr(e)`` show it."""


def _get_tracing_state():
    """The TorchScript tracer's state: tracec never runs under ``torch.jit.trace``'s tracer."""
    return None


#: How many ``torch.func`` transforms (vmap, grad, vjp, jvp) enclose the
#: code running now; ``tracec.func`` counts them.
FUNCTORCH_DEPTH = [0]

#: How many of those are ``vmap`` (``jacfwd`` and ``hessian`` are PyTorch's
#: vmap of a jvp): a custom ``autograd.Function`` called there needs a vmap
#: rule (``tracec.autograd.function_transforms``).
VMAP_DEPTH = [0]


def _are_functorch_transforms_active() -> bool:
    """Whether code runs inside a ``torch.func`` transform (kornia picks its
    box filter's formulation by it)."""
    return FUNCTORCH_DEPTH[0] > 0


class Type:
    """``torch._C.Type`` (``torch.Type``): a TorchScript type.  tracec has no
    TorchScript; its subclasses exist for annotations such as
    ``str | torch.DeviceObjType`` and their ``get()`` singletons."""
    _STR = "Type"

    def __init__(self):
        raise TypeError(f"torch._C.{type(self).__name__}: No constructor defined!")

    @classmethod
    def get(cls):
        """The type's single instance (``str()`` is TorchScript's spelling)."""
        inst = cls.__dict__.get("_INSTANCE")
        if inst is None:
            inst = object.__new__(cls)
            cls._INSTANCE = inst
        return inst

    def __str__(self):
        return self._STR

    def __repr__(self):
        return self._STR


class TensorType(Type):
    """``torch.TensorType``: TorchScript's type of a tensor (open_clip
    annotates with it)."""
    _STR = "Tensor"


class DeviceObjType(Type):
    """``torch.DeviceObjType``: TorchScript's type of ``torch.device`` values."""
    _STR = "Device"


class StreamObjType(Type):
    """``torch.StreamObjType``: TorchScript's type of streams."""
    _STR = "Stream"


#: The metaclass of Tensor (PyTorch's is ``torch._C._TensorMeta``; tracec's
#: Tensor is a plain Python class, so its metaclass is ``type``).
_TensorMeta = type


class Value:
    """``torch._C.Value``: a value of a TorchScript IR graph.  tracec builds
    no TorchScript graphs, so, as in torch, the class cannot be constructed
    from Python; code imports it for annotations (snntorch's losses)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("torch._C.Value: No constructor defined!")


Value.__module__ = "torch"


def __getattr__(name):
    # The __torch_function__ protocol's switches (tracec.torch_function_switch).
    local = {"DisableTorchFunction": "DisableTorchFunction",
             "DisableTorchFunctionSubclass": "DisableTorchFunctionSubclass",
             "_disabled_torch_function_impl": "disabled_torch_function_impl"}.get(name)
    if name in ("_current_graph_task_id", "_will_engine_execute_node"):
        # (the autograd engine's state, which register_multi_grad_hook reads)
        from tracec import graph_hooks
        return {"_current_graph_task_id": graph_hooks.current_graph_task_id,
                "_will_engine_execute_node": graph_hooks.will_engine_execute_node}[name]
    if local is None:
        raise AttributeError(f"module 'torch._C' has no attribute '{name}'")
    from tracec import torch_function_switch
    return getattr(torch_function_switch, local)
