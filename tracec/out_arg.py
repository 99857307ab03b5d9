"""PyTorch's ``out=`` keyword for the top-level functions that take it.

``torch.mul(a, b, out=c)`` computes ``mul(a, b)`` and writes it into ``c``
(a tensor, or a tuple of tensors for functions returning several), resizing
``c`` when its shape differs, as PyTorch does.  The wrapper keeps one
definition per function: the wrapped function computes, this module only
writes.  Invariants (PyTorch's): ``out`` must be a Tensor of a dtype the
result can be cast to within its category; ``out=`` refuses inputs that
require grad while grad mode is on ("don't support automatic
differentiation"); the function returns ``out`` itself.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from tracec import dtypes as dt, graph
from tracec.functions import user_stacklevel
from tracec.tensor import RECORDERS, Tensor, refuse_partial_overlap

__all__ = ["with_out", "write_out"]


def _category(d) -> int:
    return 0 if d.name == "bool" else 3 if d.is_complex else 1 if not d.is_floating_point else 2


def _write_one(name: str, result: Tensor, out) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if _category(result.dtype) > _category(out.dtype):
        raise RuntimeError(f"result type {dt.scalar_type_name(result.dtype)} "
                           "can't be cast to the desired output type "
                           f"{dt.scalar_type_name(out.dtype)}")
    if tuple(out.shape) != tuple(result.shape):
        if RECORDERS or out._base is not None:
            raise RuntimeError(
                f"{name}(): out= has shape {tuple(out.shape)} but the result has shape "
                f"{tuple(result.shape)}; tracec resizes out= only for plain eager tensors "
                "(not views, not inside tracec.compile)")
        if out.numel() != 0:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}. This behavior is deprecated, and in a future "
                          "PyTorch release outputs will not be resized unless they have zero "
                          "elements. You can explicitly reuse an out tensor t by resizing it, "
                          "inplace, to zero elements with t.resize_(0). (Triggered internally at "
                          "/__w/pytorch/pytorch/aten/src/ATen/native/Resize.cpp:30.)",
                          UserWarning, stacklevel=user_stacklevel())
        out._data = np.empty(tuple(result.shape), dtype=out._data.dtype)
        out._vbox[0] += 1
    with graph.no_grad():
        out.copy_(result)
    return out


def write_out(name: str, result, out):
    """Write ``result`` (a Tensor or a tuple of them) into ``out``; return ``out``."""
    if isinstance(result, Tensor):
        return _write_one(name, result, out)
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors")
    for r, o in zip(result, out):
        _write_one(name, r, o)
    return type(result)(*out) if hasattr(result, "_fields") else tuple(out)


def _requires_grad(args, kwargs) -> bool:
    def any_rg(x):
        if isinstance(x, Tensor):
            return x.requires_grad
        if isinstance(x, (list, tuple)):
            return any(any_rg(y) for y in x)
        return False
    return any_rg(args) or any_rg(tuple(kwargs.values()))


def with_out(fn):
    """``fn`` with an ``out=`` keyword (``None``: ``fn`` unchanged)."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if isinstance(out, Tensor):    # (PyTorch's out= kernels check before writing)
            refuse_partial_overlap(out, args + tuple(kwargs.values()))
        if graph.is_grad_enabled() and _requires_grad(args, kwargs):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        return write_out(name, fn(*args, **kwargs), out)
    wrapper.__wrapped_without_out__ = fn
    return wrapper
