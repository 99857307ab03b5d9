"""Spectral windows and ``logspace``: ``torch.hann_window``,
``hamming_window``, ``blackman_window``, ``bartlett_window``,
``kaiser_window`` (also as ``torch.signal.windows``' classic forms) and
``torch.logspace``.

Invariant: each depends only on Python numbers, so it is a constant, also
inside a compiled function; hann / hamming / blackman / bartlett replay
PyTorch's chain of tensor ops in the requested dtype (each step rounded:
its float32 windows differ from float64 ones rounded once), kaiser is
computed in float64 and rounded once.  ``periodic=True`` (PyTorch's default) is the
symmetric window of length ``N + 1`` without its last point.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.creation import _finish
from tracec.tensor import Tensor

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window", "logspace"]


def _window(name, n, periodic, dtype, device, requires_grad, fn, ops_in_dtype=False):
    if n < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={n}")
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d}")
    if n <= 1:
        w = np.ones(n)
    else:
        m = n + 1 if periodic else n
        if ops_in_dtype:
            w = fn(_Ops(d), m)[:n]
        else:
            k = np.arange(m, dtype=np.float64)
            w = fn(k, m)[:n]
    w = np.ascontiguousarray(w).astype(d.np)
    if d is dt.bfloat16:      # (float32 storage: rounded to bfloat16's grid)
        w = dt.round_bfloat16(w)
    return _finish(Tensor._make(w, d), requires_grad, device)


class _Ops:
    """PyTorch's tensor ops on ``arange(m)`` in dtype ``d``, as its window
    functions chain them (``initial.mul(2 * pi / (m - 1)).cos_()...``): each
    result rounded to ``d``, a number operand rounded to ``d`` first (the
    half types compute in float32 and round each result)."""

    def __init__(self, d):
        self.d = d
        self.np = np.float64 if d is dt.float64 else np.float32

    def rnd(self, a):
        a = np.asarray(a, self.np)
        if self.d is dt.float16:
            return a.astype(np.float16).astype(np.float32)
        return dt.round_bfloat16(a) if self.d is dt.bfloat16 else a

    def arange(self, m):
        return self.rnd(np.arange(m))

    def mul(self, a, b):
        # (the window functions' numbers are rounded to the dtype first:
        # ATen's C++ calls wrap them as tensors of the half type)
        return self.rnd(a * (self.rnd(b) if np.isscalar(b) else b))

    def add(self, a, b):
        return self.rnd(a + (self.rnd(b) if np.isscalar(b) else b))

    def sub(self, a, b):
        return self.rnd(a - b)

    def cos(self, a):
        # (in float64, rounded: nearer PyTorch's float32 cos than NumPy's)
        return self.rnd(np.cos(np.asarray(a, np.float64)))


def _hamming(alpha, beta):
    # window.mul_(2 pi / (m - 1)).cos_().mul_(-beta).add_(alpha)
    def fn(o, m):
        w = o.cos(o.mul(o.arange(m), 2.0 * np.pi / (m - 1)))
        return o.add(o.mul(w, -beta), alpha)
    return fn


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _hamming(0.5, 0.5), True)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _hamming(alpha, beta), True)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    # cos(4 pi k / (m - 1)) * 0.08 - cos(2 pi k / (m - 1)) * 0.5 + 0.42, in
    # PyTorch's order (its first point is exactly 0: (0.08 - 0.5) + 0.42)
    def fn(o, m):
        k = o.arange(m)
        a = o.mul(o.cos(o.mul(k, 4.0 * np.pi / (m - 1))), 0.08)
        b = o.mul(o.cos(o.mul(k, 2.0 * np.pi / (m - 1))), 0.5)
        return o.add(o.sub(a, b), 0.42)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   fn, True)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    # arange(m).mul_(2 / (m - 1)), its second half .mul_(-1).add_(2)
    def fn(o, m):
        w = o.mul(o.arange(m), 2.0 / (m - 1))
        half = ((m - 1) >> 1) + 1
        w[half:] = o.add(o.mul(w[half:], -1.0), 2.0)
        return w
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   fn, True)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: np.kaiser(m, beta))


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``steps`` points ``base ** linspace(start, end, steps)``."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if d.is_complex:
        values = np.power(complex(base), np.linspace(start, end, steps))
    else:
        # PyTorch's kernel: exponents from both ends (start + step * i for
        # the first steps // 2, end - step * (steps - 1 - i) after; unfused:
        # logspace(-2, 2, 11, dtype=int64)[5] is 1), integer ends truncated
        # first, pow in float64 rounded to the type, integer powers
        # truncated; float16 / bfloat16 through float32.  float32 results
        # are PyTorch's exactly; float64 ones can differ in the last place
        # (its float64 pow is not always the C library's), as can float16 /
        # bfloat16 ones where an end is not representable in the type.
        if d.is_floating_point:
            a, b = float(start), float(end)
        else:
            a, b = float(int(start)), float(int(end))
        i = np.arange(steps, dtype=np.float64)
        step = (b - a) / (steps - 1) if steps > 1 else 0.0
        exps = np.where(i < steps // 2, a + step * i, b - step * (steps - 1 - i))
        if steps == 1:
            exps = np.array([a])
        values = np.power(float(base), exps)
        if not d.is_floating_point:
            values = np.trunc(values)
        elif d.itemsize == 2:
            values = values.astype(np.float32)
            if d is dt.bfloat16:
                values = dt.round_bfloat16(values)
    t = _finish(Tensor._make(values.astype(d.np), d), requires_grad, device)
    return out.copy_(t) if out is not None else t
