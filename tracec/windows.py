"""Spectral windows and ``logspace``: ``torch.hann_window``,
``hamming_window``, ``blackman_window``, ``bartlett_window``,
``kaiser_window`` (also as ``torch.signal.windows``' classic forms) and
``torch.logspace``.

Invariant: each depends only on Python numbers, so it is a constant, also
inside a compiled function; values are computed in float64 and rounded to
the requested dtype once.  ``periodic=True`` (PyTorch's default) is the
symmetric window of length ``N + 1`` without its last point.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.creation import _finish
from tracec.tensor import Tensor

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window", "logspace"]


def _window(name, n, periodic, dtype, device, requires_grad, fn):
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
        k = np.arange(m, dtype=np.float64)
        w = fn(k, m)[:n]
    return _finish(Tensor._make(np.ascontiguousarray(w).astype(d.np), d), requires_grad, device)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: 0.5 - 0.5 * np.cos(2 * np.pi * k / (m - 1)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: alpha - beta * np.cos(2 * np.pi * k / (m - 1)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    def fn(k, m):
        x = 2 * np.pi * k / (m - 1)
        return 0.42 - 0.5 * np.cos(x) + 0.08 * np.cos(2 * x)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, fn)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1))


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
