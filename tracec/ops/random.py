"""``random_uniform``: counter-based random numbers.

The generator state is a tensor ``int64[2] = (seed, offset)``; element ``i``
of the result is a pure function of ``(seed, offset + i)`` (a SplitMix64
hash), so eager, the interpreter and native backends draw identical numbers
and a compiled function can carry the state as an ordinary tensor.  Written
by hand because none of NumPy's generators is counter-addressable this way.

Each draw keeps as many of the hash's top bits as the dtype's significand
holds (``uniform_bits``), as PyTorch does: 53 for float64, 24 for float32,
11 for float16, 8 for bfloat16.  The value ``k * 2**-bits`` is then exact
in the dtype, so the result lies in [0, 1) (more bits would round up to 1.0
in a half type) and float64 draws are not confined to a 2**-24 grid.

Large eager draws (a model's initialization) run on several threads
(``in_parallel``): each element depends only on its index, so the bits are
the same whatever the split.
"""
from __future__ import annotations

import math
import os

import numpy as np

from tracec import dtypes as dt
from tracec.threads import default_threads
from tracec.ops.core import Primitive, ShapeError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finalizer on uint64 (wrapping arithmetic); an array
    operand is overwritten with its result (the eager dropout's mask drew
    ten uint64 temporaries per element), a scalar's is returned."""
    if isinstance(z, np.ndarray) and z.ndim:
        t = np.right_shift(z, np.uint64(30))
        z ^= t
        z *= _M1
        np.right_shift(z, np.uint64(27), out=t)
        z ^= t
        z *= _M2
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
        return z
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def uniform_bits(dtype: dt.DType) -> int:
    """How many random bits one ``dtype`` draw keeps (its significand)."""
    return {"float64": 53, "float16": 11, "bfloat16": 8}.get(dtype.name, 24)


#: Draws hashed per block: the hash's passes then run in cache (a 130M
#: element VGG initialization spent 8 s streaming its uint64 temporaries
#: through memory twelve times).
_BLOCK = 1 << 15


#: Draws of at least this many elements are split across threads.
PARALLEL_MIN = 1 << 20


def in_parallel(n: int, work) -> None:
    """``work(lo, hi)`` over ``[0, n)`` in ``_BLOCK``-aligned pieces: one
    piece per thread (``TRACEC_NUM_THREADS``, else the cores this process
    may use) when ``n >= PARALLEL_MIN``, else one call.  NumPy's loops
    release the GIL, so the pieces' passes run at once.  The threads are
    this call's (started and joined here, ~0.1 ms against the tens of
    milliseconds of such a draw): none is left idle in the process, or
    inherited half-made by a forked child."""
    k = min(default_threads(), -(-n // _BLOCK)) if n >= PARALLEL_MIN else 1
    if k <= 1:
        work(0, n)
        return
    import threading
    step = -(-(-(-n // k)) // _BLOCK) * _BLOCK
    errors: list = []

    def run(lo, hi):
        try:
            work(lo, hi)
        except BaseException as e:  # re-raised on the calling thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(lo, min(n, lo + step)), daemon=True,
                                name="tracec-rng") for lo in range(step, n, step)]
    for t in threads:
        t.start()
    run(0, min(n, step))
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _uniform_impl(state, *, shape, dtype):
    n = math.prod(shape)
    seed, offset = (int(v) for v in state)
    b = uniform_bits(dtype)
    # k * 2**-b is exact in float32 for b <= 24 (and in float64 for 53):
    # the same values as through float64, in half the passes' bytes.
    work = np.float32 if b <= 24 else np.float64
    u = np.empty(n, work)
    scale = work(1.0 / (1 << b))
    with np.errstate(over="ignore"):
        key = splitmix64(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + _GOLDEN)
    base = np.uint64(offset & 0xFFFFFFFFFFFFFFFF)

    def fill(start, stop):
        with np.errstate(over="ignore"):
            z = np.empty(min(stop - start, _BLOCK), np.uint64)
            for lo in range(start, stop, _BLOCK):
                m = min(_BLOCK, stop - lo)
                zb = z[:m]
                zb[:] = np.arange(lo, lo + m, dtype=np.uint64)
                zb += base
                zb *= _GOLDEN
                zb += key
                splitmix64(zb)
                zb >>= np.uint64(64 - b)
                np.multiply(zb, scale, out=u[lo:lo + m], casting="unsafe")
    in_parallel(n, fill)
    return (u if u.dtype == dtype.np else u.astype(dtype.np)).reshape(shape)


def _uniform_shape(s, *, shape, dtype):
    if tuple(s) != (2,):
        raise ShapeError(f"random_uniform: state must have shape (2,), got {tuple(s)}")
    return tuple(shape)


def _uniform_dtype(d, *, shape, dtype):
    if d is not dt.int64 or not dtype.is_floating_point:
        raise ShapeError(f"random_uniform: needs an int64 state and a float dtype, got {d}, {dtype}")
    return dtype


random_uniform_p = Primitive("random_uniform", kind="random", impl=_uniform_impl,
                             shape_rule=_uniform_shape, dtype_rule=_uniform_dtype, vjp=None)


def random_uniform(state, shape, dtype):
    return random_uniform_p.bind(state, shape=tuple(shape), dtype=dtype)
