"""``torch.autograd.graph``: the autograd graph's public names.

``Node`` is the class of every ``grad_fn`` (``tracec.graph``'s engine);
``saved_tensors_hooks`` and the contexts built on it push onto the engine's
``SAVED_HOOKS`` stack (per thread, as PyTorch's), which the engine consults
whenever a node saves a tensor.
"""
from __future__ import annotations

import abc
import contextlib
import functools
import threading
from collections import defaultdict
from typing import NamedTuple, Optional

from tracec import graph as _graph
from tracec import graph_hooks as _hooks
from tracec.creation import empty_like
from tracec.tensor import RECORDERS
from tracec.removable_handle import RemovableHandle

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "register_multi_grad_hook", "allow_mutation_on_saved_tensors", "Node", "GradientEdge",
           "get_gradient_edge", "increment_version", "region_activation_memory_budget",
           "set_warn_on_accumulate_grad_stream_mismatch", "set_override_stale_capture_stream"]


def region_activation_memory_budget(budget: float):
    """``with region_activation_memory_budget(budget):`` inside a compiled
    region (PyTorch's checks and errors).  It tunes which activations
    torch.compile's partitioner saves or recomputes, never a value; tracec's
    compiled backward keeps its own plan, so the region runs as it is."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError("torch.autograd.graph.region_activation_memory_budget: expects a "
                        f"float, got {type(budget).__name__}")
    if not 0.0 <= budget <= 1.0:
        raise ValueError("torch.autograd.graph.region_activation_memory_budget: must be in "
                         f"[0, 1], got {budget}")
    if not RECORDERS:
        raise RuntimeError("torch.autograd.graph.region_activation_memory_budget can only be "
                           "used inside a torch.compile region; it has no effect in eager mode.")
    return contextlib.nullcontext()


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """A CUDA-streams warning switch: tracec's backward runs on no streams."""


def set_override_stale_capture_stream(enabled: bool) -> None:
    """A CUDA-graph-capture switch: tracec captures no CUDA graphs."""


class Node(abc.ABC):
    """The class every ``grad_fn`` is an instance of, as PyTorch's abstract
    ``torch.autograd.graph.Node``: the engine's node classes (a primitive's,
    a custom Function's, ``AccumulateGrad``) are its virtual subclasses."""

    @abc.abstractmethod
    def name(self) -> str:
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def next_functions(self):
        raise NotImplementedError

    @abc.abstractmethod
    def metadata(self) -> dict:
        raise NotImplementedError

    @abc.abstractmethod
    def register_hook(self, fn):
        raise NotImplementedError

    @abc.abstractmethod
    def register_prehook(self, fn):
        raise NotImplementedError

    @classmethod
    def __subclasshook__(cls, C):
        if cls is Node and issubclass(C, _graph.NodeHooks):
            return True
        return NotImplemented


class GradientEdge(NamedTuple):
    """Object representing a given gradient edge within the autograd graph.
    To get the gradient edge where a given Tensor gradient will be computed,
    you can do ``edge = autograd.graph.get_gradient_edge(tensor)``.
    """

    node: Node
    output_nr: int
    ownership_token: Optional[Node] = None


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge ``autograd.grad`` computes ``tensor``'s gradient at: its
    ``grad_fn`` (a leaf's ``AccumulateGrad``) and its output number."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor "
                           "that does not require gradients")
    return GradientEdge(_graph.named(_graph.edge_of(tensor)), tensor.output_nr)


def register_multi_grad_hook(tensors, fn, *, mode: str = "all"):
    """``fn`` once per backward, after the gradients of every tensor of
    ``tensors`` that the backward computes (``mode="all"``: ``fn(grads)``,
    None for the others), or at the first of them (``mode="any"``:
    ``fn(grad)``).  PyTorch's implementation: tensor hooks keyed by the
    engine's graph task."""
    supported_modes = ("all", "any")
    lock = threading.Lock()
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    if mode == "all":
        count: dict = {}
        nb_calls = None
        buffer: dict = {}
        grad_fns = [_graph.edge_of(t) for t in tensors]
        len_tensors = len(tensors)

        def get_inner_hook(idx):
            def inner_hook(grad):
                nonlocal nb_calls
                id = _hooks.current_graph_task_id()
                if id == -1:
                    raise AssertionError("expected this hook to be called inside a backward call")
                count[id] = count.get(id, 0)
                buffer[id] = buffer.get(id, [None] * len_tensors)
                with lock:
                    curr_count, count[id] = count[id], count[id] + 1
                    if curr_count == 0:
                        nb_calls = sum(map(_hooks.will_engine_execute_node, grad_fns))
                buffer[id][idx] = grad
                if curr_count == nb_calls - 1:
                    fn(buffer[id])
                    del count[id]
                    del buffer[id]
            return inner_hook
        handles = tuple(t.register_hook(get_inner_hook(i)) for i, t in enumerate(tensors))
    else:
        ran_hook: dict = defaultdict(bool)

        @functools.wraps(fn)
        def wrapped_fn(grad):
            id = _hooks.current_graph_task_id()
            if id == -1:
                raise AssertionError("expected this hook to be called inside a backward call")
            with lock:
                prev, ran_hook[id] = ran_hook[id], True
            if prev:
                return
            fn(grad)
        handles = tuple(t.register_hook(wrapped_fn) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)


