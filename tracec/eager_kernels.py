"""The compiler's kernels for eager composites (``tracec.fused_eager``).

``kernels(key, composite, dtype)`` compiles, for the cpu backend with every
size symbolic (``dynamic=True``), two functions of 1-D tensors:
``forward(x) = composite(x)`` and ``vjp(x, g)``, the gradient of
``composite`` at ``x`` for the cotangent ``g`` as the primitives' VJPs
compose it.  Each is traced once per process at ``_TRACE_NUMEL`` elements
(cheap: the trace runs the primitives eagerly) and compiled once per
machine: the disk cache serves later processes, so a new process pays a
trace and a load, not LLVM.

Invariants: a pair is made once per ``(key, dtype)`` per process, under a
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


def kernels(key: tuple, composite, dtype):
    """``(forward, vjp)`` on NumPy arrays for ``composite`` at ``dtype``, or
    None where they could not be made (see the module's invariants)."""
    k = (key, dtype.name)
    try:
        return _made[k]
    except KeyError:
        pass
    with _lock:
        if k not in _made:
            _made[k] = _make(key, composite, dtype)
        return _made[k]


def _make(key, composite, dtype):
    def forward(x):
        return composite(x)

    def vjp(x, g):
        with graph.enable_grad():
            x = x.detach().requires_grad_()
            return _grad(composite(x), (x,), g)[0]

    name = re.sub(r"\W", "_", "_".join(key))       # (an IR symbol name)
    forward.__name__ = f"eager_{name}"
    vjp.__name__ = f"eager_{name}_vjp"
    try:
        f = _compile(forward, backend="cpu", dynamic=True)
        b = _compile(vjp, backend="cpu", dynamic=True)
        x = Tensor._make(np.linspace(-4, 4, _TRACE_NUMEL, dtype=dtype.np), dtype)
        g = Tensor._make(np.linspace(1, 2, _TRACE_NUMEL, dtype=dtype.np), dtype)
        with graph.no_grad():
            f(x)
            b(x, g)
        for cf in (f, b):
            info = cf.cache_info()
            if info.traces != 1 or info.eager_signatures or not info.symbolic[0]:
                raise RuntimeError(f"{cf.__name__}: not one size-generic trace ({info})")
    except Exception as e:    # noqa: BLE001  (any failure: the NumPy path stays correct)
        warnings.warn(f"tracec: no native eager kernel for {key} ({dtype.name}): "
                      f"{type(e).__name__}: {e}; the NumPy path runs instead",
                      RuntimeWarning, stacklevel=2)
        return None

    def run_forward(a):
        with graph.no_grad():
            return f(Tensor._make(a, dtype))._data

    def run_vjp(a, gd):
        with graph.no_grad():
            return b(Tensor._make(a, dtype), Tensor._make(gd, dtype))._data

    return run_forward, run_vjp
