"""``torch.quasirandom``: the scrambled Sobol' sequence of PyTorch's
``SobolEngine``, bit for bit.

The engine's state follows ATen's ``SobolEngineOps.cpp``: ``sobolstate``
(``[dimension, 30]`` int64 direction numbers, built from Joe & Kuo's table
in ``tracec/data/sobol_direction_numbers.npz`` by Bratley & Fox's
recurrence), optionally scrambled by a random shift and random lower
triangular matrices drawn, as PyTorch draws them, from a ``Generator``
seeded with ``seed`` (or the default generator); ``quasi`` is the last
point as 30-bit integers.  Invariant: after ``num_generated`` points,
``quasi`` is the shift XORed with the direction numbers of the Gray-code
sequence 0..num_generated-2 (PyTorch returns the shift itself as the first
point), so ``draw``, ``fast_forward`` and ``reset`` compose as PyTorch's.
Points are the integers converted to the dtype, then times 2**-30.
"""
from __future__ import annotations

from importlib import resources

import numpy as np

from tracec import dtypes as dt
from tracec.creation import Generator, arange, randint
from tracec.tensor import Tensor

__all__ = ["SobolEngine"]

_TABLE: dict = {}


def _table():
    if not _TABLE:
        with resources.files("tracec.data").joinpath("sobol_direction_numbers.npz").open("rb") as f:
            with np.load(f) as npz:
                _TABLE["poly"] = npz["poly"].astype(np.int64)
                _TABLE["vinit"] = npz["vinit"].astype(np.int64)
    return _TABLE["poly"], _TABLE["vinit"]


def _initial_state(dimension: int, maxbit: int) -> np.ndarray:
    """``_sobol_engine_initialize_state_``: row 0 all ones, row d from the
    table's first m = deg(poly[d]) numbers and the recurrence
    v_j = v_{j-m} ^ XOR_k a_k 2^(k+1) v_{j-k-1}; then column j times 2^(maxbit-1-j)."""
    poly, vinit = _table()
    p = poly[:dimension]
    m = np.array([int(v).bit_length() - 1 for v in p], np.int64)
    ss = np.zeros((dimension, maxbit), np.int64)
    cols = np.arange(vinit.shape[1])
    ss[:, :vinit.shape[1]] = np.where(cols < m[:, None], vinit[:dimension], 0)
    ss[0, :] = 1
    for j in range(1, maxbit):
        rows = np.nonzero(m <= j)[0]
        rows = rows[rows > 0]
        if not len(rows):
            continue
        mr = m[rows]
        newv = ss[rows, j - mr]
        for k in range(int(mr.max())):
            use = (k < mr) & (((p[rows] >> np.maximum(mr - 1 - k, 0)) & 1) == 1)
            newv = np.where(use, newv ^ ((2 << k) * ss[rows, j - k - 1]), newv)
        ss[rows, j] = newv
    return ss * (1 << np.arange(maxbit - 1, -1, -1, dtype=np.int64))


def _scrambled(state: np.ndarray, ltm: np.ndarray, maxbit: int) -> np.ndarray:
    """``_sobol_engine_scramble_``: each direction number v becomes the
    number whose bit (maxbit-1-p) is the parity of (row p of L) AND v, L the
    dimension's lower triangular bit matrix with a unit diagonal (row p read
    as the integer with bit (maxbit-1-k) = L[p, k])."""
    L = ltm.copy()
    idx = np.arange(maxbit)
    L[:, idx, idx] = 1
    bits_v = (state[:, :, None] >> idx) & 1                 # [d, j, b]
    bits_l = L[:, :, ::-1]                                  # [d, p, b]: bit b = L[p, maxbit-1-b]
    parity = np.einsum("djb,dpb->djp", bits_v, bits_l) % 2
    return (parity << (maxbit - 1 - idx)).sum(-1).astype(np.int64)


def _rightmost_zero(n: np.ndarray) -> np.ndarray:
    """The index of the lowest zero bit of each n."""
    return np.log2((~n & (n + 1)).astype(np.float64)).astype(np.int64)


