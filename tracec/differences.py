"""Differences and integrals along a dimension: ``diff gradient trapezoid
trapz cumulative_trapezoid``.

Invariant: composites of slices, arithmetic and ``cat`` (autograd and
``tracec.compile`` for free); ``gradient`` follows PyTorch's (NumPy's)
second-order central differences inside and first- or second-order ones at
the edges, for uniform spacings and for coordinates.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import functions as F
from tracec import ops
from tracec.functions import _named, tensor_arg
from tracec.ops.core import normalize_axis
from tracec.rearrange import _slice, cumsum
from tracec.shape_ops import cat, clone
from tracec.tensor import Tensor

__all__ = ["diff", "gradient", "trapezoid", "trapz", "cumulative_trapezoid"]


def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    x = tensor_arg(input, "diff")
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = normalize_axis(dim, x.ndim)
    for p in (prepend, append):
        if isinstance(p, Tensor) and p.ndim != x.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if n == 0:          # torch returns a copy of the input, prepend/append ignored
        return clone(x)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        parts = [p if isinstance(p, Tensor) and p.ndim else ops.broadcast_to(
            ops.reshape(tensor_arg(p, "diff") if isinstance(p, Tensor) else Tensor._from_data(
                p, dtype=x.dtype), (1,) * x.ndim),
            tuple(1 if j == d else s for j, s in enumerate(x.shape))) for p in parts]
        x = cat(parts, d)
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        a, b = _slice(x, d, 1, m), _slice(x, d, 0, m - 1)
        x = ops.ne(a, b) if x.dtype is dt.bool_ else ops.sub(a, b)
    return _named(x, "DiffBackward0")


def _trap_parts(y, x, dx, dim, name):
    y = tensor_arg(y, name)
    if not y.dtype.is_floating_point:     # integers integrate in the default float dtype
        y = ops.cast(y, dt.get_default_dtype())
    d = normalize_axis(dim, y.ndim)
    m = y.shape[d]
    avg = ops.mul(ops.add(_slice(y, d, 1, m), _slice(y, d, 0, m - 1)), 0.5) if m else y
    if x is not None:
        x = tensor_arg(x, name)
        if x.ndim == 1:
            x = ops.reshape(x, tuple(x.shape[0] if j == d else 1 for j in range(y.ndim)))
        xd = normalize_axis(dim, x.ndim)
        k = x.shape[xd]
        return F.mul(avg, ops.sub(_slice(x, xd, 1, k), _slice(x, xd, 0, k - 1))), d
    return F.mul(avg, 1.0 if dx is None else dx), d


def trapezoid(y, x=None, *, dx=None, dim=-1):
    parts, d = _trap_parts(y, x, dx, dim, "trapezoid")
    return F.sum(parts, d)


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    parts, d = _trap_parts(y, x, dx, dim, "cumulative_trapezoid")
    return cumsum(parts, d)


def _gradient_dim(f, d, h, coords, edge_order):
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")

    def at(a, b):
        return _slice(f, d, a, b)
    if coords is None:
        mid = F.div(F.sub(at(2, n), at(0, n - 2)), 2.0 * h)
        if edge_order == 1:
            first = F.div(F.sub(at(1, 2), at(0, 1)), h)
            last = F.div(F.sub(at(n - 1, n), at(n - 2, n - 1)), h)
        else:
            first = F.div(F.add(F.add(F.mul(at(0, 1), -1.5), F.mul(at(1, 2), 2.0)),
                                F.mul(at(2, 3), -0.5)), h)
            # (PyTorch's order of the three terms: the rounding shows)
            last = F.div(F.add(F.sub(F.mul(at(n - 3, n - 2), 0.5), F.mul(at(n - 2, n - 1), 2.0)),
                               F.mul(at(n - 1, n), 1.5)), h)
        return cat([first, mid, last], d)
    shape = tuple(n if i == d else 1 for i in range(f.ndim))
    x = ops.reshape(coords, shape)
    dx = F.sub(_slice(x, d, 1, n), _slice(x, d, 0, n - 1))        # dx[i] = x[i+1] - x[i]
    # PyTorch's weights a f[i-1] + b f[i] + c f[i+1] of the spacings to
    # the left (dx1) and right (dx2), in its order of operations
    dx1, dx2 = _slice(dx, d, 0, n - 2), _slice(dx, d, 1, n - 1)
    a = F.div(F.neg(dx2), F.mul(dx1, F.add(dx1, dx2)))
    b = F.div(F.sub(dx2, dx1), F.mul(dx1, dx2))
    c = F.div(dx1, F.mul(dx2, F.add(dx1, dx2)))
    mid = F.add(F.add(F.mul(a, at(0, n - 2)), F.mul(b, at(1, n - 1))), F.mul(c, at(2, n)))
    if edge_order == 1:
        first = F.div(F.sub(at(1, 2), at(0, 1)), _slice(dx, d, 0, 1))
        last = F.div(F.sub(at(n - 1, n), at(n - 2, n - 1)), _slice(dx, d, n - 2, n - 1))
    else:
        d1, d2 = _slice(dx, d, 0, 1), _slice(dx, d, 1, 2)
        a = F.div(F.neg(F.add(F.mul(d1, 2.0), d2)), F.mul(d1, F.add(d1, d2)))
        b = F.div(F.add(d1, d2), F.mul(d1, d2))
        c = F.div(F.neg(d1), F.mul(d2, F.add(d1, d2)))
        first = F.add(F.add(F.mul(a, at(0, 1)), F.mul(b, at(1, 2))), F.mul(c, at(2, 3)))
        d1, d2 = _slice(dx, d, n - 3, n - 2), _slice(dx, d, n - 2, n - 1)
        a = F.div(d2, F.mul(d1, F.add(d1, d2)))
        b = F.div(F.neg(F.add(d2, d1)), F.mul(d1, d2))
        c = F.div(F.add(F.mul(d2, 2.0), d1), F.mul(d2, F.add(d1, d2)))
        last = F.add(F.add(F.mul(a, at(n - 3, n - 2)), F.mul(b, at(n - 2, n - 1))),
                     F.mul(c, at(n - 1, n)))
    return cat([first, mid, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """Estimated derivatives of ``input`` along each of ``dim`` (a tuple)."""
    f = tensor_arg(input, "gradient")
    spacing = 1 if spacing is None else spacing
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if not f.dtype.is_floating_point:
        f = ops.cast(f, dt.get_default_dtype())
    dims = list(range(f.ndim)) if dim is None else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [normalize_axis(d, f.ndim) for d in dims]
    if isinstance(spacing, Tensor) and spacing.ndim == 0:
        spacing = float(spacing)      # (PyTorch's Scalar overload: a 0-d tensor is a number)
    if isinstance(spacing, (list, tuple)):
        if dim is None and len(spacing) != f.ndim:
            raise RuntimeError("torch.gradient expected spacing to be unspecified, a scalar, or a "
                               f"list of length equal to 'self.dim() = {f.ndim}', since dim "
                               f"argument was not given, but got a list of length {len(spacing)}")
        if len(spacing) != len(dims):
            raise RuntimeError("torch.gradient expected spacing to be unspecified, a scalar or "
                               f"it's spacing and dim arguments to have the same length, but "
                               f"got a spacing argument of length {len(spacing)} and a dim "
                               f"argument of length {len(dims)}.")
        steps = list(spacing)
    else:
        steps = [spacing] * len(dims)
    out = []
    for d, h in zip(dims, steps):
        coords = h if isinstance(h, Tensor) else None
        out.append(_gradient_dim(f, d, None if coords is not None else float(h), coords,
                                 edge_order))
    return tuple(out)


Tensor.diff = diff
