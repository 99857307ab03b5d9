"""``torch.cond``, the ``torch.sym_*`` helpers and the legacy factories
``torch.range`` / ``torch.frombuffer`` / dlpack: PyTorch's functions that
programs written for ``torch.compile`` (or for old PyTorch) call.

Invariant for ``cond``: eagerly it runs one branch; while recording a
trace with a tensor predicate it runs both branches and selects each
result with ``where`` (results of the same structure, shapes and dtypes,
as ``torch.cond`` requires), so one trace serves both outcomes and the
gradient flows through the branch taken. Branches must not mutate their
inputs or captured state (``torch.cond`` raises for that too): both run.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec.tensor import RECORDERS, Tensor

__all__ = ["cond", "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite",
           "sym_sqrt", "sym_sum", "range", "frombuffer", "from_dlpack", "to_dlpack"]


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``."""
    from tracec import functions as F
    from tracec.utils._pytree import tree_flatten, tree_unflatten
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    if not (isinstance(pred, Tensor) and RECORDERS):
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    t_out, f_out = true_fn(*operands), false_fn(*operands)
    t_leaves, t_spec = tree_flatten(t_out)
    f_leaves, f_spec = tree_flatten(f_out)
    if t_spec != f_spec or len(t_leaves) != len(f_leaves):
        raise RuntimeError("cond: true_fn and false_fn must return the same structure, got "
                           f"{t_spec} and {f_spec}")
    p = pred.reshape(()).to(dt.bool_)
    out = []
    for a, b in zip(t_leaves, f_leaves):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            raise RuntimeError("cond: both branches must return tensors")
        if tuple(a.shape) != tuple(b.shape) or a.dtype is not b.dtype:
            raise RuntimeError(f"cond: the branches return {a.dtype}{list(a.shape)} and "
                               f"{b.dtype}{list(b.shape)}; they must match")
        out.append(F.where(p, a, b))
    return tree_unflatten(out, t_spec)


# --- the sym_* helpers: Python numbers (and tracec's symbolic sizes) ----------

def sym_int(a):
    return math.trunc(a) if isinstance(a, float) else int(a)


def sym_float(a):
    return float(a)


def sym_max(a, b):
    return b if b > a else a


def sym_min(a, b):
    return b if b < a else a


def sym_not(a):
    return not a


def sym_ite(b, t, f):
    return t if b else f


def sym_sqrt(a):
    return math.sqrt(a)


def sym_sum(args):
    total = 0
    for a in args:
        total = total + a
    return total


# --- legacy factories -----------------------------------------------------------

def range(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False):  # noqa: A001
    """``torch.range``: ``start`` to ``end`` inclusive (deprecated in PyTorch,
    with its warning); the default float dtype even for integer bounds."""
    from tracec.creation import _finish
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    d = dt.get_default_dtype() if dtype is None else dt.to_dtype(dtype)
    n = int(math.floor((end - start) / step)) + 1
    data = (start + np.arange(n, dtype=np.float64) * step).astype(d.np)
    return _finish(Tensor._make(data, d), requires_grad, device)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor sharing ``buffer``'s memory (an object with the buffer
    protocol), as ``torch.frombuffer``; bfloat16 is read into a copy."""
    from tracec.creation import _finish
    d = dt.to_dtype(dtype)
    nbytes = memoryview(buffer).nbytes
    if offset < 0 or offset >= nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({nbytes} bytes) minus 1")
    if count <= 0 and count != -1:
        raise ValueError(f"count must be either -1 or greater than 0, got {count}")
    if count == -1 and (nbytes - offset) % d.itemsize:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} "
                         f"bytes) must be a multiple of element size ({d.itemsize})")
    if d is dt.bfloat16:    # (a copy: tracec keeps bfloat16 values as float32)
        bits = np.frombuffer(buffer, dtype=np.uint16, count=count, offset=offset)
        return _finish(Tensor._make(dt.bfloat16_from_bits(bits), d), requires_grad, None)
    arr = np.frombuffer(buffer, dtype=d.np, count=count, offset=offset)
    return _finish(Tensor._make(arr, d), requires_grad, None)


class _Capsule:
    """A DLPack capsule (``to_dlpack``'s result) as the producer object
    ``np.from_dlpack`` takes: NumPy imports only through ``__dlpack__``."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)   # kDLCPU: a capsule tracec can import holds host memory


def from_dlpack(ext_tensor):
    """A tensor sharing the memory of a DLPack-capable object (a NumPy
    array, a CPU torch tensor, ...) or of a DLPack capsule."""
    from tracec.creation import from_numpy
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor)
    return from_numpy(np.from_dlpack(ext_tensor))


def to_dlpack(tensor):
    """The DLPack capsule of ``tensor``'s memory: a versioned one
    ("dltensor_versioned", which PyTorch reads too), since NumPy imports a
    legacy capsule read-only."""
    return tensor.numpy().__dlpack__(max_version=(1, 0))
