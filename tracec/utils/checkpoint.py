"""``torch.utils.checkpoint``: activation checkpointing.

``checkpoint(fn, *args, use_reentrant=False)`` is PyTorch's implementation
on saved-tensor hooks (``_checkpoint_hook``): what ``fn``'s ops save for
backward is dropped after the forward, and the first unpack in a backward
runs ``fn`` again (grad mode on, the forward's RNG and autocast state
restored) under ``_recomputation_hook``, which collects the recomputed
values in the order they are saved and stops ``fn`` once it has them all
(``early_stop``); ``determinism_check`` compares their shapes, dtypes and
devices with the forward's.  The outputs keep the grad_fns of ``fn``'s
own ops, as in PyTorch.

While ``tracec.compile`` records a call, and for ``use_reentrant=True``,
``fn`` runs normally and keeps its activations (the same numbers; only the
memory saving is absent); what the recomputation does besides computing --
a BatchNorm's running statistics updated a second time -- is done when
backward reaches the outputs (``_Recompute``: ``fn`` runs again with
gradient recording off, the RNG and autocast state of the forward
restored).  With ``use_reentrant=True`` and no input requiring grad, ``fn``
runs without gradient recording, as PyTorch's reentrant variant does (its
parameters get no gradients).  The arguments PyTorch checks are checked
the same way.
"""
from __future__ import annotations

import contextlib
import uuid
import warnings
import weakref
from collections import defaultdict

from tracec import autocast_mode, graph, graph_hooks
from tracec.autograd import Function, backward as _autograd_backward
from tracec.autograd.graph import saved_tensors_hooks
from tracec.creation import get_rng_state, set_rng_state
from tracec.tensor import RECORDERS, Tensor
from tracec.utils._pytree import tree_map

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError",
           "check_backward_validity", "detach_variable", "get_device_states",
           "set_device_states", "noop_context_fn", "set_checkpoint_early_stop",
           "set_checkpoint_debug_enabled", "GraphExecGroup"]

_DEFAULT_DETERMINISM_MODE = "default"


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check=_DEFAULT_DETERMINISM_MODE, debug=False, early_stop=True,
               **kwargs):
    """``function(*args, **kwargs)``, its activations recomputed in backward."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. Starting in PyTorch 2.9, calling checkpoint without "
                      "use_reentrant will raise an exception. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug is not False):
        raise ValueError("Passing `context_fn` or `debug` is only supported when "
                         "use_reentrant=False.")
    if not use_reentrant and not RECORDERS:
        return _checkpoint_without_reentrant(function, preserve_rng_state, context_fn,
                                             determinism_check, debug, early_stop, args, kwargs)
    if use_reentrant and not RECORDERS:
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    if not graph.is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)
        with graph.no_grad():
            return function(*args, **kwargs)
    rng = get_rng_state() if preserve_rng_state else None
    out = function(*args, **kwargs)
    single = isinstance(out, Tensor)
    outs = (out,) if single else tuple(out) if isinstance(out, (tuple, list)) else None
    if outs is None:
        return out
    tracked = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not tracked:
        return out
    detached = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
    # (the autocast regions in effect: the recomputation runs under them, as
    # PyTorch's does, whatever the caller's state at backward)
    rng = (rng, list(autocast_mode.ACTIVE))
    replayed = _Recompute.apply(function, detached, kwargs, rng, *[outs[i] for i in tracked])
    replayed = replayed if isinstance(replayed, tuple) else (replayed,)
    res = list(outs)
    for i, r in zip(tracked, replayed):
        res[i] = r
    return res[0] if single else type(out)(res) if isinstance(out, list) else tuple(res)


class CheckpointFunction(Function):
    """``checkpoint(use_reentrant=True)``, PyTorch's: the forward runs
    without gradient recording; backward runs the function again (the
    forward's RNG and autocast state restored) on detached inputs and
    backpropagates through that, reentrantly."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.autocast = list(autocast_mode.ACTIVE)
        if preserve_rng_state:
            ctx.fwd_cpu_state = get_rng_state()
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)
        with graph.no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        if not graph_hooks.checkpoint_valid():
            raise RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible "
                               "with .grad() or passing an `inputs` parameter to .backward(). To "
                               "resolve this error, you can either set use_reentrant=False, or "
                               "call .backward() without passing the `inputs` argument.")
        inputs = list(ctx.inputs)
        tensors = ctx.saved_tensors
        for i, idx in enumerate(ctx.tensor_indices):
            inputs[idx] = tensors[i]
        saved_rng = get_rng_state() if ctx.preserve_rng_state else None
        saved_autocast = list(autocast_mode.ACTIVE)
        try:
            if ctx.preserve_rng_state:
                set_rng_state(ctx.fwd_cpu_state)
            autocast_mode.ACTIVE[:] = ctx.autocast
            detached_inputs = detach_variable(tuple(inputs))
            with graph.enable_grad():
                outputs = ctx.run_function(*detached_inputs)
        finally:
            autocast_mode.ACTIVE[:] = saved_autocast
            if saved_rng is not None:
                set_rng_state(saved_rng)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outputs_with_grad = []
        args_with_grad = []
        for i in range(len(outputs)):
            if isinstance(outputs[i], Tensor) and outputs[i].requires_grad:
                outputs_with_grad.append(outputs[i])
                args_with_grad.append(args[i])
        if len(outputs_with_grad) == 0:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not "
                               "necessary")
        _autograd_backward(outputs_with_grad, args_with_grad)
        grads = tuple(inp.grad if isinstance(inp, Tensor) else None for inp in detached_inputs)
        return (None, None) + grads


