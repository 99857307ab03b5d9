"""Smaller ``torch.*`` functions public programs call: ``tril_indices``,
``triu_indices``, ``unravel_index``, ``scalar_tensor``, ``zero_``,
``fill``/``fill_``, ``detach``/``detach_`` and the ``*_copy`` forms of the
view functions (``view_copy``, ``permute_copy``, ``split_copy``...).

Invariant: each is composed from existing tracec functions (so recorded in
compiled functions and differentiable where its parts are); the index
helpers are constants of their integer arguments.
"""
from __future__ import annotations

import sys

import numpy as np

from tracec import creation, dtypes as dt
from tracec.creation import _finish
from tracec.tensor import Tensor

__all__ = ["tril_indices", "triu_indices", "unravel_index", "scalar_tensor", "zero_", "fill",
           "fill_", "detach", "detach_"]


def _tri_indices(fn, row, col, offset, dtype, device):
    d = dt.to_dtype(dtype) if dtype is not None else dt.int64
    if d not in (dt.int64, dt.int32):
        raise RuntimeError(f"\"{fn.__name__}_indices\" not implemented for '{str(d)[6:]}'")
    if row < 0 or col < 0:
        # (PyTorch's message has no space before the number)
        raise RuntimeError(f"row must be non-negative, got{row}" if row < 0
                           else f"col must be non-negative, got{col}")
    r, c = np.nonzero(fn(np.ones((row, col), bool), offset))
    idx = np.stack([r, c]).astype(d.np) if r.size else np.zeros((2, 0), d.np)
    return _finish(Tensor._make(np.ascontiguousarray(idx), d), False, device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """Row-major (row, column) coordinates of the lower triangle."""
    return _tri_indices(np.tril, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _tri_indices(np.triu, row, col, offset, dtype, device)


def unravel_index(indices, shape):
    """Coordinates of flat ``indices`` in ``shape`` (one tensor per
    dimension), Python-style modulo for negative indices, as PyTorch."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"expected 'indices' to be a tensor, but got {type(indices)}")
    if indices.dtype.is_floating_point or indices.dtype is dt.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    idx = indices.to(dt.int64)
    out, stride = [], 1
    for size in reversed(shape):
        out.append((idx // stride) % size if size else idx * 0)
        stride *= size
    return tuple(reversed(out))


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    data = np.array(s, dtype=d.np)
    if d is dt.bfloat16:   # float32 storage: the value rounded to bfloat16
        data = dt.round_bfloat16(data)
    return _finish(Tensor._make(data, d), requires_grad, device)


def zero_(input):  # noqa: A002
    return input.zero_()


def fill(input, value):  # noqa: A002
    from tracec.methods import filled
    return filled(input, value, "FillBackward1" if isinstance(value, Tensor) else "FillBackward0")


def fill_(input, value):  # noqa: A002
    return input.fill_(value)


def detach(input):  # noqa: A002
    return input.detach()


def detach_(input):  # noqa: A002
    return input.detach_()


def _copy_variant(name: str):
    def copy_fn(input, *args, **kwargs):  # noqa: A002
        fn = getattr(sys.modules["tracec"], name, None)   # the public function, not a copy
        res = fn(input, *args, **kwargs) if fn is not None and name != "detach" else (
            getattr(input, name)(*args, **kwargs) if name != "alias" else input)
        if isinstance(res, (tuple, list)):
            return type(res)(r.clone() for r in res)
        return res.clone()
    copy_fn.__name__ = copy_fn.__qualname__ = f"{name}_copy"
    copy_fn.__doc__ = f"``torch.{name}_copy``: ``torch.{name}`` on a fresh copy (no view)."
    return copy_fn


def slice_copy(input, dim=0, start=None, end=None, step=1):  # noqa: A002
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    return input[tuple(index)].clone()


__all__.append("slice_copy")
# torch.X_copy for the view functions PyTorch gives copy forms ("view" and
# "unfold" are methods only here; "alias" is the tensor itself).
for _name in ("permute", "transpose", "t", "squeeze", "unsqueeze", "expand", "diagonal",
              "select", "narrow", "split", "split_with_sizes", "unbind", "unfold", "detach",
              "as_strided", "view", "alias"):
    _fn = _copy_variant(_name)
    globals()[_fn.__name__] = _fn
    __all__.append(_fn.__name__)
