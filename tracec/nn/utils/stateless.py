"""``tracec.nn.utils.stateless.functional_call``: call a module with some of
its parameters and buffers replaced by given tensors (PyTorch's deprecated
spelling of ``torch.func.functional_call``).

Invariants (PyTorch's): the replacement holds only during the call (the
originals are back afterwards, even if the call raises); with
``tie_weights`` a tensor given for one of several tied names (one object
registered under several names) replaces all of them; with ``strict`` the
given names must be exactly the module's parameters and buffers.
"""
from __future__ import annotations

import contextlib
import warnings

from tracec.nn.modules.module import Module

__all__ = ["functional_call"]


def _named_tensors(module: Module) -> dict:
    out = dict(module.named_parameters(remove_duplicate=False))
    out.update(module.named_buffers(remove_duplicate=False))
    return out


def _untie(module: Module, given: dict) -> dict:
    """``given`` extended to every name tied to a given one."""
    groups: dict = {}
    for name, t in _named_tensors(module).items():
        groups.setdefault(id(t), set()).add(name)
    tied = {n: names for names in groups.values() if len(names) > 1 for n in names}
    given_tied = {n for n in given if n in tied}
    for name in given_tied:
        names = tied[name]
        if (len(names & given_tied) > 1
                and len({id(given[n]) for n in names if n in given}) != 1):
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             "which are tied. Consider using tie_weights=False")
    out = dict(given)
    for name in given_tied:
        for other in tied[name]:
            out[other] = given[name]
    return out


def _swap(module: Module, name: str, tensor):
    """Put ``tensor`` at dotted ``name``; returns what was there."""
    path, _, leaf = name.rpartition(".")
    mod = module.get_submodule(path)
    for table in (mod._parameters, mod._buffers):
        if leaf in table:
            orig, table[leaf] = table[leaf], tensor
            return orig
    orig = getattr(mod, leaf, None)
    object.__setattr__(mod, leaf, tensor)
    return orig


@contextlib.contextmanager
def _reparametrize_module(module: Module, tensors: dict, tie_weights: bool = False,
                          strict: bool = False):
    if tie_weights:
        tensors = _untie(module, tensors)
    if strict:
        have = set(_named_tensors(module))
        unexpected = sorted(set(tensors) - have)
        missing = sorted(have - set(tensors))
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
                module._get_name(), "\n\t".join(msgs)))
    originals = {}
    try:
        for name, t in tensors.items():
            originals[name] = _swap(module, name, t)
        yield
    finally:
        for name, t in reversed(list(originals.items())):
            _swap(module, name, t)


def functional_call(module: Module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """``module(*args, **kwargs)`` with ``parameters_and_buffers`` (a dict,
    or a tuple of dicts with distinct keys) in place of its own."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    return call_with(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                     strict=strict)


def call_with(module: Module, parameters_and_buffers, args=None, kwargs=None, *,
              tie_weights: bool = True, strict: bool = False):
    """``functional_call`` without its deprecation warning (the body of
    ``tracec.func.functional_call``)."""
    if isinstance(parameters_and_buffers, (list, tuple)):
        merged: dict = {}
        for d in parameters_and_buffers:
            dup = set(merged) & set(d)
            if dup:
                raise ValueError(f"{sorted(dup)} appeared in multiple dictionaries; behavior "
                                 "of functional call is ambiguous")
            merged.update(d)
        parameters_and_buffers = merged
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    with _reparametrize_module(module, dict(parameters_and_buffers), tie_weights, strict):
        return module(*args, **(kwargs or {}))