class _Recompute(Function):
    """The checkpointed outputs, passed through; its backward runs the
    function again for its side effects, where PyTorch's recomputation runs
    it, and passes the gradients on unchanged.  Its backward is tracec ops,
    so a compiled backward records it as it records a user's Function."""

    recordable = True

    @staticmethod
    def forward(ctx, function, args, kwargs, rng, *outs):
        ctx.replay = (function, args, kwargs, rng)
        # (copies, not views: a view made here, without gradient recording,
        # could not be changed in place after it -- an nn.ReLU(inplace=True)
        # first in the segment after a checkpointed one -- as PyTorch's
        # checkpoint outputs can)
        return tuple(o.clone() for o in outs) if len(outs) > 1 else outs[0].clone()

    @staticmethod
    def backward(ctx, *grads):
        function, args, kwargs, (rng, autocast) = ctx.replay
        saved = get_rng_state() if rng is not None else None
        saved_autocast = list(autocast_mode.ACTIVE)
        try:
            if rng is not None:
                set_rng_state(rng)
            autocast_mode.ACTIVE[:] = autocast
            with graph.no_grad():
                function(*args, **kwargs)
        finally:
            autocast_mode.ACTIVE[:] = saved_autocast
            if saved is not None:
                set_rng_state(saved)
        return (None, None, None, None) + grads


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run the modules of ``functions`` (a Sequential or a list) in order,
    each of the first ``segments - 1`` chunks under ``checkpoint``."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly. In version 2.9 we will raise an "
                      "exception if use_reentrant is not passed. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start, end, functions):
        def forward(input):
            for j in range(start, end + 1):
                input = functions[j](input)
            return input
        return forward

    if not isinstance(functions, (list, tuple)) and hasattr(functions, "children"):
        # (a Sequential; a ModuleList's children are its items too)
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input,
                           use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)


# The helpers custom checkpointing / reversible code imports from here
# (reformer-pytorch's Deterministic, revtorch, memcnn).

def detach_variable(inputs):
    """Each tensor of the tuple ``inputs`` detached, keeping its requires_grad."""
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: ",
                           type(inputs).__name__)
    out = []
    for inp in inputs:
        if not isinstance(inp, Tensor):
            out.append(inp)
            continue
        x = inp.detach()
        x.requires_grad = inp.requires_grad
        out.append(x)
    return tuple(out)


def check_backward_validity(inputs) -> None:
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")


