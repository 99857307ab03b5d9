"""More of PyTorch's factories: ``logspace``, ``tril_indices`` /
``triu_indices`` and the spectral windows (``hann_window``,
``hamming_window``, ``blackman_window``, ``bartlett_window``), with
PyTorch's defaults (``periodic=True``), formulas and argument checks;
values are computed in float64 and rounded once to the result dtype."""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec.creation import _finish
from tracec.tensor import Tensor

__all__ = ["logspace", "tril_indices", "triu_indices", "hann_window", "hamming_window",
           "blackman_window", "bartlett_window"]


def _dtype(dtype):
    return dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    d = _dtype(dtype)
    vals = np.power(float(base), np.linspace(float(start), float(end), steps))
    return _finish(Tensor._make(vals.astype(d.np), d), requires_grad, device)


def _indices(np_fn, row, col, offset, dtype, device):
    if row < 0 or col < 0:
        raise RuntimeError(f"row must be non-negative, got{row}" if row < 0 else
                           f"col must be non-negative, got{col}")
    d = dt.to_dtype(dtype) if dtype is not None else dt.int64
    r, c = np_fn(row, offset, col)
    return _finish(Tensor._make(np.stack([r, c]).astype(d.np).reshape(2, -1), d), False, device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """Row-major ``(2, N)`` coordinates of the lower triangle (``offset``-th diagonal)."""
    return _indices(np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _indices(np.triu_indices, row, col, offset, dtype, device)


def _window(name, coeffs, window_length, periodic, dtype, device, requires_grad):
    """PyTorch's recipe: ``k * (scale / n)`` over ``arange`` in the result
    dtype (``n = window_length`` when periodic, else ``window_length - 1``),
    then the window's formula in that dtype, so values round as torch's."""
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    d = _dtype(dtype)
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d}")
    if window_length <= 1:
        vals = np.ones(window_length, d.np)
    else:
        n = window_length if periodic else window_length - 1
        k = np.arange(window_length, dtype=d.np)
        vals = coeffs(k, n, d.np.type)
    return _finish(Tensor._make(np.asarray(vals, d.np), d), requires_grad, device)


def _cosine(alpha, beta):
    def f(k, n, t):
        return np.cos(k * t(2 * np.pi / n)) * t(-beta) + t(alpha)
    return f


def hann_window(window_length, periodic=True, *, dtype=None, device=None, layout=None,
                requires_grad=False):
    return _window("hann_window", _cosine(0.5, 0.5), window_length, periodic, dtype, device,
                   requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   device=None, layout=None, requires_grad=False):
    return _window("hamming_window", _cosine(alpha, beta), window_length, periodic, dtype,
                   device, requires_grad)


def _blackman(k, n, t):
    w = k * t(np.pi / n)
    return np.cos(w * t(4)) * t(0.08) - np.cos(w * t(2)) * t(0.5) + t(0.42)


def blackman_window(window_length, periodic=True, *, dtype=None, device=None, layout=None,
                    requires_grad=False):
    return _window("blackman_window", _blackman, window_length, periodic, dtype, device,
                   requires_grad)


def _bartlett(k, n, t):
    w = k * t(2 / n)
    half = ((len(k) - 1) >> 1) + 1
    w[half:] = t(2) - w[half:]
    return w


def bartlett_window(window_length, periodic=True, *, dtype=None, device=None, layout=None,
                    requires_grad=False):
    return _window("bartlett_window", _bartlett, window_length, periodic, dtype, device,
                   requires_grad)
