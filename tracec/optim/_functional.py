"""The in-place update formulas PyTorch's optimizers use (``lerp_``,
``addcmul_``, ``addcdiv_``, ``add_(x, alpha=...)``), written with tracec
tensor ops in the order PyTorch's CPU kernels round them, so that results
match ``torch.optim`` and a traced step sees only tensor ops.

A scalar (``value``, ``alpha``, ``weight``) may be a Python number or, for
a learning rate lifted by ``Optimizer._lr`` while a step is traced, a 0-d
tensor: then no Python comparison is made on it (that would read a traced
value), and mixed with a float32 tensor it is rounded to float32 first, as
PyTorch rounds a Python scalar.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import functions as F
from tracec import graph, math_extra, ops
from tracec.complex_ops import view_as_real
from tracec.tensor import OP_OBSERVERS, RECORDERS, SPARSE, Tensor

__all__ = ["neg", "one_minus", "scaled", "add_", "addcmul_", "addcdiv_", "lerp_", "as_real",
           "direct_arrays", "bump", "fma32_", "axpy_np"]


def neg(x):
    """``-x`` for a number or a (0-d) tensor."""
    return F.neg(x) if isinstance(x, Tensor) else -x


def scaled(x: Tensor, value):
    """``value * x``; multiplying by a Python 1 is exact, so it is skipped."""
    if not isinstance(value, Tensor) and value == 1:
        return x
    return x.mul(value)


def add_(t: Tensor, other: Tensor, alpha=1) -> Tensor:
    """``t.add_(other, alpha=alpha)``: ``t + alpha * other``."""
    if (type(alpha) in _NUMBERS and alpha != 1 and isinstance(other, Tensor)
            and t.dtype in _DIRECT_DTYPES and other.dtype is t.dtype and not SPARSE
            and not graph.is_grad_enabled()):
        # The same two ops (``other * alpha`` with alpha a weak scalar,
        # then the sum) as add_'s alpha, which writes them in place
        # without the intermediate tensor when it may.
        return t.add_(other, alpha=alpha)
    if _reduced(t) and isinstance(other, Tensor) and other.dtype is t.dtype and \
            type(alpha) in _NUMBERS and alpha != 1 and other.shape == t.shape and \
            t.is_contiguous() and other.is_contiguous():
        return _reduced_add_(t, other, alpha)
    if isinstance(alpha, Tensor) and F.fma_rounded(t, other, alpha, t.dtype):
        # a lifted lr: rounded once, as add_ with the number (F.add)
        return t.copy_(F.fused_scaled_sum(ops.add, t, other, alpha))
    return t.add_(scaled(other, alpha))


def add(x: Tensor, other: Tensor, alpha=1) -> Tensor:
    """``x.add(other, alpha=alpha)`` (``add_``'s rounding, out of place)."""
    if _reduced(x) and type(alpha) in _NUMBERS and alpha != 1:
        return add_(x.clone(), other, alpha)
    if isinstance(alpha, Tensor):     # a lifted hyper-parameter (a 0-d tensor)
        if F.fma_rounded(x, other, alpha, x.dtype):
            return F.fused_scaled_sum(ops.add, x, other, alpha)
        return x.add(scaled(other, alpha))
    return x.add(other, alpha=alpha)


def _reduced_add_(t: Tensor, other: Tensor, alpha) -> Tensor:
    """``t.add_(other, alpha=alpha)`` for bfloat16 / float16 ``t`` as
    PyTorch's CPU kernel rounds it: alpha is rounded to the dtype; the
    vectorized loop (the leading multiple of 32 elements) computes
    ``t + alpha * other`` in float32 and rounds once, the scalar loop (the
    rest) rounds the product first (SGD's ``p.add_(grad, alpha=-lr)``
    over half parameters)."""
    a = float(np.float16(alpha)) if t.dtype is dt.float16 else \
        float(dt.round_bfloat16(np.asarray(alpha, np.float32)))
    n = t.numel()
    k = n - n % 32
    flat, oflat = t.view(-1), other.view(-1)
    if k:
        flat[:k].copy_(flat[:k].to(dt.float32).add(oflat[:k].to(dt.float32).mul(a)))
    if k < n:
        flat[k:].add_(oflat[k:].to(dt.float32).mul(a).to(t.dtype))
    return t


def _fused(t: Tensor) -> bool:
    """Whether PyTorch's CPU kernels round ``t``'s lerp / addcmul once
    (the product and the sum fused): float32 (fma), and bfloat16 /
    float16 (computed in float32).  float64 keeps two roundings here, as
    math_extra's float64 lerp / addcmul."""
    return t.dtype is dt.float32 or _reduced(t)


def fma32_(out, base, x, y) -> None:
    """``out = base + x * y`` for float32 arrays, the product and the sum
    rounded once (through float64, where a float32 product is exact), as
    PyTorch's float32 lerp / addcmul kernels (``fma``); NumPy's eager
    counterpart of ``math_extra.lerp`` / ``addcmul``."""
    f64 = np.float64
    np.copyto(out, np.add(np.asarray(base, f64), np.multiply(np.asarray(x, f64), np.asarray(y, f64))),
              casting="same_kind")


def axpy_np(x: np.ndarray, y: np.ndarray, alpha, out=None) -> np.ndarray:
    """NumPy's ``x + alpha * y`` (``alpha`` a number) rounded as
    ``Tensor.add(y, alpha=alpha)``: once for float32 (``F.fma_rounded``:
    the exact product and the sum in float64), else the product first
    (``alpha`` a weak scalar of the dtype); into ``out`` when given."""
    d = x.dtype
    if alpha == 1:
        return np.add(x, y, out=out)
    if d == np.float32 and y.shape == x.shape:
        if out is None:
            out = x.copy()
        elif out is not x:
            np.copyto(out, x)
        F.fused_axpy_(out, y, alpha)
        return out
    return np.add(x, np.multiply(y, np.asarray(alpha, d)), out=out)


def _reduced(t: Tensor) -> bool:
    """Whether PyTorch's CPU kernels compute ``t``'s lerp / addcmul /
    addcdiv in float32 and round once (bfloat16, float16: opmath)."""
    return t.dtype is dt.bfloat16 or t.dtype is dt.float16


def addcmul_(t: Tensor, a: Tensor, b: Tensor, value=1) -> Tensor:
    """``t.addcmul_(a, b, value=value)``: ``t + value * a * b``, with
    PyTorch's left-to-right rounding (once, from float32, for bfloat16 /
    float16 ``t``)."""
    if _fused(t):
        # rounded once (math_extra.addcmul: fma(value * a, b, t), as
        # PyTorch's CPU kernel computes float32; float32 from bfloat16 /
        # float16); the traced step records the same ops, so a compiled
        # step equals the eager one
        return t.copy_(math_extra.addcmul(t, a, b, value=value))
    return t.add_(scaled(a, value).mul(b))


def addcdiv_(t: Tensor, a: Tensor, b: Tensor, value=1) -> Tensor:
    """``t.addcdiv_(a, b, value=value)``: ``t + value * a / b``, with
    PyTorch's left-to-right rounding (once, from float32, for bfloat16 /
    float16 ``t``)."""
    if _reduced(t):
        return t.copy_(math_extra.addcdiv(t, a, b, value=value))
    return t.add_(scaled(a, value).div(b))


def one_minus(x):
    """``1 - x`` for a number or a (0-d) tensor."""
    return F.sub(1, x) if isinstance(x, Tensor) else 1 - x


def lerp_(t: Tensor, end: Tensor, weight, small: bool | None = None) -> Tensor:
    """``t.lerp_(end, weight)`` with PyTorch's two-sided formula (exact at
    both ends); ``small`` is ``abs(weight) < 0.5``, given by the caller
    when ``weight`` is a tensor (a lifted hyperparameter)."""
    if _fused(t):
        # rounded once, as PyTorch's kernel (math_extra.lerp: fma(w, end - t,
        # t) for float32, from float32 for bfloat16 / float16)
        return t.copy_(math_extra.lerp(t, end, weight))
    if small is None:
        small = abs(weight) < 0.5
    if small:
        return t.add_(end.sub(t).mul(weight))
    return t.copy_(end.sub(end.sub(t).mul(one_minus(weight))))


def as_real(p: Tensor, grad: Tensor, state: dict):
    """``(p, grad, state)``, a complex parameter's seen as pairs of reals
    (``view_as_real``, same memory), as PyTorch's Adam, RMSprop and Adagrad
    update them: their second moments are per component, not ``|g|^2``."""
    if p.dtype.category != 3:
        return p, grad, state
    state = {k: view_as_real(v) if isinstance(v, Tensor) and v.dtype.category == 3 else v
             for k, v in state.items()}
    return view_as_real(p), view_as_real(grad), state


# --- the eager NumPy path ------------------------------------------------------------

_NUMBERS = (int, float)
_DIRECT_DTYPES = (dt.float32, dt.float64)


def direct_arrays(p: Tensor, grad: Tensor, state: tuple, *numbers, step: bool = True):
    """The NumPy arrays of ``p``, ``grad`` and the ``state`` tensors when an
    optimizer may update them in place with NumPy (``out=``) instead of
    tensor ops, else None: eagerly only (nothing traces or observes the
    primitives, no gradient is recorded), each hyperparameter in
    ``numbers`` a Python number, ``p`` and ``state[:-1]`` (the moments) of
    one float32 / float64 dtype and shape as root tensors (no views, so a
    write reaches nothing but them), ``state[-1]`` the 0-d ``step`` (with
    ``step=False``: every state tensor a moment, no step; no sparse
    gradient then either).

    Each formula then runs the same NumPy operations in the same order and
    dtypes as its tensor ops (each tensor op is one NumPy ufunc call of
    the same operands; a Python scalar rounded to the tensor's dtype as a
    weak scalar is), so the values are the same bits, without a tensor, a
    dispatch and a copy per operation."""
    if RECORDERS or OP_OBSERVERS or graph.is_grad_enabled() or (not step and SPARSE):
        return None
    for v in numbers:
        if type(v) not in _NUMBERS:
            return None
    d = p.dtype
    if d not in _DIRECT_DTYPES or grad.dtype is not d:
        return None
    shape = p._data.shape
    if not shape:
        # a 0-d parameter meets Adam's 0-d float64 bias corrections as an
        # equal: the formula then computes in float64
        return None
    out = []
    for t in (p, grad) + tuple(state):
        a = t._data
        if type(a) is not np.ndarray:
            return None
        if t is not grad:
            if t._base is not None or t._view_chain or not a.flags.writeable:
                return None
        elif t._view_chain and t._view_version != t._vbox[0]:
            return None
        out.append(a)
    moments = state[:-1] if step else state
    for t, a in zip(moments, out[2:]):
        if t.dtype is not d or a.shape != shape:
            return None
    if out[1].shape != shape:
        return None
    if step and (state[-1].dtype not in _DIRECT_DTYPES or out[-1].shape != ()):
        return None
    return out


def bump(*counts) -> None:
    """Advance the version counters as the tensor ops' in-place writes
    would: ``counts`` alternates tensors and their number of writes."""
    for i in range(0, len(counts), 2):
        counts[i]._vbox[0] += counts[i + 1]
