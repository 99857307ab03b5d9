"""Which ATen ops tracec's eager composites stand for, told to observers
that count by PyTorch's op names (``tracec.utils.flop_counter``).

PyTorch's ``FlopCounterMode`` sees the ATen ops a call dispatches to
(``F.linear`` on a 3-D input is one ``aten.addmm`` on its flattened view,
``x @ w`` with a 2-D ``w`` one folded ``aten.mm``, 4-D ``q @ k.mT`` one
``aten.bmm``); tracec computes the same products with its own primitives.
A composite decorated with ``@reports(describe)`` tells each listener in
``LISTENERS``, after it ran, ``(calls, out)``: the ``AtenCall`` list that
``describe(out, *args, **kwargs)`` gives, in PyTorch's order, for PyTorch's op name, its operand
shapes, and which operands require grad (so an observer knows which
gradients PyTorch's backward computes).

Invariants: composites called inside a reporting one report nothing (the
outer call is PyTorch's whole op); with no listener a decorated composite
costs one list check; ``describe`` reads shapes and flags only, never data.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

__all__ = ["AtenCall", "LISTENERS", "reports", "matmul_calls", "tensor_matmul_calls"]

#: callables ``(calls: list[AtenCall], out) -> None``
LISTENERS: list = []
_DEPTH = [0]


class AtenCall(NamedTuple):
    """One ATen op: ``name`` (``"mm"``, ``"addmm"``, ``"bmm"``,
    ``"convolution"``), ``shapes`` (its operands' shapes as the op sees
    them, and for a convolution the output's shape and ``transposed``), and
    ``needs_grad``: per differentiable operand, whether it requires grad."""
    name: str
    shapes: tuple
    needs_grad: tuple


def reports(describe):
    """Decorate a composite so that listeners hear the ATen ops it stands for."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not LISTENERS:
                return fn(*args, **kwargs)
            _DEPTH[0] += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                calls = describe(out, *args, **kwargs)
                if calls:
                    for listener in list(LISTENERS):
                        listener(calls, out)
            return out
        return wrapper
    return deco


def _folds(shape, strides, small_requires_grad: bool) -> bool:
    """ATen's ``should_fold``: whether ``matmul`` of a >= 3-D operand (of
    ``shape`` / ``strides``) with a 1-D / 2-D one becomes one ``mm`` / ``mv``
    on the big one flattened: when the small operand requires grad, or when
    flattening needs no copy (its leading dimensions contiguous)."""
    if small_requires_grad or math.prod(shape) == 0:
        return True
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 1))


def matmul_calls(sa: tuple, sb: tuple, ra: bool, rb: bool, a_strides=None) -> list:
    """The ATen product ``torch.matmul`` of operands of shapes ``sa``, ``sb``
    (requiring grad: ``ra``, ``rb``) dispatches to: ``mm`` for 2-D operands,
    for 1-D by 2-D and for a folded >= 3-D by 2-D pair (``a_strides``: the
    big operand's strides, None for contiguous); ``bmm`` over the broadcast
    batch otherwise; nothing PyTorch counts for ``dot`` / ``mv``."""
    sa, sb = tuple(sa), tuple(sb)
    da, db = len(sa), len(sb)
    if da == 2 and db == 2:
        return [AtenCall("mm", (sa, sb), (ra, rb))]
    if da == 1 and db == 2:
        return [AtenCall("mm", ((1,) + sa, sb), (ra, rb))]
    if db == 1 and da <= 2:
        return []
    if da >= 3 and db <= 2:
        strides = a_strides if a_strides is not None else _contiguous_strides(sa)
        if _folds(sa, strides, rb):
            return [] if db == 1 else [
                AtenCall("mm", ((math.prod(sa[:-1]), sa[-1]), sb), (ra, rb))]
    if db >= 3 and da == 2 and ra:
        # (b.mT flattened) @ a.mT: one mm of the same size
        return [AtenCall("mm", ((math.prod(sb[:-2]) * sb[-1], sb[-2]), (sa[1], sa[0])),
                         (rb, ra))]
    ba = sa[:-2] if da >= 2 else ()
    bb = sb[:-2] if db >= 2 else ()
    n = max(len(ba), len(bb))
    ba, bb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
    batch = math.prod(max(x, y) for x, y in zip(ba, bb))
    m, k = (sa[-2], sa[-1]) if da >= 2 else (1, sa[0])
    k2, p = (sb[-2], sb[-1]) if db >= 2 else (sb[0], 1)
    return [AtenCall("bmm", ((batch, m, k), (batch, k2, p)), (ra, rb))]


def tensor_matmul_calls(a, b) -> list:
    """``matmul_calls`` for the tensors ``a`` and ``b``."""
    return matmul_calls(tuple(a.shape), tuple(b.shape), a.requires_grad, b.requires_grad,
                        a.stride() if a.ndim >= 3 else None)


def _contiguous_strides(shape) -> tuple:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))