class SobolEngine:
    r"""``torch.quasirandom.SobolEngine(dimension, scramble=False, seed=None)``:
    draws points of the (scrambled) Sobol' sequence, equal to PyTorch's."""
    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension, scramble=False, seed=None):
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError("Supported range of dimensionality "
                             f"for SobolEngine is [1, {self.MAXDIM}]")
        self.seed = seed
        self.scramble = scramble
        self.dimension = dimension
        state = _initial_state(dimension, self.MAXBIT)
        if not self.scramble:
            self.shift = Tensor._make(np.zeros(dimension, np.int64), dt.int64)
        else:
            g = None
            if self.seed is not None:
                g = Generator()
                g.manual_seed(self.seed)
            # PyTorch's draws, in its order: the shift's bits, then the matrices
            shift_ints = randint(2, (self.dimension, self.MAXBIT), generator=g)
            self.shift = shift_ints @ (2 ** arange(0, self.MAXBIT))
            ltm = randint(2, (self.dimension, self.MAXBIT, self.MAXBIT), generator=g).tril()
            state = _scrambled(state, ltm.numpy(), self.MAXBIT)
        self.sobolstate = Tensor._make(state, dt.int64)
        self.quasi = self.shift.clone()
        self._first_point = (self.quasi / 2 ** self.MAXBIT).reshape(1, -1)
        self.num_generated = 0

    def _advance(self, n: int, start: int) -> np.ndarray:
        """The next ``n`` points (int64) after Gray-code index ``start``;
        ``quasi`` becomes the last."""
        state = self.sobolstate.numpy()
        n = max(n, 0)
        steps = state[:, _rightmost_zero(np.arange(start, start + n, dtype=np.int64))].T
        pts = np.bitwise_xor.accumulate(steps, axis=0) ^ self.quasi.numpy()[None]
        if n > 0:
            self.quasi = Tensor._make(pts[-1].copy(), dt.int64)
        return pts

    def _points(self, n: int, start: int, dtype) -> Tensor:
        d = dt.to_dtype(dtype)
        if n < 0:       # (draw(0) as the first call asks ATen for n - 1 = -1 points)
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: "
                               f"[{n}, {self.dimension}]")
        if d not in (dt.float32, dt.float64):      # ATen dispatches float and double only
            raise NotImplementedError(f'"_sobol_engine_draw" not implemented for '
                                      f"'{dt.scalar_type_name(d)}'")
        ints = self._advance(n, start)
        return Tensor._make(ints, dt.int64).to(d) * (1.0 / (1 << self.MAXBIT))

    def draw(self, n=1, out=None, dtype=None):
        r"""The next ``n`` points, ``[n, dimension]`` of ``dtype`` (default:
        the default dtype)."""
        from tracec.shape_ops import cat
        if dtype is None:
            dtype = dt.get_default_dtype()
        if self.num_generated == 0:
            if n == 1:
                result = self._first_point.to(dtype)
            else:
                result = self._points(n - 1, self.num_generated, dtype)
                result = cat((self._first_point.to(dtype), result), dim=-2)
        else:
            result = self._points(n, self.num_generated - 1, dtype)
        self.num_generated += n
        if out is not None:
            out.resize_as_(result).copy_(result)
            return out
        return result

    def draw_base2(self, m, out=None, dtype=None):
        r"""``2**m`` points, refusing a total that is not a power of 2."""
        n = 2 ** m
        total_n = self.num_generated + n
        if not (total_n & (total_n - 1) == 0):
            raise ValueError("The balance properties of Sobol' points require "
                             f"n to be a power of 2. {self.num_generated} points have been "
                             f"previously generated, then: n={self.num_generated}+2**{m}={total_n}. "
                             "If you still want to do this, please use "
                             "'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self):
        r"""Back to the first point."""
        self.quasi = self.shift.clone()
        self.num_generated = 0
        return self

    def fast_forward(self, n):
        r"""Skips ``n`` points."""
        if self.num_generated == 0:
            self._advance(n - 1, self.num_generated)
        else:
            self._advance(n, self.num_generated - 1)
        self.num_generated += n
        return self

    def __repr__(self):
        fmt_string = [f"dimension={self.dimension}"]
        if self.scramble:
            fmt_string += ["scramble=True"]
        if self.seed is not None:
            fmt_string += [f"seed={self.seed}"]
        return self.__class__.__name__ + "(" + ", ".join(fmt_string) + ")"
