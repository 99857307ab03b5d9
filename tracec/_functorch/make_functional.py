"""functorch's ``make_functional`` / ``make_functional_with_buffers`` /
``combine_state_for_ensemble`` (``torch._functorch.make_functional``).

``make_functional(model)`` deep-copies ``model``, takes the copy's
parameters out (each distinct one once, in ``named_parameters`` order; the
copy keeps meta-device stand-ins) and returns ``(fmodel, params)``, where
``fmodel(params, *args)`` runs the copy with ``params`` in place (every
name a tied parameter has gets its tensor).  The ``_with_buffers`` form
does the same for buffers too: ``fmodel(params, buffers, *args)``."""
from __future__ import annotations

import copy

from tracec import graph
from tracec.creation import empty_like
from tracec.func import functional_call
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter
from tracec.shape_ops import stack

__all__ = ["FunctionalModule", "FunctionalModuleWithBuffers", "make_functional",
           "make_functional_with_buffers", "combine_state_for_ensemble", "extract_weights",
           "extract_buffers"]


def _set(mod: Module, name: str, value) -> None:
    *path, last = name.split(".")
    for p in path:
        mod = getattr(mod, p)
    if last in mod._parameters:
        mod._parameters[last] = value
    elif last in mod._buffers:
        mod._buffers[last] = value
    else:
        setattr(mod, last, value)


def _extract(mod: Module, named, make):
    """``(tensors, names, names_map)``: the distinct tensors of
    ``named(remove_duplicate=False)`` with their first names, and each
    first name's list of all names; ``mod`` keeps meta stand-ins."""
    every = list(named(remove_duplicate=False))
    first: dict = {}
    names_map: dict = {}
    for name, t in every:
        key = first.setdefault(id(t), name)
        names_map.setdefault(key, []).append(name)
    tensors = {id(t): t for _, t in every}
    stand_in: dict = {}
    for name, t in every:
        if id(t) not in stand_in:
            stand_in[id(t)] = make(empty_like(t, device="meta"))
        _set(mod, name, stand_in[id(t)])
    names = tuple(dict.fromkeys(first[id(t)] for _, t in every))
    return tuple(tensors[i] for i in dict.fromkeys(id(t) for _, t in every)), names, names_map


def extract_weights(mod: Module):
    return _extract(mod, mod.named_parameters, Parameter)


def extract_buffers(mod: Module):
    return _extract(mod, mod.named_buffers, lambda t: t)


def _mapping(names, names_map, tensors) -> dict:
    out = {}
    for name, t in zip(names, tensors):
        for alias in names_map.get(name, [name]):
            out[alias] = t
    return out


class FunctionalModule(Module):
    """What ``make_functional`` returns: ``fmodel(params, *args, **kwargs)``."""

    def __init__(self, stateless_model, param_names, names_map):
        super().__init__()
        self.stateless_model = stateless_model
        self.param_names = param_names
        self.names_map = names_map

    @staticmethod
    def _create_from(model, disable_autograd_tracking=False):
        model_copy = copy.deepcopy(model)
        params, param_names, names_map = extract_weights(model_copy)
        if disable_autograd_tracking:
            for p in params:
                p.requires_grad_(False)
        return FunctionalModule(model_copy, param_names, names_map), params

    def forward(self, params, *args, **kwargs):
        mapping = _mapping(self.param_names, self.names_map, tuple(params))
        return functional_call(self.stateless_model, mapping, args, kwargs)


class FunctionalModuleWithBuffers(Module):
    """What ``make_functional_with_buffers`` returns:
    ``fmodel(params, buffers, *args, **kwargs)``."""

    def __init__(self, stateless_model, param_names, buffer_names, param_names_map,
                 buffer_names_map):
        super().__init__()
        self.stateless_model = stateless_model
        self.param_names = param_names
        self.buffer_names = buffer_names
        self.all_names_map = dict(param_names_map)
        self.all_names_map.update(buffer_names_map)

    @staticmethod
    def _create_from(model, disable_autograd_tracking=False):
        model_copy = copy.deepcopy(model)
        params, param_names, param_names_map = extract_weights(model_copy)
        buffers, buffer_names, buffer_names_map = extract_buffers(model_copy)
        if disable_autograd_tracking:
            for p in params:
                p.requires_grad_(False)
        return (FunctionalModuleWithBuffers(model_copy, param_names, buffer_names,
                                            param_names_map, buffer_names_map),
                params, buffers)

    def forward(self, params, buffers, *args, **kwargs):
        mapping = _mapping(self.param_names, self.all_names_map, tuple(params))
        mapping.update(_mapping(self.buffer_names, self.all_names_map, tuple(buffers)))
        return functional_call(self.stateless_model, mapping, args, kwargs)


def make_functional(model, disable_autograd_tracking=False):
    if len(list(model.buffers())) > 0:
        raise RuntimeError("make_functional(model): `model` has buffers. Please use "
                           "make_functional_with_buffers(model) instead.")
    return FunctionalModule._create_from(model, disable_autograd_tracking)


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    return FunctionalModuleWithBuffers._create_from(model, disable_autograd_tracking)


def _transpose_stack(groups) -> tuple:
    with graph.no_grad():
        return tuple(stack(list(shards)).detach() for shards in zip(*groups))


def combine_state_for_ensemble(models):
    """``(fmodel, params, buffers)``: the models' states stacked on a new
    leading dim (detached), for ``vmap(fmodel)``."""
    if len(models) == 0:
        raise RuntimeError("combine_state_for_ensemble: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to have the same "
                           "training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to be of the same "
                           "class.")
    funcs, params, buffers = zip(*[make_functional_with_buffers(m) for m in models])
    return funcs[0], _transpose_stack(params), _transpose_stack(buffers)
