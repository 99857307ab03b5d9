"""``torch.signal.windows``: SciPy-style window functions with PyTorch's
signatures, defaults (``sym=True``: symmetric) and errors.

Invariant: values depend on Python numbers only (a constant, also inside a
compiled function), computed in float64 and rounded to the dtype once; a
periodic window (``sym=False``) is the symmetric one of length ``M + 1``
without its last point, as SciPy and PyTorch define it (``exponential``
takes its centre instead).
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec.creation import _finish
from tracec.tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout) -> dt.DType:
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    from tracec.tensor_meta import strided
    if layout is not None and layout is not strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if d not in (dt.float32, dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {d}")
    return d


def _make(name, M, sym, dtype, layout, device, requires_grad, fn) -> Tensor:
    """``fn(n, m)``: the symmetric window of length ``m`` at the points ``n``."""
    d = _checks(name, M, dtype, layout)
    if M <= 1:
        w = np.ones(M)
    else:
        m = M if sym else M + 1
        w = fn(np.arange(m, dtype=np.float64), m)[:M]
    return _finish(Tensor._make(np.ascontiguousarray(w).astype(d.np), d), requires_grad, device)


def _cosine_sum(a):
    return lambda n, m: sum((-1) ** k * c * np.cos(2 * math.pi * k * n / (m - 1))
                            for k, c in enumerate(a))


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False) -> Tensor:
    if not hasattr(a, "__iter__"):
        raise TypeError("Coefficients must be a list/tuple")
    a = [float(c) for c in a]
    if not a:
        raise ValueError("Coefficients cannot be empty")
    return _make("general_cosine", M, sym, dtype, layout, device, requires_grad, _cosine_sum(a))


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False) -> Tensor:
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    return _make("bartlett", M, sym, dtype, layout, device, requires_grad,
                 lambda n, m: 1.0 - np.abs(2.0 * n / (m - 1) - 1.0))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    return _make("cosine", M, sym, dtype, layout, device, requires_grad,
                 lambda n, m: np.sin(math.pi * (n + 0.5) / m))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False) -> Tensor:
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _make("gaussian", M, sym, dtype, layout, device, requires_grad,
                 lambda n, m: np.exp(-((n - (m - 1) / 2.0) ** 2) / (2.0 * std * std)))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False) -> Tensor:
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    return _make("kaiser", M, sym, dtype, layout, device, requires_grad,
                 lambda n, m: np.i0(beta * np.sqrt(np.clip(1.0 - (2.0 * n / (m - 1) - 1.0) ** 2,
                                                           0.0, None))) / np.i0(beta))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False) -> Tensor:
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    d = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    w = np.exp(-np.abs(np.arange(M, dtype=np.float64) - center) / tau)
    return _finish(Tensor._make(w.astype(d.np), d), requires_grad, device)
