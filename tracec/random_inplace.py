"""PyTorch's in-place random Tensor methods: ``bernoulli_``,
``exponential_``, ``geometric_``, ``cauchy_``, ``log_normal_``, ``random_``;
and ``torch.normal`` (its four overloads, drawn with ``creation.randn`` so
that it records inside ``tracec.compile``).

Invariants: each fills ``self`` (keeping its shape and dtype) with draws
from tracec's RNG (``tracec.creation``'s generators, ``generator=`` or the
default one) transformed by the distribution's inverse CDF from float64
uniforms in [0, 1); the streams are not PyTorch's, the distributions are.
The parameter checks are PyTorch's (same messages' substance).
"""
from __future__ import annotations

import math

import numpy as np

from tracec import creation, graph
from tracec import dtypes as dt
from tracec.tensor import Tensor


def _uniform(self, generator):
    return creation.rand(tuple(self.shape), dtype=dt.float64, generator=generator)._data


def _fill(self, values: np.ndarray, op: str):
    with graph.no_grad():
        return self._assign(Tensor._make(np.asarray(values).astype(self.dtype.np),
                                         self.dtype), op)


def _floating(self, op):
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{op} expects a floating point tensor, got {self.dtype}")


def bernoulli_(self, p=0.5, *, generator=None):
    """Each element 1 with probability ``p`` (a number, or a tensor
    broadcastable to ``self``), else 0."""
    pv = p._data.astype(np.float64) if isinstance(p, Tensor) else float(p)
    if np.any((np.asarray(pv) < 0) | (np.asarray(pv) > 1)):
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return _fill(self, _uniform(self, generator) < pv, "bernoulli_")


def exponential_(self, lambd=1.0, *, generator=None):
    _floating(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _fill(self, -np.log1p(-_uniform(self, generator)) / lambd, "exponential_")


def geometric_(self, p, *, generator=None):
    """Trials until the first success (support 1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform(self, generator)
    k = np.ceil(np.log1p(-u) / math.log1p(-p))
    return _fill(self, np.maximum(k, 1.0), "geometric_")


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    _floating(self, "cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform(self, generator)
    return _fill(self, median + sigma * np.tan(np.pi * (u - 0.5)), "cauchy_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    _floating(self, "log_normal_")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    z = creation.randn(tuple(self.shape), dtype=dt.float64, generator=generator)._data
    return _fill(self, np.exp(mean + std * z), "log_normal_")


def _default_to(dtype) -> int:
    """PyTorch's upper end of ``random_()``: 2**mantissa digits (exactly
    representable integers) for floats, the largest value for integers."""
    if dtype is dt.bool_:
        return 2
    if dtype.is_floating_point:
        digits = {"float16": 11, "bfloat16": 8, "float32": 24}.get(str(dtype).split(".")[-1], 53)
        return 2 ** digits + 1
    return int(np.iinfo(dtype.np).max) + 1


_UNSET = object()


def random_(self, from_=None, to=_UNSET, *, generator=None, **kw):
    """``random_()`` -> [0, 2**mantissa] (floats) or [0, max] (integers);
    ``random_(to)`` -> [0, to); ``random_(from, to)`` -> [from, to)."""
    if "from" in kw:
        from_ = kw.pop("from")
    if kw:
        raise TypeError(f"random_() got unexpected keyword arguments {sorted(kw)}")
    if to is _UNSET:
        lo, hi = (0, _default_to(self.dtype)) if from_ is None else (0, int(from_))
    elif to is None:
        lo, hi = int(from_ or 0), _default_to(self.dtype)
    else:
        lo, hi = int(from_ or 0), int(to)
    if hi <= lo:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} "
                           f">= to={hi}")
    u = _uniform(self, generator)
    vals = lo + np.floor(u * float(hi - lo))
    vals = np.minimum(vals, hi - 1)
    return _fill(self, vals, "random_")


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, layout=None, pin_memory=False):
    """``torch.normal``: ``mean + std * N(0, 1)`` over ``size`` (two numbers)
    or over the broadcast shape of the tensor arguments.  As in PyTorch the
    draw is not reparameterized: tensors that require grad get zero
    gradients (``NormalBackward``)."""
    from tracec import functions as F
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: two "
                            "numbers need a size, as in normal(mean, std, size)")
        if not std >= 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {float(std):g}")
        z = creation.randn(*((size,) if isinstance(size, int) else tuple(size)),
                           generator=generator, dtype=dtype)
        with graph.no_grad():
            out = F.add(F.mul(z, float(std)), float(mean))
        return out.to(device).requires_grad_(requires_grad) if device is not None \
            else out.requires_grad_(requires_grad)
    if size is not None:
        raise TypeError("normal(): size= is only taken with a number mean and std")
    if isinstance(std, Tensor):
        if bool((std < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {float(std):g}")
    ref = mean if isinstance(mean, Tensor) else std
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    z = creation.randn(*shape, generator=generator, dtype=ref.dtype)
    with graph.no_grad():
        out = F.add(F.mul(z, std), mean)
    if graph.is_grad_enabled() and any(t.requires_grad for t in tensors):
        # PyTorch's derivative of normal is zero in mean and std
        zero = sum(F.mul(t.sum(), 0.0) for t in tensors)
        out = F.add(out, zero)
    return out


def _bernoulli(self, p=None, *, generator=None):
    """``x.bernoulli()``: 0/1 draws with probabilities ``x`` (or the number
    ``p`` for every element), in ``x``'s dtype."""
    probs = self if p is None else creation.full_like(self, float(p))
    pv = probs._data
    if pv.size and not ((pv >= 0) & (pv <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return creation.bernoulli(probs, generator=generator)


Tensor.bernoulli = _bernoulli

for _f in (bernoulli_, exponential_, geometric_, cauchy_, log_normal_, random_):
    setattr(Tensor, _f.__name__, _f)