def get_device_states(*args):
    """(device ids, RNG states) of the accelerator devices the tensors in
    ``args`` (nested) live on: empty for CPU and meta tensors, the only ones
    this build holds. (tracec draws on every device from its one generator,
    so a device's state is that generator's.)"""
    ids = []

    def add(arg):
        if isinstance(arg, Tensor) and arg.device.type not in {"cpu", "meta"} \
                and arg.device.index not in ids:
            ids.append(arg.device.index)
        return arg
    tree_map(add, args)
    return ids, [get_rng_state() for _ in ids]


def set_device_states(devices, states, *, device_type=None) -> None:
    """Restores states from ``get_device_states`` (nothing for no devices)."""
    if device_type == "meta":
        return
    for _, state in zip(devices, states):
        set_rng_state(state)


# --- use_reentrant=False: PyTorch's implementation on saved-tensor hooks -----------------

_enable_checkpoint_early_stop = None
_checkpoint_debug_enabled = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Whether checkpoints made inside stop recomputing once they have every
    tensor backward needs (a checkpoint's own ``early_stop`` otherwise)."""
    global _enable_checkpoint_early_stop
    try:
        prev = _enable_checkpoint_early_stop
        _enable_checkpoint_early_stop = enable
        yield
    finally:
        _enable_checkpoint_early_stop = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """Overrides ``checkpoint(debug=...)`` inside (tracec's checkpoint has
    no operator logs to add to its errors; the flag is kept)."""
    global _checkpoint_debug_enabled
    try:
        prev = _checkpoint_debug_enabled
        _checkpoint_debug_enabled = enabled
        yield
    finally:
        _checkpoint_debug_enabled = prev


class CheckpointError(RuntimeError):
    pass


_debug_tip_msg = """
Tip: To see a more detailed error message, either pass `debug=True` to
`torch.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint\u2011debug mode globally.

If this error occurs under torch.compile with automatic_dynamic_shapes enabled,
it may be because the recomputation selected a different compiled graph than the
forward pass (e.g., a dynamic graph instead of the original static graph).

To fix this, either:
  - Use torch._dynamo.mark_dynamic() to explicitly mark varying dimensions as
    dynamic upfront, avoiding the static-to-dynamic transition.
  - Call torch._C._dynamo.eval_frame._set_lru_cache(False) to disable LRU cache
    reordering, which can change which graph is checked first between forward
    and recompute.

See https://github.com/pytorch/pytorch/issues/166926 for more details and
workaround examples.
"""


def _internal_assert(cond) -> None:
    if not cond:
        raise AssertionError("Something went unexpectedly wrong in activation checkpoint. "
                             "Please report this bug by filing an issue to PyTorch.")


def _default_meta_extractor(x) -> dict:
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_allowed_determinism_checks_to_fns = {
    _DEFAULT_DETERMINISM_MODE: _default_meta_extractor,
    "none": lambda _: None,
}


class _Handle:
    pass


class _Holder:
    def __init__(self) -> None:
        self.handles: dict = {}


def _make_saved_tensor(t):
    """``t`` kept as autograd keeps a saved input: packed by the saved-tensor
    hooks in effect (a checkpoint's input inside another checkpoint, or a
    user's hooks: PyTorch calls them here too), else with its version."""
    hooks = graph_hooks.saved_hooks()
    if hooks is not None:
        return graph.SavedPacked(t, hooks)
    return (t, t._vbox[0])


def _unpack_saved_tensor(saved):
    if isinstance(saved, graph.SavedPacked):
        return saved.unpack()
    t, version = saved
    if t._vbox[0] != version:
        raise graph.modified_error(t, version)
    return t


class _CheckpointFrame:
    def __init__(self, recompute_fn, early_stop, unpack_error_cb, metadata_fn) -> None:
        self.recompute_fn = recompute_fn
        self.saved_args: list = []
        self.weak_holders: list = []
        self.recomputed = defaultdict(weakref.WeakKeyDictionary)
        self.recomp_counter = defaultdict(int)
        self.is_recomputed = defaultdict(bool)
        self.early_stop = early_stop
        self.metadata_fn = metadata_fn
        self.unpack_error_cb = unpack_error_cb
        self.x_metadatas: list = []
        self.forward_completed = False
        self.ignore_saved_mismatch = False

    def save_inputs(self, *args):
        self.saved_args = [(_make_saved_tensor(a),) if isinstance(a, Tensor) else a
                           for a in args]

    def get_inputs(self):
        return [_unpack_saved_tensor(a[0]) if type(a) is tuple and len(a) == 1 else a
                for a in self.saved_args]

    def check_recomputed_tensors_match(self, gid) -> None:
        if self.ignore_saved_mismatch:
            return
        if not len(self.weak_holders) == self.recomp_counter[gid]:
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved "
                "during the original forward and recomputation.\n"
                f"Number of tensors saved during forward: {len(self.weak_holders)}\n"
                f"Number of tensors saved during recomputation: {self.recomp_counter[gid]}.\n"
                f"{_debug_tip_msg}")
        nb_meta_different = []
        for idx, weak_holder in enumerate(self.weak_holders):
            holder = weak_holder()
            if holder is None:
                continue
            _internal_assert(gid in holder.handles)
            _internal_assert(holder.handles[gid] is not None)
            _internal_assert(holder.handles[gid] in self.recomputed[gid])
            x_meta = self.x_metadatas[idx]
            recomputed_x = self.recomputed[gid][holder.handles[gid]]
            if x_meta != self.metadata_fn(recomputed_x):
                nb_meta_different.append((idx, x_meta, self.metadata_fn(recomputed_x)))
        if len(nb_meta_different) > 0:
            mismatched_tensors = ""
            for idx, x_meta, recomputed_meta in nb_meta_different:
                mismatched_tensors += (f"tensor at position {idx}:\n"
                                       f"saved metadata: {x_meta}\n"
                                       f"recomputed metadata: {recomputed_meta}\n")
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors "
                "have different metadata than during the forward pass.\n"
                f"{mismatched_tensors}.\n"
                f"{_debug_tip_msg}")


