"""Returned views, rebuilt at each compiled call: a traced function that
returns a view of an argument, of state (a parameter, a buffer) or of a
tensor it also returns gets, at each compiled call, a real view of *this*
call's tensor, as eager code does -- never a copy.  A view of a tensor the
call made and does not return makes that tensor a result (unreturned), of
which the view is rebuilt, unless the view does not require grad and that
tensor does (``loss.detach()``: it would need a backward): then the view
is a value of its own.  A view at an offset read at run time
(``tracec.runtime_int``) is a value of its own too.

The tracer (``tracing.Recording.finish``) describes such a result as the
template ``("view", cell, how)``:

  * ``cell = [base, steps, sizes]``: ``base`` the template of the tensor the
    view is taken of (``("arg", path)``, ``("object", tensor)``, or the
    template of another returned tensor, itself maybe a view), ``steps``
    how to derive the view from it, ``sizes`` ``((symbol, arg path, dim),
    ...)`` for a symbolic trace whose steps hold sizes (else ``()``).
    ``steps`` None: the result is not rebuilt as a view, ``base`` is its
    own value's template (see above).
  * each step is ``("prim", prim, params)`` (a view primitive of the eager
    ``_view_chain``, replayed as ``prim.bind`` would: the same strides,
    offset, ``_base``, version counter and autograd node as eager),
    ``("detach",)`` (``detach()``), ``("data",)`` (``.data``: its own
    version counter), or ``("strided", shape, strides, offset, dtype)`` (an
    alias of another layout made by no recorded view op: byte strides and
    offset from the base's memory; a symbolic trace specializes its sizes).
  * ``how = (no_grad, name)``: ``no_grad``, the view was made in no_grad
    mode (it is replayed so, and keeps eager's no-grad-view marking); else
    it is replayed with grad mode on, so a view of a leaf that requires
    grad gets its view backward node, named ``name`` as eager named it.

Invariant: ``rebuild(cell, how, base, args, kwargs)`` returns a tensor that
shares ``base``'s memory and version counter exactly as the traced call's result
shared the traced base's (same shape, strides, storage offset, dtype),
with the symbolic sizes of ``params`` evaluated at this call's sizes.
"""
from __future__ import annotations

import functools

import numpy as np

from tracec import graph, symbolic
from tracec.pytree import resolve
from tracec.symbolic import Sym
from tracec.tensor import Size, Tensor, apply_direct, eager_direct

__all__ = ["rebuild", "substitute_steps", "has_sizes", "layout_of", "relayout"]


def _subst(v, size):
    """``v`` (a primitive's parameter) with each size ``s`` in it replaced by
    ``size(s)``."""
    if isinstance(v, Sym):
        return size(v)
    if type(v) is tuple or type(v) is list:
        return type(v)(_subst(x, size) for x in v)
    if type(v) is Size:
        return Size(_subst(x, size) for x in v)
    if type(v) is dict:
        return {k: _subst(x, size) for k, x in v.items()}
    return v


def _symbolic(v) -> bool:
    if isinstance(v, Sym):
        return True
    if isinstance(v, (tuple, list)):
        return any(_symbolic(x) for x in v)
    if type(v) is dict:
        return any(_symbolic(x) for x in v.values())
    return False


def has_sizes(steps) -> bool:
    """Do ``steps`` hold symbolic sizes?"""
    return any(s[0] == "prim" and _symbolic(s[2]) for s in steps or ())


def substitute_steps(steps, env: dict):
    """``steps`` with the trace's size equalities ``env`` applied."""
    def size(x):
        return symbolic.substitute(x, env)
    return tuple(("prim", s[1], _subst(s[2], size)) if s[0] == "prim" else s for s in steps)


