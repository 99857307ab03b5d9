"""Movement primitives: ``reshape``, ``transpose``, ``broadcast_to``,
``slice`` (positive steps), ``pad`` (low/high/interior, the adjoint of a
strided slice) and ``concatenate``.

Invariant: these move or select elements and never compute; in eager mode
``reshape``, ``transpose``, ``broadcast_to`` and ``slice`` return NumPy views
of their operand when NumPy can (the front end then shares storage and the
version counter, API.md §1).
"""
from __future__ import annotations

import math

import numpy as np

from tracec.ops.core import Primitive, ShapeError
from tracec.ops import elementwise as ew  # noqa: F401  (call-time use)


def _reshape_shape(s, *, shape):
    n = math.prod(s)
    if _inferred_exactly(n, shape) or math.prod(shape) == n:
        return tuple(shape)
    from tracec.symbolic import SymbolicError, equal_if_exact
    if equal_if_exact(n, math.prod(shape)):
        raise SymbolicError(f"reshape of {tuple(s)} to {tuple(shape)}: equal sizes where the "
                            "divisions in them are exact, which the trace guarded")
    raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {n}"
                     f" (input shape {tuple(s)})")


def _inferred_exactly(n, shape) -> bool:
    """Whether a symbolic ``shape`` has one size ``n // rest`` (``view(B,
    -1)`` filled in, ``rest`` the product of the others) where ``rest``
    divides ``n``.  Asked so, the check is the divisibility test the -1
    was filled in under (one guard, the same), not an equality of ``n``
    and ``rest * (n // rest)``, which would specialize every size in it."""
    from tracec.symbolic import Sym
    if not isinstance(n, Sym):
        return False
    for i, d in enumerate(shape):
        if isinstance(d, Sym) and len(d.terms) == 1 and d.terms[0][1] == 1 \
                and len(d.terms[0][0]) == 1 and isinstance(d.terms[0][0][0], tuple) \
                and d.terms[0][0][0][0] == "//":
            _, num, den = d.terms[0][0][0]
            rest = math.prod(shape[:i] + shape[i + 1:])
            rest_terms = rest.terms if isinstance(rest, Sym) else ((((), rest),) if rest else ())
            if num == n.terms and den == rest_terms:
                return not (n % rest != 0)
    return False


reshape_p = Primitive("reshape", kind="movement", impl=lambda x, *, shape: x.reshape(shape),
                      shape_rule=_reshape_shape, dtype_rule=lambda d, **_: d,
                      vjp=lambda g, x, out, *, shape: (reshape(g, tuple(x.shape)),))


def _transpose_shape(s, *, perm):
    if sorted(perm) != list(range(len(s))):
        raise ShapeError(f"permutation {list(perm)} does not match a tensor of shape {tuple(s)}")
    return tuple(s[p] for p in perm)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


transpose_p = Primitive("transpose", kind="movement",
                        impl=lambda x, *, perm: x.transpose(perm),
                        shape_rule=_transpose_shape, dtype_rule=lambda d, **_: d,
                        vjp=lambda g, x, out, *, perm: (transpose(g, _inverse(perm)),))


def _broadcast_shape(s, *, shape):
    shape = tuple(shape)
    if len(shape) < len(s):
        raise ShapeError(f"the shape {tuple(s)} cannot be expanded to {shape}")
    lead = len(shape) - len(s)
    for i in range(len(shape) - 1, lead - 1, -1):    # PyTorch names the last bad dimension
        d = s[i - lead]
        if d != 1 and d != shape[i]:
            raise ShapeError(f"The expanded size of the tensor ({shape[i]}) must match the "
                             f"existing size ({d}) at non-singleton dimension {i}.  Target "
                             f"sizes: {list(shape)}.  Tensor sizes: {list(s)}")
    return shape


def _expand_strides(x, shape) -> tuple:
    """PyTorch's strides (in bytes) for ``x`` expanded to ``shape``
    (``inferExpandGeometry``): an expanded dimension has stride 0, a kept
    one (size 1 kept as 1 among them) its own stride, and a new leading
    dimension of size 1 the next one's size times its stride."""
    out = [0] * len(shape)
    lead = len(shape) - x.ndim
    for i in range(len(shape) - 1, -1, -1):
        if i >= lead:
            size, stride = x.shape[i - lead], x.strides[i - lead]
        else:
            size = 1
            stride = shape[i + 1] * out[i + 1] if i + 1 < len(shape) else x.itemsize
        out[i] = 0 if size != shape[i] else stride
    return tuple(out)


def _broadcast_impl(x, *, shape):
    strides = _expand_strides(x, shape) if x.size else None
    if math.prod(shape) == x.size:
        # Only unit dimensions added: a plain (writable) view, as PyTorch's
        # expand to the same size can be written in place.
        out = x.reshape(shape)
        if strides is not None and out.strides != strides and np.shares_memory(out, x):
            out = np.lib.stride_tricks.as_strided(x, shape, strides)
        return out
    out = np.broadcast_to(x, shape)
    if strides is not None and out.strides != strides:    # (NumPy gives every size-1 dimension stride 0)
        out = np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)
    return out


broadcast_to_p = Primitive(
    "broadcast_to", kind="movement", impl=_broadcast_impl,
    shape_rule=_broadcast_shape, dtype_rule=lambda d, **_: d,
    vjp=lambda g, x, out, *, shape: (ew.sum_to(g, tuple(x.shape)),))