class _StopRecomputationError(Exception):
    pass


class _recomputation_hook(saved_tensors_hooks):
    def __init__(self, target_frame_ref, gid) -> None:
        def pack_hook(x):
            x = x.detach() if x.requires_grad else x
            target_frame = target_frame_ref()
            if target_frame is None:
                raise AssertionError("Internal error: target_frame reference is None")
            recomp_idx = target_frame.recomp_counter[gid]
            target_frame.recomp_counter[gid] += 1
            if recomp_idx >= len(target_frame.weak_holders):
                if target_frame.early_stop:
                    raise AssertionError("Unexpected state: target_frame.early_stop is set")
                if not target_frame.forward_completed:
                    target_frame.ignore_saved_mismatch = True
                    return x
                raise CheckpointError(
                    "torch.utils.checkpoint: trying to save more tensors during "
                    "recomputation than during the original forward pass.\n"
                    f"{_debug_tip_msg}")
            holder = target_frame.weak_holders[recomp_idx]()
            if holder is not None:
                _internal_assert(holder.handles.get(gid, None) is None)
                holder.handles[gid] = _Handle()
                target_frame.recomputed[gid][holder.handles[gid]] = x
            if target_frame.early_stop and \
                    target_frame.recomp_counter[gid] == len(target_frame.weak_holders):
                raise _StopRecomputationError
            return x

        def unpack_hook(x):
            return x
        super().__init__(pack_hook, unpack_hook)


