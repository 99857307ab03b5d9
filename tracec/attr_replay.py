"""Module attributes a traced call sets (llama2.c's ``self.last_loss =
F.cross_entropy(...)`` in ``forward``): compiled calls set them likewise, so
they are no side effect to refuse.

Invariant: the guards of a trace that set an attribute keep, for it, only
whether it held None when the call began (``ReplayedAttr``), since each call
leaves a new tensor there; a trace that read the tensor it found there
keeps a token that never matches (its value is baked in as that tensor).
"""
from __future__ import annotations

from tracec.nn.modules.module import Module, replayed_token

__all__ = ["modules", "coarsen", "coarsen_module_guards"]


def modules(attr_writes: dict) -> dict:
    """``{id(module): names}`` of the attributes a call set
    (``attr_writes``: ``(id, name) -> (module, name, value)``)."""
    mods: dict = {}
    for module, name, _ in attr_writes.values():
        mods.setdefault(id(module), set()).add(name)
    return mods


def coarsen(v, mods: dict, token):
    """A guard snapshot value (``EnvGuard``'s, nested) with each set
    attribute's entry of the modules ``mods`` made ``token(entry)``
    (dropped where that is None)."""
    if type(v) is not tuple:
        return v
    if len(v) == 3 and type(v[0]) is str and v[0] == "M" and v[1] in mods:
        names = mods[v[1]]
        p, b, attrs = v[2]
        attrs = [a if a[0] not in names else token(a) for a in attrs]
        return ("M", v[1], (p, b, [a for a in attrs if a is not None]))
    return tuple(coarsen(x, mods, token) for x in v)


def coarsen_module_guards(guards: list, mods: dict, read: set) -> list:
    """``guards`` with the ``Module.mode_and_tensors`` snapshots taken before
    the call set attributes holding their ``ReplayedAttr`` tokens (``read``:
    ids of the tensors the trace read)."""
    out = []
    for snap, value in guards:
        owner = getattr(snap, "__self__", None)
        if isinstance(owner, Module) and id(owner) in mods and \
                getattr(snap, "__name__", "") == "mode_and_tensors":
            names = mods[id(owner)]
            p, b, attrs = value
            value = (p, b, [replayed_token(a, read) if a[0] in names else a for a in attrs])
        out.append((snap, value))
    return out
