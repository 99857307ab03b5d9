"""PyTorch's in-place random Tensor methods: ``bernoulli_``,
``exponential_``, ``geometric_``, ``cauchy_``, ``log_normal_``, ``random_``;
and ``torch.normal`` (its four overloads, drawn with ``creation.randn`` so
that it records inside ``tracec.compile``).

Invariants: each fills ``self`` (keeping its shape and dtype) with draws
from tracec's RNG (``tracec.creation``'s generators, ``generator=`` or the
default one) transformed by the distribution's inverse CDF from float64
uniforms in [0, 1); eagerly (``Generator.eager_mt``) PyTorch's own draws
and transforms (``torch_rng``), so that the numbers are PyTorch's.
The transforms are primitives on the drawn tensors, written back with
``_assign``, so a compiled function records them and draws fresh values at
every call (a NumPy transform of the draws would be a constant of the
trace: every compiled call would replay the first call's numbers).
The parameter checks are PyTorch's (same messages' substance).
"""
from __future__ import annotations

import math

import numpy as np

from tracec import creation, graph, ops, torch_rng
from tracec import dtypes as dt
from tracec.math_extra import ceil, floor
from tracec.tensor import Tensor

_WORK = dt.float64


def _uniform(self, generator) -> Tensor:
    # A meta tensor's draw is meta too: nothing drawn, the write dropped.
    return creation.rand(tuple(self.shape), dtype=_WORK, generator=generator,
                         device="meta" if self.is_meta else None)


_GRAD_FN = {"bernoulli_": "BernoulliBackward2", "exponential_": "ExponentialBackward0",
            "geometric_": "GeometricBackward0", "cauchy_": "CauchyBackward0",
            "log_normal_": "LogNormalBackward0", "random_": "RandomBackward2"}


def _fill(self, values: Tensor, op: str):
    # the draws replace self's values: a self that requires grad keeps a
    # history with zero gradient (PyTorch's), never its old node's
    from tracec.methods import filled
    return self._assign(filled(self, values, _GRAD_FN[op]), op)


def _broadcasts(src, dst) -> bool:
    try:
        return np.broadcast_shapes(tuple(src), tuple(dst)) == tuple(dst)
    except ValueError:
        return False


def _floating(self, op):
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{op} expects a floating point tensor, got {self.dtype}")


def bernoulli_(self, p=0.5, *, generator=None):
    """Each element 1 with probability ``p`` (a number, or a tensor
    broadcastable to ``self``), else 0."""
    if isinstance(p, Tensor):
        # PyTorch's check of a tensor p; while tracing a recorded check, so
        # that a compiled call checks its own p.
        pv = creation.checked_probabilities(p)
    else:
        pv = float(p)
        if not 0 <= pv <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and not self.is_meta and (
            not isinstance(pv, Tensor) or type(pv._data) is np.ndarray):
        # PyTorch's stream: float64 uniforms for a number p, float32 ones
        # (one per element of self) for a tensor p
        if isinstance(pv, Tensor):
            p_b = np.broadcast_to(np.asarray(pv._data), tuple(self.shape)) \
                if _broadcasts(pv.shape, self.shape) else None
            if p_b is None:
                raise RuntimeError(f"bernoulli_: p of shape {tuple(p.shape)} cannot be broadcast "
                                   f"to self of shape {tuple(self.shape)}")
            # one uniform per element of self in self's storage order (the
            # TensorIterator follows its output's strides)
            perm = creation.memory_order(self)
            hit = creation.ordered_draw(tuple(self.shape), perm, lambda n: torch_rng.bernoulli_tensor(
                mt, np.transpose(p_b, perm)))
        else:
            hit = creation.memory_order_draw(
                self, lambda n: torch_rng.bernoulli_scalar(mt, n, pv))
        return _fill(self, Tensor._make(np.ascontiguousarray(hit), dt.bool_), "bernoulli_")
    with graph.no_grad():
        pt = ops.cast(pv.detach(), _WORK) if isinstance(pv, Tensor) else pv
        hit = ops.lt(_uniform(self, generator), pt)
    if tuple(hit.shape) != tuple(self.shape):
        raise RuntimeError(f"bernoulli_: p of shape {tuple(p.shape)} cannot be broadcast to "
                           f"self of shape {tuple(self.shape)}")
    return _fill(self, hit, "bernoulli_")