def rebuild(cell, how, base: Tensor, args, kwargs) -> Tensor:
    """The view ``cell`` describes, of ``base`` (this call's tensor);
    ``how``: ``(no_grad, node name)`` (see the module docstring)."""
    no_grad, name = how
    _, steps, sizes = cell
    size = None
    if sizes:
        env = {name: resolve(path, args, kwargs)._data.shape[dim] for name, path, dim in sizes}
        size = functools.partial(symbolic.evaluate, env=env)
    # (the grad mode switched only where it differs: the context costs more
    # than a view)
    mode = None if bool(graph.is_grad_enabled()) is not bool(no_grad) else \
        graph.no_grad() if no_grad else graph.enable_grad()
    if mode is not None:
        mode.__enter__()
    try:
        v = base
        for step in steps:
            kind = step[0]
            if kind == "prim":
                prim = step[1]
                params = step[2] if size is None else _subst(step[2], size)
                if eager_direct(v):     # (what prim.bind does, without its dispatch)
                    v = apply_direct(prim, params, (v,), prim.impl(v._data, **params), v.dtype)
                else:
                    v = prim.bind(v, **params)
            elif kind == "detach":
                v = v.detach()
            elif kind == "data":
                v = v.data
            else:
                v = _strided(v, *step[1:])
    finally:
        if mode is not None:
            mode.__exit__(None, None, None)
    if name is not None and v._node is not None and hasattr(v._node, "_name"):
        v._node._name = name      # (x[0] is slice + reshape: eager names it Select)
    return v


def _strided(base: Tensor, shape, strides, offset, dtype) -> Tensor:
    """An alias of ``base``'s memory (as ``strided_views._alias``): ``shape``
    and byte ``strides`` from ``offset`` bytes past ``base``'s first element."""
    from tracec.strided_views import _alias, _root
    a = base._data
    owner = _owner(a)
    start = a.__array_interface__["data"][0] - owner.__array_interface__["data"][0] + offset
    arr = np.ndarray(shape, dtype.np, buffer=owner, offset=start, strides=strides)
    if not a.flags.writeable:
        arr.flags.writeable = False
    return _alias(_root(base), arr, dtype)


def free_sizes(steps) -> set:
    """The symbol names in ``steps``."""
    out: set = set()

    def walk(v):
        if isinstance(v, Sym):
            out.update(symbolic.free_symbols(v))
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif type(v) is dict:
            for x in v.values():
                walk(x)
    for s in steps:
        if s[0] == "prim":
            walk(s[2])
    return out


# --- in-place shape changes of inputs (unsqueeze_, t_, resize_, as_strided_) ------

def _addr(a) -> int:
    return a.__array_interface__["data"][0]


def _owner(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory (the end of its ``base`` chain)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def layout_of(now: np.ndarray, entry: np.ndarray):
    """How a traced call's in-place shape change turned an input's array
    ``entry`` into ``now``: ``("strided", shape, byte strides, byte offset
    from entry's first element, entry's byte strides)`` where ``now`` views
    ``entry``'s memory, else ``("fresh", shape)`` (``resize_`` past its
    storage: new memory)."""
    lo = _addr(entry)
    owner = _owner(entry)
    start, end = _addr(owner), _addr(owner) + owner.nbytes
    if now.size and np.may_share_memory(now, owner) and start <= _addr(now) < end:
        return ("strided", now.shape, now.strides, _addr(now) - lo, entry.strides)
    return ("fresh", now.shape)


def relayout(arr: np.ndarray, layout) -> np.ndarray:
    """``arr`` (this call's input array, laid out as the traced call's) as
    the traced call left it (``layout_of``): the same memory in a new shape,
    or, for ``"fresh"``, new memory of the new shape (the caller writes the
    values into it)."""
    if layout[0] == "fresh":
        return np.empty(layout[1], arr.dtype)
    _, shape, strides, offset, entry_strides = layout
    if arr.strides != entry_strides:
        raise RuntimeError(
            "tracec.compile: an in-place shape change (unsqueeze_, t_, resize_, as_strided_) of "
            f"an input traced with strides {entry_strides} cannot be replayed on one with "
            f"strides {arr.strides}: pass a tensor of the traced layout (.contiguous())")
    owner = _owner(arr)
    new = np.ndarray(shape, arr.dtype, buffer=owner, offset=_addr(arr) - _addr(owner) + offset,
                     strides=strides)
    if not arr.flags.writeable:
        new.flags.writeable = False
    return new
