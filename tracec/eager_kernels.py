"""The compiler's kernels for eager composites (``tracec.fused_eager``).

``kernels(key, composite, dtype, ranks)`` compiles, for the cpu backend
with every size symbolic (``dynamic=True``), two functions of tensors of
those ranks: ``forward(*xs) = composite(*xs)`` and ``vjp(*xs, g)``, the
gradients of ``composite`` at ``xs`` for the (flat) cotangent ``g`` as the
primitives' VJPs compose them.  Each is traced once per process at small
examples (``_examples``: cheap, the trace runs the primitives eagerly)
and compiled once per machine: the disk cache serves later processes, so a
new process pays a trace and a load, not LLVM.

Invariants: a pair is made once per ``(key, dtype, ranks)`` per process, under a
lock (eager code may run in several threads); a failure to make it is
remembered and answered with None, so the eager op runs its NumPy path
(same values) and the failure is reported once as a warning, never as a
wrong result.
"""
from __future__ import annotations

import re
import threading
import warnings

import numpy as np

from tracec import graph
from tracec.autograd import grad as _grad
from tracec.compiler import compile as _compile
from tracec.tensor import Tensor

__all__ = ["kernels"]

#: The traced example's size: large enough that no size rule treats it as
#: special (0 and 1 broadcast), small enough that tracing costs nothing.
_TRACE_NUMEL = 64
_lock = threading.Lock()
_made: dict = {}     # (key, dtype name) -> (forward, vjp) or None after a failure


def kernels(key: tuple, composite, dtype, ranks: tuple = (1,), examples=None):
    """``(forward, vjp)`` on NumPy arrays for ``composite`` at ``dtype``
    with operands of ``ranks``, traced at ``examples`` (shapes; None: see
    ``_examples``), or None where they could not be made (see the
    module's invariants)."""
    k = (key, dtype.name, ranks)
    try:
        return _made[k]
    except KeyError:
        pass
    with _lock:
        if k not in _made:
            _made[k] = _make(key, composite, dtype, ranks, examples)
        return _made[k]


def _examples(dtype, ranks, shapes=None):
    """Traced examples: ``shapes``, or the leading operand ``(4, .., 16)``
    and the others its trailing dimensions (a weight broadcast over the
    rows); sizes other than 0 and 1, which size rules treat as special."""
    full = (4,) * (ranks[0] - 1) + (_TRACE_NUMEL // 4 ** (ranks[0] - 1),)
    xs = []
    for i, r in enumerate(ranks):
        shape = full[len(full) - r:] if shapes is None else tuple(shapes[i])
        n = int(np.prod(shape))
        xs.append(Tensor._make(np.linspace(-4 + i, 4, n, dtype=dtype.np).reshape(shape), dtype))
    return xs


def _make(key, composite, dtype, ranks, examples):
    def forward(*xs):
        return composite(*xs)

    def vjp(*xs_g):
        # ``g`` comes flat: its size is one symbol the trace solves for
        # (``N == B*((H-2)//2+1)*...``), where a shaped cotangent's sizes
        # compared with an output's size expressions specialized them all
        *xs, g = xs_g
        with graph.enable_grad():
            xs = [x.detach().requires_grad_() for x in xs]
            y = composite(*xs)
            return _grad(y, xs, g.reshape(y.shape))

    name = re.sub(r"\W", "_", "_".join(key))       # (an IR symbol name)
    forward.__name__ = f"eager_{name}"
    vjp.__name__ = f"eager_{name}_vjp"
    try:
        f = _compile(forward, backend="cpu", dynamic=True)
        b = _compile(vjp, backend="cpu", dynamic=True)
        xs = _examples(dtype, ranks, examples)
        with graph.no_grad():
            y = f(*xs)
            g = Tensor._make(np.linspace(1, 2, y._data.size, dtype=dtype.np), dtype)
            b(*xs, g)
        for cf in (f, b):
            info = cf.cache_info()
            # (a note that solves a size for others is fine; one that
            # specializes one to the example's size is not)
            if info.traces != 1 or info.eager_signatures or not info.symbolic[0] \
                    or any("specialized" in n for n in info.size_notes):
                raise RuntimeError(f"not one size-generic trace ({info})")
    except Exception as e:    # noqa: BLE001  (any failure: the NumPy path stays correct)
        warnings.warn(f"tracec: no native eager kernel for {key} ({dtype.name}): "
                      f"{type(e).__name__}: {e}; the NumPy path runs instead",
                      RuntimeWarning, stacklevel=2)
        return None

    def run_forward(*arrays):
        with graph.no_grad():
            return f(*[Tensor._make(a, dtype) for a in arrays])._data

    def run_vjp(*arrays):
        with graph.no_grad():
            return tuple(r._data for r in b(*[Tensor._make(a, dtype) for a in arrays]))

    return run_forward, run_vjp