def exponential_(self, lambd=1.0, *, generator=None):
    _floating(self, "exponential_")
    if not lambd > 0:
        # (the number as C++ prints a double: 0, -1.5, -1e-07)
        raise RuntimeError("exponential_ expects lambda > 0.0, but found "
                           f"lambda={float(lambd):g}")
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and not self.is_meta:
        x = creation.memory_order_draw(self, lambda n: torch_rng.exponential(
            mt, n, creation.carrier(self.dtype), float(lambd)))
        return _fill(self, creation.drawn(x, self.shape, self.dtype), "exponential_")
    with graph.no_grad():
        # 1 - u lies in (0, 1]: the log is finite.
        x = ops.div(ops.log(ops.sub(1.0, _uniform(self, generator))), -float(lambd))
    return _fill(self, x, "exponential_")


def geometric_(self, p, *, generator=None):
    """Trials until the first success (support 1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and not self.is_meta:
        k = creation.memory_order_draw(self, lambda n: torch_rng.geometric(
            mt, n, creation.carrier(self.dtype), float(p)))
        return _fill(self, creation.drawn(k, self.shape, self.dtype), "geometric_")
    with graph.no_grad():
        u = _uniform(self, generator)
        k = ceil(ops.div(ops.log(ops.sub(1.0, u)), math.log1p(-p)))
        k = ops.maximum(k, 1.0)
    return _fill(self, k, "geometric_")


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    _floating(self, "cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and not self.is_meta:
        x = creation.memory_order_draw(self, lambda n: torch_rng.cauchy(
            mt, n, creation.carrier(self.dtype), float(median), float(sigma)))
        return _fill(self, creation.drawn(x, self.shape, self.dtype), "cauchy_")
    with graph.no_grad():
        a = ops.mul(ops.sub(_uniform(self, generator), 0.5), math.pi)
        # tan as sin / cos (no tan primitive); at u = 0, cos(-pi/2) is ~6e-17,
        # not 0, so the quotient stays finite, as NumPy's tan(-pi/2).
        x = ops.add(ops.mul(ops.div(ops.sin(a), ops.cos(a)), float(sigma)), float(median))
    return _fill(self, x, "cauchy_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    _floating(self, "log_normal_")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and not self.is_meta:
        x = creation.memory_order_draw(self, lambda n: torch_rng.log_normal(
            mt, n, creation.carrier(self.dtype), float(mean), float(std)))
        return _fill(self, creation.drawn(x, self.shape, self.dtype), "log_normal_")
    with graph.no_grad():
        z = creation.randn(tuple(self.shape), dtype=_WORK, generator=generator)
        x = ops.exp(ops.add(ops.mul(z, float(std)), float(mean)))
    return _fill(self, x, "log_normal_")


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
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and not self.is_meta:
        if to is _UNSET and from_ is None or to is None and not from_:
            def draw(n):                  # PyTorch's unbounded draw
                return torch_rng.random_full(mt, n, creation.carrier(self.dtype),
                                             8 if self.dtype is dt.bfloat16 else None)
        else:
            def draw(n):
                return torch_rng.randint(mt, n, lo, hi)
        vals = creation.memory_order_draw(self, draw)
        return _fill(self, creation.drawn(vals, self.shape, self.dtype), "random_")
    with graph.no_grad():
        u = _uniform(self, generator)
        # In float64, as PyTorch's bound checks: u * span < span, and the
        # minimum guards the rounding of a span that float64 cannot hold.
        vals = ops.add(floor(ops.mul(u, float(hi - lo))), float(lo))
        vals = ops.minimum(vals, float(hi - 1))
    return _fill(self, vals, "random_")


def _bernoulli(self, p=None, *, generator=None):
    """``x.bernoulli()``: 0/1 draws with probabilities ``x`` (or the number
    ``p`` for every element), in ``x``'s dtype."""
    if p is not None and (generator or creation.default_generator).eager_mt() is not None:
        # PyTorch's: empty_like(x).bernoulli_(p), float64 uniforms < p
        return bernoulli_(creation.empty_like(self), p, generator=generator)
    probs = self if p is None else creation.full_like(self, float(p))
    pv = probs._data
    if pv.size and not ((pv >= 0) & (pv <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return creation.bernoulli(probs, generator=generator)


Tensor.bernoulli = _bernoulli

for _f in (bernoulli_, exponential_, geometric_, cauchy_, log_normal_, random_):
    setattr(Tensor, _f.__name__, _f)
