"""The call-side fast path of a compiled function: the common call (tensor
arguments only) matched against the last entry it ran, without building
the full ``call_key``.

``CompiledFunction.__call__`` computes ``call_key(args, kwargs)`` (the
arguments' structure, each tensor's shape, dtype and requires_grad, which
tensors alias, the grad mode) and looks it up.  For a call with positional
tensors only, none a view, all distinct, that key is a function of the
tensors' shapes, dtypes and requires_grad, the grad mode, the default
dtype and the autocast state (off: keys made under autocast keep the general path) alone.
``matcher(key, n)`` turns such a key into Python code that checks exactly
those (specialized by ``exec``, as Dynamo compiles its guards into
Python), so a call costs a handful of attribute reads.

Invariant: ``matcher(key, n)(args)`` is True only if ``call_key(args, {})
== key``; it is None for keys it does not handle (containers, Python
values, aliased or view arguments), which keep the general path.
"""
from __future__ import annotations

from tracec import autocast_mode, graph
from tracec import dtypes as dt
from tracec.tensor import Tensor

__all__ = ["matcher"]


def _plain_tensor_key(key, n: int) -> bool:
    spec, tensors, _, amp, _ = key
    if spec != (("T",) * n, ()) or len(tensors) != n or amp:   # (autocast off only)
        return False
    # each argument its own tensor and its own storage root (no aliasing)
    return all(t[3] == i and t[4] == i for i, t in enumerate(tensors))


def matcher(key, n: int):
    """A function ``(args) -> bool`` deciding ``call_key(args, {}) == key``
    for ``n`` positional tensor arguments, or None (see the module
    docstring)."""
    if not _plain_tensor_key(key, n):
        return None
    _, tensors, grad_mode, _, default = key
    names = [f"a{i}" for i in range(n)]
    env = {"Tensor": Tensor, "_state": graph._state, "_autocast": autocast_mode.ACTIVE,
           "_default": dt._default_float, "DEFAULT": default}
    lines = ["def match(args):",
             f"    if len(args) != {n} or _state.grad is not {bool(grad_mode)} or _autocast"
             " or _default[0] is not DEFAULT:",
             "        return False"]
    if n:
        lines.append(f"    {', '.join(names)}{',' if n == 1 else ''} = args")
    for i, (shape, dtype, rg, _, _) in enumerate(tensors):
        env[f"d{i}"] = dtype
        a = names[i]
        lines += [f"    if (type({a}) is not Tensor or {a}._base is not None"
                  f" or {a}.dtype is not d{i} or {a}.requires_grad is not {bool(rg)}"
                  f" or {a}._data.shape != {tuple(shape)!r}):",
                  "        return False"]
    if n > 1:
        # distinct objects (distinct roots follow: none is a view)
        distinct = (" and ".join(f"{names[i]} is not {names[j]}" for i in range(n)
                                 for j in range(i + 1, n))
                    if n <= 4 else f"len(set(map(id, args))) == {n}")
        lines.append(f"    return {distinct}")
    else:
        lines.append("    return True")
    exec("\n".join(lines), env)   # noqa: S102 - code made above from the key's own values
    return env["match"]
