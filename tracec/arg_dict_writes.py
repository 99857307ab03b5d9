"""Tensors a traced call stores into a dict among its arguments, replayed.

A ``forward`` that writes its results into the dict it was given (SchNet's
``inputs["energy"] = y``, a batch dict filled with predictions) changed an
argument container in place, which compiled calls would not repeat.
``find`` tells such stores apart from other changes of the arguments: each
compiled call stores its own result into *that call's* dict (the owner is
an ``ArgDict``, resolved against the call's arguments by
``compiled_entry``), as eager code does.

Invariant: ``find`` returns writes only when the sole changes of the
arguments are string-keyed entries of argument dicts (at any depth of
tuples, lists and dicts) set to tensors: new keys appended, or a tensor
entry replaced by another; everything else before the call is still there,
the same objects at the same paths.  Any other change: None (the caller
refuses the trace as before).
"""
from __future__ import annotations

from tracec.pytree import flatten, resolve
from tracec.tensor import Tensor

__all__ = ["ArgDict", "find", "owner"]


class ArgDict:
    """The dict at ``path`` in a call's arguments (``pytree.resolve``)."""

    __slots__ = ("path",)

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"ArgDict({self.path!r})"


def owner(o, args, kwargs):
    """``o`` itself, or, an ``ArgDict``, this call's dict at its path."""
    return resolve(o.path, args, kwargs) if type(o) is ArgDict else o


def find(args, kwargs, spec, leaves) -> list | None:
    """``[(ArgDict, key, tensor)]`` stored by the call (see the module
    docstring), or None."""
    before = {p: t for p, t in leaves}
    out: list = []
    pos, kw = spec
    try:
        for i, s in enumerate(pos):
            if not _walk(args[i], s, (i,), before, out):
                return None
        for k, s in kw:
            if not _walk(kwargs[k], s, (k,), before, out):
                return None
    except (IndexError, KeyError):
        return None
    return out or None


def _same(x, s, path, before) -> bool:
    leaves: list = []
    if flatten(x, path, leaves) != s:
        return False
    return all(before.get(p) is t for p, t in leaves)


def _walk(x, s, path, before, out) -> bool:
    if type(s) is tuple and s and s[0] == "d" and isinstance(x, dict) and type(x) is s[1]:
        keys = [k for k, _ in s[2]]
        now = list(x)
        if now[:len(keys)] != keys:
            return False
        for k, sub in s[2]:
            v = x[k]
            p = path + (("k", k),)
            if sub == "T" and isinstance(v, Tensor) and v is not before.get(p):
                if type(k) is not str or v.dtype.category == 3:
                    return False
                out.append((ArgDict(path), k, v))
            elif not _walk(v, sub, p, before, out):
                return False
        for k in now[len(keys):]:
            v = x[k]
            if type(k) is not str or not isinstance(v, Tensor) or v.dtype.category == 3:
                return False
            out.append((ArgDict(path), k, v))
        return True
    if type(s) is tuple and s and s[0] in ("t", "l") and type(x) in (tuple, list) \
            and len(x) == len(s[1]):
        return all(_walk(v, sub, path + (("i", j),), before, out)
                   for j, (v, sub) in enumerate(zip(x, s[1])))
    return _same(x, s, path, before)
