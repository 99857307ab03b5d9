"""The initial state a built library carries: the values of the step's
state buffers as they were before the build ran the step (after an
optional ``--weights`` checkpoint was loaded), packed into one blob.

Invariants: the snapshot is taken before the step first runs (tracing to
its steady state trains the model a few steps); optimizer state and
gradients created by the build are fresh, so they start as zeros (not
stored in the blob); every stored value has its buffer's shape and dtype.
"""
from __future__ import annotations

import numpy as np

from tracec.aot.plan import scope_objects
from tracec.tensor import Tensor

ALIGN = 64


class WeightsError(ValueError):
    pass


def _flat(msg: str) -> str:
    return " ".join(str(msg).split())


def load_weights(fn, path: str) -> list[str]:
    """Load the checkpoint ``path`` (``tracec.save``, ``torch.save`` or
    safetensors) into the
    modules (and optimizers) ``fn`` reaches; returns what was loaded.

    Accepted: one module's ``state_dict()`` (the only module in scope, or
    the one whose keys it matches), keys prefixed by a module's variable
    name (``model.0.weight``), or a dict of such state dicts by variable
    name (``{"model": ..., "opt": ...}``; an optimizer's state dict too), or
    a training checkpoint holding them under other names
    (``_training_checkpoint``)."""
    from tracec import nn, optim
    from tracec.serialization import load
    try:
        obj = load(path)
    except Exception as e:
        raise WeightsError(f"--weights {path}: {_flat(e)}") from None
    if not isinstance(obj, dict):
        raise WeightsError(f"--weights {path}: expected a state dict, got {type(obj).__name__}")
    scopes = scope_objects(fn)
    modules = {v: o for v, o in scopes.items() if isinstance(o, nn.Module)}
    opts = {v: o for v, o in scopes.items() if isinstance(o, optim.Optimizer)}
    if not modules:
        raise WeightsError(f"--weights {path}: {getattr(fn, '__name__', 'the function')} "
                           "reaches no nn.Module to load it into")
    plan = []
    if all(isinstance(v, Tensor) for v in obj.values()):
        keys = set(obj)
        exact = [v for v, m in modules.items() if set(m.state_dict()) == keys]
        for var, m in modules.items():
            sub = {k[len(var) + 1:]: v for k, v in obj.items() if k.startswith(var + ".")}
            if sub:
                plan.append((var, m, sub))
        if len(exact) == 1:
            plan = [(exact[0], modules[exact[0]], obj)]
        elif sum(len(sd) for _, _, sd in plan) != len(obj):
            if len(modules) != 1:
                raise WeightsError(f"--weights {path}: its keys match none of the modules "
                                   f"{', '.join(modules)} (nor '<module>.<key>')")
            plan = [(var, m, obj) for var, m in modules.items()]   # its own error
    else:
        for var, o in {**modules, **opts}.items():
            if isinstance(obj.get(var), dict):
                plan.append((var, o, obj[var]))
        if not plan:
            plan = _training_checkpoint(obj, modules, opts)
        if not plan:
            raise WeightsError(f"--weights {path}: no entry named after "
                               f"{', '.join(list(modules) + list(opts))}, and no entry whose "
                               "keys are a module's state_dict keys")
    for var, o, sd in plan:
        try:
            o.load_state_dict(sd)
        except Exception as e:
            raise WeightsError(f"--weights {path}: loading {var}: {_flat(e)}") from None
    return [var for var, _, _ in plan]


def _training_checkpoint(obj: dict, modules: dict, opts: dict) -> list:
    """The state dicts of a training checkpoint saved under other names
    (PyTorch's tutorial: ``{"epoch": 3, "model_state_dict": ...,
    "optimizer_state_dict": ..., "loss": ...}``): each module's is the one
    entry whose keys are its ``state_dict()``'s; the optimizer's, with one
    optimizer in scope and a module found, the one entry holding ``state``
    and ``param_groups``."""
    entries = {k: v for k, v in obj.items() if isinstance(v, dict)}
    plan = []
    for var, m in modules.items():
        keys = set(m.state_dict())
        hits = [k for k, v in entries.items() if set(v) == keys]
        if len(hits) == 1:
            plan.append((var, m, entries[hits[0]]))
    saved = [v for v in entries.values() if {"state", "param_groups"} <= set(v)]
    if plan and len(opts) == 1 and len(saved) == 1:
        plan += [(var, o, saved[0]) for var, o in opts.items()]
    return plan


def snapshot(fn) -> dict:
    """``id(tensor) -> a copy of its values`` for every tensor ``fn``
    reaches now (parameters, buffers, existing optimizer state, RNG states)."""
    return {id(t): np.array(t.detach().numpy(), copy=True) for t in _reachable_tensors(fn)}


def _reachable_tensors(fn):
    from tracec import nn, optim
    from tracec.creation import Generator, default_generator
    yield default_generator.state
    for obj in scope_objects(fn).values():
        if isinstance(obj, nn.Module):
            yield from obj.parameters()
            yield from obj.buffers()
        elif isinstance(obj, Tensor):
            yield obj
        elif isinstance(obj, Generator):
            yield obj.state
        elif isinstance(obj, optim.Optimizer):
            for st in obj.state.values():
                yield from (v for v in st.values() if isinstance(v, Tensor))


def initial_blob(bufs, snap) -> tuple[bytes, dict]:
    """``(blob, {buffer name: byte offset, or None for zeros})`` for the
    state buffers: snapshot values, zeros for fresh optimizer state and
    gradients, the value after the build for hyperparameter holders (the
    optimizer's learning rate) and anything else the build created."""
    parts, where, size = [], {}, 0
    for b in bufs:
        if not b.is_state:
            continue
        if b.kind == "gradient" or (b.kind == "optimizer_state" and id(b.obj) not in snap):
            where[b.name] = None
            continue
        # A hyperparameter holder is refreshed from the optimizer at each
        # call: its value now is the learning rate (before the build, zero).
        value = snap.get(id(b.obj)) if b.kind != "hyperparameter" else None
        if value is None:
            value = b.obj.detach().numpy()
        a = np.array(value, dtype=np.dtype(b.dtype.np), order="C")
        if a.shape != b.shape:
            raise ValueError(f"the initial value of {b.source} has shape {a.shape}, "
                             f"the step's buffer {b.shape}")
        pad = -size % ALIGN
        parts.append(b"\0" * pad)
        size += pad
        where[b.name] = size
        parts.append(a.tobytes())
        size += a.nbytes
    return b"".join(parts), where
