"""``torch.utils.checkpoint``: activation checkpointing.

PyTorch's ``checkpoint(fn, *args)`` frees ``fn``'s activations after the
forward and recomputes them in backward: a memory saving with the same
values and gradients.  tracec runs ``fn`` normally and keeps them (the
same numbers; only the memory saving is absent).  What the recomputation
does besides computing -- a BatchNorm's running statistics updated, and
``num_batches_tracked`` counted, a second time -- is done as PyTorch does
it: when backward reaches the checkpointed outputs, ``fn`` runs again (with
gradient recording off, the RNG state and the autocast state of the
forward restored and the caller's restored afterwards) for its side
effects.  With
``use_reentrant=True`` and no input requiring grad, ``fn`` runs without
gradient recording, as PyTorch's reentrant variant does (its parameters get
no gradients).  The arguments PyTorch checks are checked the same way.
"""
from __future__ import annotations

import warnings

from tracec import autocast_mode, graph
from tracec.autograd import Function
from tracec.creation import get_rng_state, set_rng_state
from tracec.tensor import Tensor
from tracec.utils._pytree import tree_map

__all__ = ["checkpoint", "checkpoint_sequential", "detach_variable", "check_backward_validity",
           "get_device_states", "set_device_states"]


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


class _Recompute(Function):
    """The checkpointed outputs, passed through; its backward runs the
    function again for its side effects, where PyTorch's recomputation runs
    it, and passes the gradients on unchanged.  Its backward is tracec ops,
    so a compiled backward records it as it records a user's Function."""

    recordable = True

    @staticmethod
    def forward(ctx, function, args, kwargs, rng, *outs):
        ctx.replay = (function, args, kwargs, rng)
        return tuple(o.view_as(o) for o in outs) if len(outs) > 1 else outs[0].view_as(outs[0])

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
    """Run the modules of ``functions`` (a Sequential or a list) in order."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly.", stacklevel=2)
    mods = list(functions.children()) if hasattr(functions, "children") else list(functions)
    for m in mods:
        input = m(input)
    return input


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
