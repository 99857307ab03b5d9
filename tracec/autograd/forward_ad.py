"""``torch.autograd.forward_ad``: dual tensors (``make_dual``,
``unpack_dual``, ``dual_level``).

tracec has no forward-mode engine; a tangent is computed when it is asked
for, by reverse mode twice (the "double-vjp" identity: with ``g(u) = Jᵀu``,
linear in ``u``, ``J t = ∂⟨g(u), t⟩/∂u``).  So every op between a dual and
the unpacked result must be twice differentiable, and each ``unpack_dual``
costs two backward passes (PyTorch's forward mode costs one forward).

A custom ``autograd.Function`` with a ``jvp`` enters these passes through
the transpose of its ``jvp`` (``Function.apply`` records it when a level is
open; ``graph.FORWARD_AD_BACKWARD`` says a pass is a tangent's), so that its
``jvp``, not its ``backward``, defines its tangents, as in PyTorch.

Invariants: ``make_dual(p, t)`` has ``p``'s values and requires grad (a
view of ``p`` when ``p`` requires grad, else a new leaf); its tangent is
``t`` itself when ``t`` has ``p``'s strides, else a copy with them; ``unpack_dual(y).tangent`` is
``Σ_duals J_{y,dual} · tangent``, or None when ``y`` depends on no dual of
the current level; duals are forgotten when their ``dual_level`` exits.
"""
from __future__ import annotations

import contextlib
from collections import namedtuple

from tracec import graph
from tracec.tensor import Tensor

__all__ = ["dual_level", "make_dual", "unpack_dual", "enter_dual_level", "exit_dual_level",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

# One list of (dual tensor, tangent) per open level (PyTorch allows one).
_LEVELS: list = []


def enter_dual_level() -> int:
    if _LEVELS:
        raise RuntimeError("Entering a new forward AD level but the current level is not "
                           "valid. Make sure you did not forget to exit the previous level.")
    _LEVELS.append([])
    return len(_LEVELS) - 1


def exit_dual_level(*, level=None) -> None:
    if not _LEVELS:
        raise RuntimeError("Trying to exit a forward AD level that was not entered")
    _LEVELS.pop()


@contextlib.contextmanager
def dual_level():
    """``with dual_level():`` — the scope in which duals exist."""
    level = enter_dual_level()
    try:
        yield level
    finally:
        exit_dual_level(level=level)


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    if not _LEVELS:
        raise RuntimeError("To create a dual Tensor, you must first enter a dual level with "
                           "`with fwAD.dual_level():`")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    if not tensor.dtype.is_floating_point:
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if tangent.stride() != tensor.stride():
        # PyTorch's rule: a tangent of another layout is copied into one
        # with the primal's metadata; otherwise it is used as it is
        from tracec.strided_views import empty_strided
        laid = empty_strided(tuple(tensor.shape), tensor.stride(), dtype=tangent.dtype)
        with graph.no_grad():
            laid.copy_(tangent)
        tangent = laid
    # a view of a primal that requires grad keeps its history (reverse mode
    # through a dual reaches the primal, as in PyTorch); otherwise a fresh
    # leaf, which requires grad so that tangents can be computed through it
    dual = tensor.view_as(tensor) if tensor.requires_grad else \
        tensor.detach().requires_grad_(True)
    _LEVELS[-1].append((dual, tangent))
    return dual


#: The inputs each enclosing ``torch.func.jvp`` / ``jacfwd`` tracks (their
#: tangents also come by reverse mode twice, tracec/func.py): a custom
#: Function computed from them contributes its jvp, as from a dual.
_FUNC_TANGENTS: list = []


@contextlib.contextmanager
def func_tangents(inputs):
    """While a ``torch.func`` forward-mode transform runs its function on
    ``inputs``: they carry tangents (``has_tangent``)."""
    _FUNC_TANGENTS.append(list(inputs))
    try:
        yield
    finally:
        _FUNC_TANGENTS.pop()


@contextlib.contextmanager
def tangent_pass():
    """A reverse-mode pass that computes tangents (``graph.FORWARD_AD_BACKWARD``):
    custom Functions give their jvp's transpose there, not their backward."""
    graph.FORWARD_AD_BACKWARD[0] += 1
    try:
        yield
    finally:
        graph.FORWARD_AD_BACKWARD[0] -= 1


def has_tangent(tensors) -> bool:
    """Whether any of ``tensors`` is, or was computed from, a dual of the
    open level or an input a ``torch.func`` forward-mode transform tracks
    (a walk of their graphs to those leaves or views)."""
    marked = [d for d, _ in (_LEVELS[-1] if _LEVELS else [])]
    marked += [x for inputs in _FUNC_TANGENTS for x in inputs]
    if not marked:
        return False
    ids = {id(d) for d in marked}
    nodes = {id(d._node) for d in marked if d._node is not None}
    if any(id(t) in ids for t in tensors):
        return True
    stack, seen = [graph.edge_of(t) for t in tensors], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in nodes:
            return True
        if isinstance(n, graph.AccumulateGrad):
            if id(n.variable) in ids:
                return True
            continue
        stack.extend(n.edges)
    return False


def unpack_dual(tensor: Tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``: the tangent by reverse mode twice."""
    duals = _LEVELS[-1] if _LEVELS else []
    primal = tensor.detach()
    for d, t in duals:
        if d is tensor:
            return UnpackedDualTensor(primal, t)
    if not duals or not tensor.requires_grad or not tensor.dtype.is_floating_point:
        return UnpackedDualTensor(primal, None)
    from tracec.autograd import grad
    with tangent_pass():
        return _tangent_by_reverse_mode(tensor, primal, duals, grad)


def _tangent_by_reverse_mode(tensor, primal, duals, grad) -> UnpackedDualTensor:
    with graph.enable_grad():
        u = primal.new_zeros(tuple(primal.shape)).requires_grad_(True)
        vjps = grad([tensor], [d for d, _ in duals], [u], retain_graph=True,
                    create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, (_, t) in zip(vjps, duals) if g is not None and g.requires_grad]
        if not pairs:
            used = any(g is not None for g in vjps)
            return UnpackedDualTensor(primal, primal.new_zeros(tuple(primal.shape)) if used
                                      else None)
        tangent, = grad([g for g, _ in pairs], [u], [t.detach().to(g.dtype) for g, t in pairs],
                        retain_graph=True, allow_unused=True)
    if tangent is None:
        tangent = primal.new_zeros(tuple(primal.shape))
    return UnpackedDualTensor(primal, tangent.detach())