class _MultiHandle(RemovableHandle):
    """The handle of ``register_multi_grad_hook``: removes every hook."""

    def __init__(self, handles) -> None:
        self.handles = handles

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    def __getstate__(self):
        return self.handles

    def __setstate__(self, state) -> None:
        self.handles = state


def increment_version(tensor) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of a
    list), as an in-place op does: for writes autograd cannot see (a
    kernel writing through ``data_ptr``).  Inference tensors have no
    counter to bump, as in PyTorch."""
    from tracec.tensor import InferenceVersion, Tensor
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        if type(t._vbox) is InferenceVersion:
            continue
        t._vbox[0] += 1
        if t._view_chain:
            t._view_version = t._vbox[0]


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
        message = _hooks.disabled_message()
        if message is not None:
            raise RuntimeError(message)
        _hooks.SAVED_HOOKS.append((threading.get_ident(), self))

    def __exit__(self, *exc) -> None:
        stack, entry = _hooks.SAVED_HOOKS, (threading.get_ident(), self)
        for i in range(len(stack) - 1, -1, -1):     # (this thread's innermost entry of it)
            if stack[i][0] == entry[0] and stack[i][1] is self:
                del stack[i]
                break


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

    #: unpacking gives the saved value back (on its device): a compiled
    #: step records its ops without the hooks (``graph_hooks.saved_hooks``)
    value_preserving = True


class _AllowMutationOnSavedContext:
    """What ``allow_mutation_on_saved_tensors`` yields: ``original`` maps
    each pack handle to the tensor saved, ``cloned`` to the copy of its value
    taken when it was saved (``clear()`` on exit)."""

    def __init__(self) -> None:
        self.cloned: dict = {}
        self.original: dict = {}

    def clear(self) -> None:
        self.cloned.clear()
        self.original.clear()


_MUTATION_ALLOWED = [False]


class _swap_with_cloned(saved_tensors_hooks):
    """The hooks of ``allow_mutation_on_saved_tensors``.  PyTorch clones a
    saved tensor just before an in-place op writes it (a dispatch mode);
    tracec's in-place paths have no one place before the write, so the
    value is copied when the tensor is saved, and backward reads the tensor
    itself while its version is the saved one, else the copy: the same
    values, paid for in memory up front."""

    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        def pack_hook(tensor):
            handle = object.__new__(_Handle)
            ctx.original[handle] = (tensor, tensor._vbox[0])
            ctx.cloned[handle] = tensor.detach().clone()
            return handle

        def unpack_hook(handle):
            error_msg = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' "
                         "contextin which the graph was originally recorded.")
            if not _MUTATION_ALLOWED[0] or handle not in ctx.original:
                raise AssertionError(error_msg)
            tensor, version = ctx.original[handle]
            return tensor if tensor._vbox[0] == version else ctx.cloned[handle]
        super().__init__(pack_hook, unpack_hook)


class _Handle:
    pass


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """Context manager under which mutating tensors saved for backward is
    allowed: backward reads the values they had when saved."""
    ctx = _AllowMutationOnSavedContext()
    with _swap_with_cloned(ctx):
        try:
            if _MUTATION_ALLOWED[0]:
                raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
            _MUTATION_ALLOWED[0] = True
            yield ctx
        finally:
            ctx.clear()
            _MUTATION_ALLOWED[0] = False


class disable_saved_tensors_hooks(contextlib.ContextDecorator):
    """``with disable_saved_tensors_hooks(error_message):``: installing
    saved-tensor hooks inside raises ``RuntimeError(error_message)``, and so
    does entering it while hooks are installed."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        if _hooks.saved_hooks() is not None:
            raise RuntimeError(self.error_message)
        self._entry = (threading.get_ident(), self.error_message)
        _hooks.SAVED_HOOKS_DISABLED.append(self._entry)

    def __exit__(self, *exc):
        _hooks.SAVED_HOOKS_DISABLED.remove(self._entry)
        return False