def _slice_len(start, stop, step):
    return max(0, (stop - start + step - 1) // step)


def _slice_shape(s, *, starts, stops, steps):
    if not len(starts) == len(stops) == len(steps) == len(s):
        raise ShapeError(f"slice of rank {len(starts)} applied to shape {tuple(s)}")
    out = []
    for d, a, b, c in zip(s, starts, stops, steps):
        if c <= 0 or not 0 <= a <= d or not 0 <= b <= d:
            raise ShapeError(f"slice {a}:{b}:{c} is invalid for a dimension of size {d}")
        out.append(_slice_len(a, b, c))
    return tuple(out)


def _slice_impl(x, *, starts, stops, steps):
    return x[tuple(map(slice, starts, stops, steps))]


def _slice_vjp(g, x, out, *, starts, stops, steps):
    high, interior = [], []
    for d, a, n, c in zip(x.shape, starts, g.shape, steps):
        covered = (n - 1) * c + 1 if n else 0
        high.append(d - a - covered)
        interior.append(c - 1)
    return (pad(g, tuple(starts), tuple(high), tuple(interior), 0.0),)


slice_p = Primitive("slice", kind="movement", impl=_slice_impl, shape_rule=_slice_shape,
                    dtype_rule=lambda d, **_: d, vjp=_slice_vjp)


def _pad_shape(s, *, low, high, interior, value):
    if not len(low) == len(high) == len(interior) == len(s):
        raise ShapeError(f"pad config of rank {len(low)} applied to shape {tuple(s)}")
    if min(low + high + interior, default=0) < 0:
        raise ShapeError("pad: negative padding is not supported")
    return tuple(lo + hi + d + max(d - 1, 0) * i
                 for d, lo, hi, i in zip(s, low, high, interior))


def _pad_impl(x, *, low, high, interior, value):
    shape = _pad_shape(x.shape, low=low, high=high, interior=interior, value=value)
    out = np.full(shape, value, dtype=x.dtype)
    out[tuple(slice(lo, lo + max(d - 1, 0) * (i + 1) + 1 if d else lo, i + 1)
              for d, lo, i in zip(x.shape, low, interior))] = x
    return out


def _pad_vjp(g, x, out, *, low, high, interior, value):
    stops = tuple(lo + max(d - 1, 0) * (i + 1) + (1 if d else 0)
                  for d, lo, i in zip(x.shape, low, interior))
    # A copy, not the slice's view: PyTorch's padding (and so convolution
    # and pooling) backward makes a new dense gradient, which WGAN-GP's
    # gradients.view(gradients.size(0), -1) relies on.
    return (ew.cast(slice_(g, tuple(low), stops, tuple(i + 1 for i in interior)), g.dtype),)


pad_p = Primitive("pad", kind="movement", impl=_pad_impl, shape_rule=_pad_shape,
                  dtype_rule=lambda d, **_: d, vjp=_pad_vjp)


def _concat_shape(*shapes, axis):
    first = shapes[0]
    if not 0 <= axis < len(first):
        raise ShapeError(f"concatenate: axis {axis} out of range for shape {tuple(first)}")
    for k, s in enumerate(shapes[1:], 1):
        if len(s) != len(first):
            raise ShapeError(f"Tensors must have same number of dimensions: got {len(first)} "
                             f"and {len(s)}")
        for i, (a, b) in enumerate(zip(first, s)):
            if i != axis and a != b:   # PyTorch's sentence
                raise ShapeError(f"Sizes of tensors must match except in dimension {axis}. "
                                 f"Expected size {a} but got size {b} for tensor number {k} "
                                 "in the list.")
    return tuple(sum(s[axis] for s in shapes) if i == axis else d
                 for i, d in enumerate(first))


def _concat_dtype(*dts, axis):
    if any(d is not dts[0] for d in dts):
        raise ShapeError(f"concatenate: operand dtypes differ ({', '.join(map(str, dts))})")
    return dts[0]


def _concat_vjp(g, *xs, out, axis):
    outs, at = [], 0
    for x in xs:
        n = x.shape[axis]
        starts = tuple(at if i == axis else 0 for i in range(len(g.shape)))
        stops = tuple(at + n if i == axis else d for i, d in enumerate(g.shape))
        outs.append(slice_(g, starts, stops, (1,) * len(g.shape)))
        at += n
    return tuple(outs)


def _channels_last(a) -> bool:
    return a.ndim in (4, 5) and not a.flags.c_contiguous and \
        np.moveaxis(a, 1, -1).flags.c_contiguous


def _concat_impl(*xs, axis):
    # PyTorch's cat is contiguous unless every input is channels-last (NumPy
    # follows the inputs' layout: permuted inputs gave a permuted result,
    # which Transformer-XL's _rel_shift then cannot .view()).
    out = np.concatenate(xs, axis=axis)
    if out.flags.c_contiguous or (_channels_last(out) and all(_channels_last(x) for x in xs)):
        return out
    return np.ascontiguousarray(out)


concatenate_p = Primitive("concatenate", kind="movement",
                          impl=_concat_impl,
                          shape_rule=_concat_shape, dtype_rule=_concat_dtype,
                          vjp=_concat_vjp, variadic=True)


def reshape(x, shape): return reshape_p.bind(x, shape=tuple(shape))
def transpose(x, perm): return transpose_p.bind(x, perm=tuple(perm))
def broadcast_to(x, shape): return broadcast_to_p.bind(x, shape=tuple(shape))


def slice_(x, starts, stops, steps):
    return slice_p.bind(x, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))


def pad(x, low, high, interior, value=0.0):
    return pad_p.bind(x, low=tuple(low), high=tuple(high), interior=tuple(interior),
                      value=value)


def concatenate(xs, axis): return concatenate_p.bind(*xs, axis=axis)