class _checkpoint_hook(saved_tensors_hooks):
    def __init__(self, frame) -> None:
        def pack_hook(x):
            holder = _Holder()
            frame.weak_holders.append(weakref.ref(holder))
            if frame.metadata_fn is not None:
                with graph.no_grad():
                    frame.x_metadatas.append(frame.metadata_fn(x))
            return holder

        def unpack_hook(holder):
            gid = GraphExecGroup._get_current_group()
            if gid is None:
                gid = graph_hooks.current_graph_task_id()
                if gid == -1:
                    gid = int(uuid.uuid4())
            if not frame.is_recomputed[gid]:
                args = frame.get_inputs()
                try:
                    with _recomputation_hook(weakref.ref(frame), gid), graph.enable_grad():
                        frame.recompute_fn(*args)
                except _StopRecomputationError:
                    pass
                frame.is_recomputed[gid] = True
                frame.check_recomputed_tensors_match(gid)
            _internal_assert(gid in holder.handles)
            if holder.handles[gid] is None:
                extra = ""
                if _GRAPH_EXEC_GROUP[0] is not None:
                    extra = ("Performing two backward calls that overlap (i.e. require the same "
                             "saved activation in order to compute gradients) is not allowed "
                             "while under the torch.utils.checkpoint.GraphExecGroup context. ")
                raise CheckpointError(
                    "torch.utils.checkpoint: Unpack is being triggered for a tensor that was "
                    f"already unpacked once. {extra}If you are calling ctx.saved_tensors in "
                    "backward, make sure to do so only once. Otherwise please open an issue "
                    "with details on your use case.")
            _internal_assert(holder.handles[gid] in frame.recomputed[gid])
            ret = frame.recomputed[gid][holder.handles[gid]]
            holder.handles[gid] = None
            return ret

        if frame.unpack_error_cb is not None:
            def unpack_hook_with_error_cb(holder):
                try:
                    return unpack_hook(holder)
                except CheckpointError as e:
                    frame.unpack_error_cb(e)
            super().__init__(pack_hook, unpack_hook_with_error_cb)
        else:
            super().__init__(pack_hook, unpack_hook)


_GRAPH_EXEC_GROUP = [None]


class GraphExecGroup:
    """Any checkpointed regions encountered by backward under the same
    instance of this context manager recompute at most once, even over
    several backward calls (which must then use disjoint saved activations)."""

    def __enter__(self):
        if _GRAPH_EXEC_GROUP[0] is not None:
            raise RuntimeError("GraphExecGroup contexts cannot be nested. "
                               f"Already inside group {_GRAPH_EXEC_GROUP[0]}")
        _GRAPH_EXEC_GROUP[0] = self
        return self

    def __exit__(self, *args) -> None:
        _GRAPH_EXEC_GROUP[0] = None

    @classmethod
    def _get_current_group(cls):
        return _GRAPH_EXEC_GROUP[0]


_FORWARD_SUPPRESSED = ("torch.utils.checkpoint: the forward context provided by context_fn "
                       "suppressed an exception raised during the checkpointed forward. This "
                       "is not supported because checkpoint cannot return a value for a "
                       "failed forward.")


def _checkpoint_without_reentrant(fn, preserve_rng_state, context_fn, determinism_check, debug,
                                  early_stop, args, kwargs):
    """PyTorch's ``_checkpoint_without_reentrant_generator`` and the call
    around it, in one function: the forward runs under ``_checkpoint_hook``
    and the ``context_fn``'s forward context."""
    unpack_error_cb = None
    if _checkpoint_debug_enabled if _checkpoint_debug_enabled is not None else debug:
        if context_fn is not noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
    if determinism_check in _allowed_determinism_checks_to_fns:
        metadata_fn = _allowed_determinism_checks_to_fns[determinism_check]
    else:
        raise ValueError("determinism_check should be one of "
                         f"{list(_allowed_determinism_checks_to_fns.keys())}, "
                         f"but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    autocast = list(autocast_mode.ACTIVE)
    if preserve_rng_state:
        fwd_cpu_state = get_rng_state()

    def recompute_fn(*inputs) -> None:
        saved_rng = get_rng_state() if preserve_rng_state else None
        saved_autocast = list(autocast_mode.ACTIVE)
        try:
            if preserve_rng_state:
                set_rng_state(fwd_cpu_state)
            autocast_mode.ACTIVE[:] = autocast
            with recompute_context:
                fn(*inputs, **kwargs)
        finally:
            autocast_mode.ACTIVE[:] = saved_autocast
            if saved_rng is not None:
                set_rng_state(saved_rng)

    frame = _CheckpointFrame(
        recompute_fn,
        _enable_checkpoint_early_stop if _enable_checkpoint_early_stop is not None
        else early_stop, unpack_error_cb, metadata_fn)
    if not graph.is_grad_enabled():
        return fn(*args, **kwargs)
    frame.save_inputs(*args)
    suppressed = True
    with _checkpoint_hook(frame), forward_context:
        ret = fn(*args, **kwargs)
        suppressed = False
    if suppressed:
        raise RuntimeError(_FORWARD_SUPPRESSED)
    frame.forward_completed = True
    return ret
