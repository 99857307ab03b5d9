"""The rounding of PyTorch's float32 ``dot`` (and ``vdot``, ``inner``, a
1-D @ 1-D ``matmul``, which call it): MKL's ``sdot`` on an AVX-512 CPU.

Measured on torch 2.13 (MKL 2024.2), every length 1..4096 of contiguous
vectors: the products are accumulated with fma into four 16-lane
accumulators (64 elements a step), then two (32), then the first (16);
the last partial block, zero-padded, goes into the first accumulator too.
The accumulators are summed as ``(a0 + a1) + (a2 + a3)``, the 16 lanes
halved twice (``l[i] + l[i + 8]``, then ``+ 4``) and the last four summed
as ``(l0 + l1) + (l2 + l3)``.  Longer vectors (MKL's threaded path),
strided ones and other CPUs round otherwise: ``modelled`` says where this
holds.  Written with tracec primitives, so a traced call records it.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.aten_vec import _capability, intel

__all__ = ["modelled", "sdot", "sdot_np"]

#: the longest vectors the model was checked for (MKL threads longer ones)
MAX_LENGTH = 4096
_W = 16


def modelled(x, y) -> bool:
    """Whether ``sdot`` rounds ``x . y`` as PyTorch does here: float32,
    contiguous, of a known length up to ``MAX_LENGTH``, on an Intel AVX-512
    CPU (MKL's kernels on other vendors' processors were not measured)."""
    n = x.shape[0]
    return (x.dtype is dt.float32 and y.dtype is dt.float32 and isinstance(n, int)
            and 0 < n <= MAX_LENGTH and x.is_contiguous() and y.is_contiguous()
            and _capability() == "avx512" and intel())


def _fma(acc, prod):
    """``acc + prod`` (float32 ``acc``, an exact float64 product) rounded once."""
    return ops.cast(ops.add(ops.cast(acc, dt.float64), prod), dt.float32)


def _lanes(v, width: int):
    return ops.add(ops.slice_(v, (0,), (width,), (1,)), ops.slice_(v, (width,), (2 * width,), (1,)))


def sdot(x, y):
    """``x . y`` (float32 1-D, ``modelled``) rounded as MKL's ``sdot``; a
    0-d float32 tensor, with no gradient (the caller's product carries it)."""
    n = x.shape[0]
    f64 = dt.float64
    prod = ops.mul(ops.cast(ops.stop_gradient(x), f64), ops.cast(ops.stop_gradient(y), f64))
    blocks = -(-n // _W)
    prod = ops.reshape(ops.pad(prod, (0,), (blocks * _W - n,), (0,)), (blocks, _W))

    def block(i):
        return ops.reshape(ops.slice_(prod, (i, 0), (i + 1, _W), (1, 1)), (_W,))
    acc = [ops.zeros((_W,), dt.float32, x) for _ in range(4)]
    i, steps = 0, n // (4 * _W)
    if steps:
        four = ops.reshape(ops.slice_(prod, (0, 0), (4 * steps, _W), (1, 1)), (steps, 4, _W))
        acc4 = ops.zeros((4, _W), dt.float32, x)
        for s in range(steps):
            acc4 = _fma(acc4, ops.reshape(ops.slice_(four, (s, 0, 0), (s + 1, 4, _W), (1, 1, 1)),
                                          (4, _W)))
        acc = [ops.reshape(ops.slice_(acc4, (j, 0), (j + 1, _W), (1, 1)), (_W,)) for j in range(4)]
        i = 4 * steps
    full = n // _W
    if i + 2 <= full:                         # the 32-element step: a0, a1
        acc[0], acc[1] = _fma(acc[0], block(i)), _fma(acc[1], block(i + 1))
        i += 2
    if i + 1 <= full:                         # the 16-element step: a0
        acc[0] = _fma(acc[0], block(i))
        i += 1
    if i < blocks:                            # the zero-padded tail: a0
        acc[0] = _fma(acc[0], block(i))
    v = ops.add(ops.add(acc[0], acc[1]), ops.add(acc[2], acc[3]))
    v = _lanes(_lanes(v, 8), 4)

    def lane(k):
        return ops.reshape(ops.slice_(v, (k,), (k + 1,), (1,)), ())
    return ops.add(ops.add(lane(0), lane(1)), ops.add(lane(2), lane(3)))


def sdot_np(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``sdot`` in NumPy (the eager path: the same steps on arrays): a 0-d
    float32 array."""
    n = x.shape[0]
    blocks = -(-n // _W)
    prod = np.zeros(blocks * _W, np.float64)
    np.multiply(x, y, out=prod[:n], dtype=np.float64)
    prod = prod.reshape(blocks, _W)
    acc = np.zeros((4, _W), np.float32)
    steps = n // (4 * _W)
    for s in range(steps):
        acc = (acc + prod[4 * s:4 * s + 4]).astype(np.float32)
    i, full = 4 * steps, n // _W
    if i + 2 <= full:
        acc[:2] = acc[:2] + prod[i:i + 2]
        i += 2
    if i + 1 <= full:
        acc[0] = acc[0] + prod[i]
        i += 1
    if i < blocks:
        acc[0] = acc[0] + prod[i]
    v = (acc[0] + acc[1]) + (acc[2] + acc[3])
    v = v[:8] + v[8:]
    v = v[:4] + v[4:]
    return np.asarray((v[0] + v[1]) + (v[2] + v[3]), np.float32)
