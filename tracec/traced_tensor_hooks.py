"""Tensor hooks on non-leaf tensors (``h.register_hook(fn)``,
``h.retain_grad()``) in a backward that a compiled function runs.

Such a backward is recorded from the eager engine's run (tracing's
``_record_eager_backward``, as for a user ``autograd.Function``): the engine
calls each hook once, on the traced gradient of the whole node, so the
hook's tensor ops (``g * 2``, ``-g``, ``g.clamp(-1, 1)``) become ops of the
trace -- the hook is the VJP of an identity, recorded where it runs.
Invariant: a hook the trace keeps is a pure function of its gradient.  A
compiled call does not run Python, so a hook that leaves the gradient (or a
tensor it made) in Python state -- a list, a dict, an attribute -- is
refused (``checked``) and the call runs eagerly.  ``retain_grad``'s own
hook stores the gradient in ``h.grad``; a returned ``h`` carries that
value at each compiled call (tracing's ``("retained", ..)`` template).  A
backward outside the compiled call cannot run a hook registered inside
it: such a call runs eagerly (tracing's ``_user_function_behind``)."""
from __future__ import annotations

import types

from tracec.tensor import Tensor


def hooked_nodes(nodes) -> list:
    """The graph nodes among ``nodes`` (met by a backward) that hold
    ``Tensor.register_hook`` / ``retain_grad`` hooks, each once."""
    out, seen = [], set()
    for n in nodes:
        if getattr(n, "pre_hooks", None) and id(n) not in seen and not hasattr(n, "variable"):
            seen.add(id(n))
            out.append(n)
    return out


def hook_name(hook) -> str:
    """``the hook <name> (file:line)``: where the user wrote it."""
    fn = getattr(hook, "__wrapped__", hook)
    if getattr(fn, "_retains_grad", False):
        return "retain_grad()"
    code = getattr(fn, "__code__", None)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return f"the tensor hook {getattr(fn, '__qualname__', repr(fn))}{where}"


def _state_of(hook, depth=2) -> list:
    """The Python objects ``hook`` can reach to keep something: its
    closure's cells, its defaults, the globals its code names, the object
    of a bound method; and those of the functions its closure holds (a
    wrapper's: a multi-output Function's slot hook), ``depth`` deep."""
    fn = getattr(hook, "__func__", hook)
    roots = [getattr(hook, "__self__", None), *(getattr(fn, "__defaults__", None) or ())]
    for c in getattr(fn, "__closure__", None) or ():
        try:
            roots.append(c.cell_contents)
        except ValueError:      # (an empty cell)
            pass
    code, glob = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    for name in (code.co_names if code is not None else ()):
        if name in glob:
            roots.append(glob[name])
    inner = [r for r in roots if isinstance(r, types.FunctionType)] if depth else ()
    return [r for r in roots if r is not None] + [x for f in inner for x in _state_of(f, depth - 1)]


def _tensors_in(roots, depth=4, budget=20000) -> dict:
    """id -> tensor of the tensors in ``roots``, their lists, tuples, sets,
    dicts and object attributes, ``depth`` levels down (at most ``budget``
    containers looked at: what a hook keeps is near its closure)."""
    found, seen, level = {}, set(), list(roots)
    for _ in range(depth):
        nxt = []
        for x in level:
            if isinstance(x, Tensor):
                found[id(x)] = x
                continue
            if id(x) in seen or isinstance(x, (str, bytes, int, float, type,
                                               types.ModuleType, types.FunctionType)):
                continue
            seen.add(id(x))
            if len(seen) > budget:
                return found
            if isinstance(x, dict):
                nxt.extend(x.values())
            elif isinstance(x, (list, tuple, set, frozenset)):
                nxt.extend(x)
            elif isinstance(getattr(x, "__dict__", None), dict):
                nxt.extend(vars(x).values())
        level = nxt
    found.update((id(x), x) for x in level if isinstance(x, Tensor))
    return found


def checked(hook, refuse):
    """``hook`` wrapped for the engine's recorded run: ``refuse(why)`` is
    called if, when it returns, the Python state it can reach
    (``_state_of``) holds a tensor it did not before (the gradient, a
    tensor computed from it): a compiled call would not update it."""
    if getattr(hook, "_retains_grad", False):
        return hook     # (stores g in h.grad: returned as the "retained" template says)

    def run(g):
        before = _tensors_in(_state_of(hook))
        r = hook(g)
        if set(_tensors_in(_state_of(hook))) - set(before):
            refuse(f"{hook_name(hook)} keeps its gradient, or a tensor it computed, in "
                   "Python state (a list, a dict, an attribute)")
        return r
    run.__wrapped__ = hook
    return run


def wrap_hooks(nodes, refuse):
    """Each node's pre-hooks replaced by ``checked`` ones; returns the
    function that puts the user's hooks back (after the recorded run)."""
    saved = []
    for n in nodes:
        saved.append((n, list(n.pre_hooks)))
        n.pre_hooks[:] = [checked(h, refuse) for h in n.pre_hooks]

    def restore():
        for n, hooks in saved:
            n.pre_hooks[:] = hooks
    return restore
