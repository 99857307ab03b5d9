"""PyTorch's CPU random streams, drawn with NumPy: eager ``manual_seed(s)``
followed by ``rand``, ``randn``, ``uniform_``, ``normal_``, ``randint``,
``randperm``, ``bernoulli_`` (dropout) gives PyTorch's numbers.

PyTorch's CPU generator (``CPUGeneratorImpl``) is a 32-bit Mersenne
Twister seeded with ``init_genrand(seed & 0xffffffff)``, plus a cached
second Box-Muller sample for its scalar normal path.  NumPy's ``MT19937``
bit generator is the same engine: ``random_raw`` yields its tempered 32-bit
words in C, so only the seeding (``_key``) and PyTorch's transforms of the
words are written here.  The transforms (ATen's ``TransformationHelper.h``,
``DistributionTemplates.h`` and ``cpu/DistributionKernels.cpp`` at torch
2.13), each checked against torch 2.13 by ``tests/test_torch_rng.py``:

- ``random()``: one word; ``random64()``: two, the first the high half.
- uniform float32 (float16, bfloat16 too): the word's low 24 bits times
  2**-24, then ``fma(x, to - from, from)`` in float, then rounded to the
  dtype; float64: the low 53
  bits of ``random64()`` times 2**-53, the same fma in double.  A value
  that rounds up to ``to`` becomes ``from``.  Bit-exact.
- normal, float tensors of >= 16 contiguous elements (``normal_fill``):
  the tensor filled with uniforms, then each block of 16 turned by
  Box-Muller in place (``u1 = 1 - data[j]``, ``u2 = data[j + 8]``), the
  last partial block redone from 16 fresh uniforms over the tensor's last
  16 elements.  float64: bit-exact.  float32: PyTorch's AVX2 kernel
  (``normal_fill_16_AVX2``, taken on this AVX2 / AVX-512 CPU) with its
  own float32 log and sincos (``avx_mathfun.h``), emulated operation by
  operation (``_log_ps``, ``_sincos_ps``): bit-exact in every value
  measured (64000 of them).
- normal, fewer than 16 elements (or not contiguous): ``normal_distribution
  <double>``: ``u1``, ``u2`` from ``random64()``, ``r = sqrt(-2 log1p(-u2))``,
  ``theta = 2 pi u1``, returns ``r cos(theta)`` and caches ``r sin(theta)``
  for the next such draw (the generator's ``next_double_normal_sample``).
- normal, float16 / bfloat16 tensors of >= 16 contiguous elements: as
  float32 but without the fill of the whole tensor: each block of 16 (and
  the redone last 16) from its own 16 fresh float32 uniforms, Box-Muller in
  float32 as the AVX2 kernel computes it, then rounded: ``n - n % 16``
  words, plus 16 for a partial block.  Bit-exact.
- ``log_normal_(mean, std)``: ``exp`` of the scalar ``normal_distribution
  <double>`` above (cached second sample included) for every size.
- ``geometric_(p)``: ``ceil(log(u) / log1p(-p))`` of float64 uniforms;
  ``cauchy_(median, sigma)``: ``median + sigma tan(pi (u - 1/2))``.
- ``rrelu`` training: one float64 uniform in [lower, upper) per element
  ``<= 0`` of the contiguous input (row-major), none for the others.
- ``_standard_gamma(alpha)`` (``sample_gamma``, Marsaglia-Tsang): per
  element in order, for ``alpha < 1`` first ``scale = (1 - u) ** (1 /
  alpha)``, ``alpha += 1``; then ``d = alpha - 1/3`` (``1.0f / 3.0f``),
  ``c = 1 / sqrt(9 d)``, loop: scalar double normals ``x`` until ``y = 1
  + c x > 0``, ``v = y**3``, ``u = 1 - uniform``, accept when ``u < 1 -
  0.0331f x**4`` or ``log u < x**2 / 2 + d (1 - v + log v)``; returns
  ``scale d v``.  float32 ``alpha``: ``alpha + 1`` and ``d`` in float;
  ``_sample_dirichlet`` samples in double throughout.
- ``poisson(rate)``: ``rate >= 10``: Hoermann's transformed rejection
  (two float64 uniforms a try); else multiply uniforms until the product
  is ``<= exp(-rate)``.
- ``binomial(count, prob)`` (``sample_binomial``): ``prob > 0.5`` draws
  ``count - X`` with ``1 - prob``; ``count * prob >= 10``: BTRS (two
  float64 uniforms a try), else inversion (sum ``ceil(log u / log1p(-p))``
  until past ``count``); float32 tensors round ``count * prob``,
  ``1 - prob``, ``k`` and ``log1p(-p)`` in float as the template does.
- ``randint`` / ``random_(from, to)``: ``random()`` (``random64()`` when the
  range is >= 2**32) modulo the range, plus ``from``.
- ``randperm(n)``: Fisher-Yates, ``z = random() % (n - i)``, swap ``i, z + i``
  (``random64()`` from ``n >= 2**32 / 20``).
- ``bernoulli_(p)`` with a number ``p``: ``uniform64 < p``; with a tensor
  ``p``: float32 uniforms ``< p``.

A strided tensor is filled in memory order (``creation.memory_order_draw``):
``uniform_`` and the other in-place draws, dropout's ``empty_like(x)``
mask, and a random ``*_like`` in the layout ``empty_like`` gives it.

The float32 / float64 / float16 / bfloat16 normals of ``normal_fill`` and
``randperm`` also run as native kernels (``NATIVE``: the cpu backend's
``rng_kernels``, the same operations in LLVM IR, compiled once per
machine), with their words, and those of ``uniform``, ``randint`` and
``random_full`` from ``WORDS_NATIVE_MIN`` draws on, from a native
Mersenne Twister working on NumPy's own ``MT19937`` state: the same words
in the same order, the same values bit for bit, 3-90x faster than the
NumPy paths here (one core, 1M elements: ``rand`` 6x, ``randn`` 30x,
float64 ``randn`` 4.5x; ``randperm(60000)`` 85x).  They are used once a
process has drawn ``NATIVE_WARMUP`` elements' worth through these paths
(loading them costs a process ~10-30 ms, the first process on a machine
~0.1-0.3 s more to compile them), never with ``TRACEC_NATIVE_RNG=0``
(``NATIVE_ON``), and where they cannot be made (no llvmlite, a failed
build) the NumPy path runs, after one warning.

These are the eager draws only.  A compiled function draws from the
counter-based ``random_uniform`` primitive (``creation.Generator.state``),
as ``torch.compile``'s kernels draw from Philox rather than from eager
PyTorch's stream: after the same seed, a compiled step's dropout mask is
not the eager step's.  ``TRACEC_TORCH_RNG=0`` (or ``counter_draws()``)
makes eager draws use the counter-based stream too, so that eager and
compiled draws are bit-identical (as ``torch._inductor.config.
fallback_random`` makes them in PyTorch, from the other side).
"""
from __future__ import annotations

import contextlib
import math
import os
import struct

import numpy as np

#: ``[enabled]``: whether eager draws follow PyTorch's streams.
STREAMS = [os.environ.get("TRACEC_TORCH_RNG", "1") != "0"]


@contextlib.contextmanager
def counter_draws():
    """Eager draws from the compiled code's counter-based stream for a block."""
    old = STREAMS[0]
    STREAMS[0] = False
    try:
        yield
    finally:
        STREAMS[0] = old

#: ``[enabled]``: ``torch._inductor.config.fallback_random``: a function
#: being traced draws from PyTorch's eager streams (``Generator.eager_mt``),
#: and counts those draws in ``TRACED_EAGER_DRAWS``, so that its compiled
#: calls run eagerly: PyTorch's compiled code then calls the eager random
#: kernels, and tracec's native code cannot call back into them.
FALLBACK_RANDOM = [False]
#: ``[count]``: eager draws made while a function was traced (above).
TRACED_EAGER_DRAWS = [0]

#: ``[depth]``: how many ``vmap(..., randomness="error")`` calls (PyTorch's
#: default) are running: a draw then raises, as PyTorch's.
VMAP_NO_RANDOM = [0]

VMAP_RANDOM_MSG = ("vmap: called random operation while in randomness error mode. Please "
                   "either use the 'same' or 'different' randomness flags on vmap or perform "
                   "the randomness operation out of vmap")

_N = 624
_U64 = np.uint64

#: Makers of the native kernels: ``maker() -> kernels`` (raising where they
#: cannot be made; ``tracec.backends.cpu.rng_kernels.Kernels``), registered
#: by the package at import: this base layer may not import the backend.
NATIVE: list = []
#: ``[enabled]``: whether draws may use the native kernels.
NATIVE_ON = [os.environ.get("TRACEC_NATIVE_RNG", "1") != "0"]
#: The native kernels are made once this many elements' worth of draws
#: (each call counted as ``NATIVE_CALL`` more, for the NumPy path's fixed
#: cost) went through the NumPy paths they replace: ~15 ms of float32
#: normals, about what loading the kernels costs, so a script drawing a
#: few small tensors never pays for it.  Counted in elements, not time, so
#: a program switches at the same call on every run (the values are the
#: same either way).
NATIVE_WARMUP = 1 << 19
NATIVE_CALL = 8192
_native_seen = [0]
_native_made: list = []       # [kernels, or None after a failure] once made


def _native(n: int):
    """The native kernels for a draw of ``n`` elements, or None (the NumPy
    path then runs: not enabled, not yet warmed up, or not buildable)."""
    if _native_made:
        return _native_made[0] if NATIVE_ON[0] else None
    if not NATIVE or not NATIVE_ON[0]:
        return None
    _native_seen[0] += n + NATIVE_CALL
    if _native_seen[0] < NATIVE_WARMUP:
        return None
    try:
        kernels = NATIVE[0]()
    except Exception as e:  # noqa: BLE001  (any failure: the NumPy path stays correct)
        import warnings
        warnings.warn(f"tracec: no native random kernels ({type(e).__name__}: {e}); "
                      f"the NumPy transforms run instead (same values)", RuntimeWarning,
                      stacklevel=3)
        kernels = None
    _native_made[:] = [kernels]
    return kernels


def _key(seed: int) -> np.ndarray:
    """MT19937's ``init_genrand`` of the low 32 bits of ``seed``."""
    key = np.empty(_N, np.uint32)
    x = int(seed) & 0xFFFFFFFF
    key[0] = x
    for j in range(1, _N):
        x = (1812433253 * (x ^ (x >> 30)) + j) & 0xFFFFFFFF
        key[j] = x
    return key


def _legacy_seeding_is_init_genrand() -> bool:
    """Whether NumPy's ``MT19937._legacy_seeding`` (its C ``mt19937_seed``,
    RandomState's seeding) leaves the state ``_key`` makes: the same
    ``init_genrand``, a hundred times faster than the Python loop (a
    ``torch.Generator().manual_seed(s)`` per draw, as torchsde's Brownian
    intervals do, spent most of its time there)."""
    try:
        bits = np.random.MT19937()
        bits._legacy_seeding(5489)
        st = bits.state["state"]
        return int(st["pos"]) == _N and bool((st["key"] == _key(5489)).all())
    except Exception:  # noqa: BLE001  (a NumPy without it: the Python loop)
        return False


_FAST_SEED = _legacy_seeding_is_init_genrand()


class MTState:
    """One generator's Mersenne Twister and its cached normal sample."""

    __slots__ = ("bits", "next_double", "next_float")

    def __init__(self, seed: int = 67280421310721):
        self.bits = np.random.MT19937()
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """``init_genrand`` of the low 32 bits of ``seed`` (PyTorch's)."""
        if _FAST_SEED:
            self.bits._legacy_seeding(int(seed) & 0xFFFFFFFF)
        else:
            self.bits.state = {"bit_generator": "MT19937",
                               "state": {"key": _key(seed), "pos": _N}}
        self.next_double = None
        self.next_float = None

    def copy(self) -> "MTState":
        c = MTState.__new__(MTState)
        c.bits = np.random.MT19937()
        c.bits.state = self.bits.state
        c.next_double, c.next_float = self.next_double, self.next_float
        return c

    # --- raw words ---------------------------------------------------------------

    def random(self, n: int) -> np.ndarray:
        """``n`` words (uint64 holding 32 bits)."""
        return self.bits.random_raw(n)

    def random64(self, n: int) -> np.ndarray:
        r = self.bits.random_raw(2 * n).reshape(n, 2)
        return (r[:, 0] << _U64(32)) | r[:, 1]

    # --- PyTorch's byte layout (THGeneratorStateNew, 5056 bytes) -------------------

    def to_bytes(self, initial_seed: int, extra: int = 0) -> bytes:
        """``torch.get_rng_state()``'s bytes; ``extra`` (tracec's compiled
        offset) rides in the legacy ``normal_x`` field PyTorch writes as 0."""
        st = self.bits.state["state"]
        pos = int(st["pos"])
        # PyTorch's engine: ``left`` words remain before its next twist,
        # ``next`` indexes the next one; freshly seeded, left = 1, next = 0.
        left, nxt = (1, 0) if pos >= _N else (_N - pos + 1, pos)
        head = struct.pack("<QiiQ", initial_seed & 0xFFFFFFFFFFFFFFFF, left, 1, nxt)
        words = np.asarray(st["key"], np.uint64).astype("<u8").tobytes()
        valid = self.next_double is not None
        tail = struct.pack("<qdd", extra, float(self.next_double) if valid else 0.0, 0.0)
        tail += struct.pack("<i4x", int(valid))
        fvalid = self.next_float is not None
        tail += struct.pack("<f?3x", float(self.next_float) if fvalid else 0.0, fvalid)
        out = head + words + tail
        assert len(out) == STATE_BYTES
        return out

    @classmethod
    def from_bytes(cls, data: bytes) -> tuple["MTState", int, int]:
        """(state, initial seed, extra) from ``to_bytes``' layout."""
        if len(data) != STATE_BYTES:
            raise RuntimeError(f"Expected either a THGeneratorState of size {STATE_BYTES - 8} or "
                               f"a THGeneratorStateNew of size {STATE_BYTES} but found the input "
                               f"RNG state size to be {len(data)}")
        seed, left, _, nxt = struct.unpack_from("<QiiQ", data, 0)
        words = np.frombuffer(data, "<u8", _N, 24).astype(np.uint32)
        extra, normal_y, _ = struct.unpack_from("<qdd", data, 24 + 8 * _N)
        (valid,) = struct.unpack_from("<i", data, 48 + 8 * _N)
        fsample, fvalid = struct.unpack_from("<f?", data, 56 + 8 * _N)
        s = cls.__new__(cls)
        s.bits = np.random.MT19937()
        pos = _N if left <= 1 else int(nxt)
        s.bits.state = {"bit_generator": "MT19937", "state": {"key": words, "pos": pos}}
        s.next_double = normal_y if valid else None
        s.next_float = fsample if fvalid else None
        return s, seed, extra


STATE_BYTES = 5056

_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24}


def uniform(mt: MTState, n: int, np_dtype, lo: float = 0.0, hi: float = 1.0,
            reduced: str | None = None, fused: bool = True) -> np.ndarray:
    """``n`` uniforms in [lo, hi) of ``np_dtype``: float64 from 53 bits,
    every other float type as float32 from 24 bits (PyTorch draws half and
    bfloat16 through float: measured, torch 2.13), then rounded.  The
    range: ``x * (to - from) + from`` with one rounding (the compiler's
    fused multiply-add), in float for float16 / bfloat16, and a value that
    rounds up to ``to`` in the dtype replaced by ``from`` (PyTorch keeps
    the draws below ``to``); ``reduced``
    names the dtype ("float16", "bfloat16") when ``np_dtype`` is only its
    carrier.  ``fused=False``: float64 ``x * (to - from) + from`` rounded
    twice, as ATen code outside its per-CPU kernels computes it (rrelu)."""
    d = np.dtype(np_dtype)
    if d == np.float64:
        kernels = _native(2 * n) if n >= WORDS_NATIVE_MIN else None
        if kernels is not None:
            x = kernels.words64(mt, n, np.float64)
        else:
            x = (mt.random64(n) & _U64((1 << 53) - 1)).astype(np.float64) * 2.0 ** -53
        if (lo, hi) == (0.0, 1.0):
            return x
        x = _fma64(x, hi - lo, lo) if fused else x * (hi - lo) + lo
        x[x >= hi] = lo
        return x
    raw = _words(mt, n)
    np.bitwise_and(raw, raw.dtype.type(0xFFFFFF), out=raw)
    x = raw.astype(np.float32)
    x *= np.float32(2.0 ** -24)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    if (lo, hi) != (0.0, 1.0):            # (x * 1 + 0 is x: skipped)
        x = _fma(x, hi32 - lo32, lo32)
    rnd = _ROUND.get(reduced or d.name)
    if rnd is not None:                   # the dtype's rounding, then the check
        x = rnd(x)
        x[x >= rnd(hi32)] = rnd(lo32)
    elif (lo, hi) != (0.0, 1.0):          # (x < 1 in float32)
        x[x >= hi32] = lo32
    return x if d == np.float32 else x.astype(d)


#: Draws of at least this many words take them from the native twister
#: (``NATIVE``): below it NumPy's ``random_raw`` costs less than the call.
WORDS_NATIVE_MIN = 1024


def _words(mt: MTState, n: int) -> np.ndarray:
    """``mt.random(n)``'s words: uint32 from the native twister, else uint64."""
    kernels = _native(n) if n >= WORDS_NATIVE_MIN else None
    return mt.random(n) if kernels is None else kernels.words(mt, n)


def _words64(mt: MTState, n: int) -> np.ndarray:
    """``mt.random64(n)``, from the native twister where ``_words`` would."""
    kernels = _native(2 * n) if n >= WORDS_NATIVE_MIN else None
    return mt.random64(n) if kernels is None else kernels.words64(mt, n)


def _fma64(a: np.ndarray, b: float, c: float) -> np.ndarray:
    """float64 ``a * b + c`` rounded once, from the exact product and sum
    (Dekker's product, Knuth's sum): ``p + e == a * b``, ``s + t == p + c``."""
    def split(v):
        big = v * 134217729.0                 # 2**27 + 1
        hi = big - (big - v)
        return hi, v - hi
    p = a * b
    ah, al = split(a)
    bh, bl = split(np.float64(b))
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    v = s - p
    t = (p - (s - v)) + (c - v)
    return s + (t + e)


def _round_bf16(x):
    """float32 -> bfloat16 (round to nearest even), as float32."""
    bits = np.atleast_1d(np.asarray(x, np.float32)).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    return bits.view(np.float32)[0] if np.ndim(x) == 0 else bits.view(np.float32)


_ROUND = {"float16": lambda v: np.asarray(v, np.float16).astype(np.float32),
          "bfloat16": _round_bf16}


def exponential(mt: MTState, n: int, np_dtype, lambd: float) -> np.ndarray:
    """``exponential_(lambd)``: ``-log1p(-u) / lambd`` of float64 uniforms."""
    u = uniform(mt, n, np.float64)
    return (-1.0 / lambd * _libm(math.log1p, -u)).astype(np_dtype)


def geometric(mt: MTState, n: int, np_dtype, p: float) -> np.ndarray:
    """``geometric_(p)``: ``ceil(log(u) / log1p(-p))`` of float64 uniforms."""
    u = uniform(mt, n, np.float64)
    with np.errstate(divide="ignore"):          # (u = 0: PyTorch's inf too)
        return np.ceil(_libm(math.log, u) / math.log1p(-p)).astype(np_dtype)


def cauchy(mt: MTState, n: int, np_dtype, median: float, sigma: float) -> np.ndarray:
    """``cauchy_(median, sigma)``: ``median + sigma tan(pi (u - 1/2))`` of
    float64 uniforms."""
    u = uniform(mt, n, np.float64)
    return _fma64(_libm(math.tan, np.pi * (u - 0.5)), sigma, median).astype(np_dtype)


def log_normal(mt: MTState, n: int, np_dtype, mean: float, std: float) -> np.ndarray:
    """``log_normal_(mean, std)``: ``exp`` of scalar float64 normals."""
    return _libm(math.exp, normal(mt, n, np.float64, mean, std, contiguous=False)).astype(
        np_dtype)


def normal(mt: MTState, n: int, np_dtype, mean: float = 0.0, std: float = 1.0,
           contiguous: bool = True, reduced: bool = False) -> np.ndarray:
    """``n`` normal draws as PyTorch's ``normal_`` fills a tensor of ``n``
    elements (``contiguous``: whether that tensor is; ``reduced``: whether
    it is float16 or bfloat16, whose carrier ``np_dtype`` may be float32)."""
    d = np.dtype(np_dtype)
    reduced = reduced or d == np.float16
    if n >= 16 and contiguous and reduced:
        return _normal_blocks(mt, n, mean, std).astype(d)
    if n >= 16 and contiguous and d in (np.float32, np.float64):
        return _normal_fill(mt, n, d, mean, std)
    out = np.array([_normal1(mt) for _ in range(n)], np.float64)
    if (mean, std) != (0.0, 1.0):
        out = _fma64(out, std, mean)              # (the kernel's fused z * std + mean)
    return out.astype(d)


def _libm(fn, x: np.ndarray) -> np.ndarray:
    """The C library's ``fn`` (``math``'s: PyTorch's ``std::log`` & co.)
    element by element: NumPy's own vector log, log1p, exp and tan differ
    from it in the last bit for 0.5-8% of float64 arguments."""
    x = np.asarray(x, np.float64)
    return np.fromiter(map(fn, x.ravel().tolist()), np.float64, x.size).reshape(x.shape)


def _normal_fill(mt, n, d, mean, std):
    kernels = _native(n)
    if kernels is not None:
        # the fill's n uniforms (2n words in double), the last 16 redone
        per = 2 if d == np.float64 else 1
        return _native_blocks(kernels, mt, n, d, mean, std, kernels.words(mt, per * n))
    data = uniform(mt, n, d)
    m = n - n % 16
    if m:
        data[:m] = _box_muller16(data[:m].reshape(-1, 2, 8), d, mean, std)
    if n % 16:
        data[n - 16:] = _box_muller16(uniform(mt, 16, d).reshape(1, 2, 8), d, mean, std)
    return data


def _normal_blocks(mt, n, mean, std):
    """float16 / bfloat16 ``normal_fill`` (as float32): the full blocks of
    16, then the last 16 elements redone, each block from its own 16 fresh
    uniforms (no fill of the whole tensor first)."""
    m = n - n % 16
    f32 = np.dtype(np.float32)
    kernels = _native(n)
    if kernels is not None:
        return _native_blocks(kernels, mt, n, f32, mean, std, kernels.words(mt, m))
    out = np.empty(n, f32)
    out[:m] = _box_muller16(uniform(mt, m, f32).reshape(-1, 2, 8), f32, mean, std)
    if m != n:
        out[n - 16:] = _box_muller16(uniform(mt, 16, f32).reshape(1, 2, 8), f32, mean, std)
    return out


def _native_blocks(kernels, mt, n, d, mean, std, words):
    """``normal_fill``'s blocks by the native kernels: the full blocks of 16
    from the first ``words`` (one per float32 uniform, two per float64),
    then, for a partial last block, the last 16 elements from 16 fresh
    uniforms."""
    m, per = n - n % 16, (2 if d == np.float64 else 1)
    out = np.empty(n, d)
    kernels.normal(words[:per * m], out[:m], mean, std)
    if m != n:
        tail = np.empty(16, d)
        kernels.normal(kernels.words(mt, per * 16), tail, mean, std)
        out[n - 16:] = tail
    return out


def _box_muller16(blocks, d, mean, std):
    """``normal_fill_16`` over blocks of ``[u(8), u(8)]``: ``[z cos, z sin]``;
    float32 with the AVX2 kernel's own log and sincos (``_log_ps``,
    ``_sincos_ps``), float64 with NumPy's."""
    if d == np.float32 and len(blocks) > 2048:
        # in chunks that stay in cache: the emulated log / sincos make
        # ~40 passes over their arrays
        return np.concatenate([_box_muller16(blocks[i:i + 2048], d, mean, std)
                               for i in range(0, len(blocks), 2048)])
    u1 = d.type(1) - blocks[:, 0]                  # (contiguous copies)
    theta = d.type(2.0 * np.pi) * blocks[:, 1]
    if d == np.float32:
        with np.errstate(invalid="ignore", divide="ignore"):
            radius = _log_ps(u1)
        sin, cos = _sincos_ps(theta)
    else:
        radius = _libm(math.log, u1)
        sin, cos = np.sin(theta), np.cos(theta)      # (NumPy's are the C library's)
    radius *= d.type(-2)
    np.sqrt(radius, out=radius)
    pair = np.empty(blocks.shape, d)
    np.multiply(radius, cos, out=pair[:, 0])
    np.multiply(radius, sin, out=pair[:, 1])
    if (mean, std) == (0.0, 1.0):
        pass                                      # (z * 1 + 0 is z)
    elif d == np.float32:
        # the AVX2 kernel's fmadd: one rounding of pair * std + mean
        pair = _fma(pair, np.float32(std), np.float32(mean))
    else:
        pair = _fma64(pair, std, mean)
    return pair.reshape(-1)


# --- the AVX2 kernel's float32 log and sincos -------------------------------------
# ATen's ``cpu/avx_mathfun.h`` (Pommier's cephes-based ``log256_ps`` and
# ``sincos256_ps``), operation by operation in float32.  Built with FMA
# enabled, the compiler contracts some of its multiply-adds into one
# rounding: which ones (``_fma`` below) was found by experiment, every
# float32 randn of 64000 values then bit-exact to torch 2.13's.

_F = np.float32
_LOG_P = tuple(_F(v) for v in (7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
                                -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                                2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1))
_LOG_Q1, _LOG_Q2, _SQRTHF = _F(-2.12194440e-4), _F(0.693359375), _F(0.707106781186547524)
_DP = (_F(-0.78515625), _F(-2.4187564849853515625e-4), _F(-3.77489497744594108e-8))
_SINCOF = (_F(-1.9515295891E-4), _F(8.3321608736E-3), _F(-1.6666654611E-1))
_COSCOF = (_F(2.443315711809948E-005), _F(-1.388731625493765E-003), _F(4.166664568298827E-002))
_FOPI = _F(1.27323954473516)                      # 4 / pi
_MIN_NORM = np.array([0x00800000], np.uint32).view(np.float32)[0]


def _fma(a, b, c):
    """float32 ``a * b + c`` rounded once (the float64 product of two
    float32 is exact); ``b``, ``c`` arrays of ``a``'s shape or scalars.
    Block by block, so that the float64 temporaries stay small."""
    a = np.asarray(a, np.float32)
    if a.size <= 1 << 18:
        # (one block: the same float64 arithmetic without the blocking's
        # broadcast views, whose set-up cost more than the arithmetic on
        # the 32768-element chunks _box_muller16 passes)
        t = a.astype(np.float64)
        t *= b
        t += c
        return t.astype(np.float32)
    out = np.empty(a.shape, np.float32)
    fa, fo = a.reshape(-1), out.reshape(-1)
    fb = np.broadcast_to(np.asarray(b, np.float32), a.shape).reshape(-1)
    fc = np.broadcast_to(np.asarray(c, np.float32), a.shape).reshape(-1)
    step = 1 << 18
    for i in range(0, fa.size, step):
        t = fa[i:i + step].astype(np.float64)
        t *= fb[i:i + step]
        t += fc[i:i + step]
        fo[i:i + step] = t
    return out


def _log_ps(x):
    """``log256_ps``: x = m 2**e with m in [sqrt(1/2), sqrt(2)), a degree-9
    polynomial in m - 1; NaN for x <= 0."""
    invalid = x <= 0
    x = np.maximum(x, _MIN_NORM)
    bits = x.view(np.uint32)
    e = ((bits >> np.uint32(23)).astype(np.int32) - 0x7F).astype(np.float32) + _F(1)
    x = ((bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)).view(np.float32)
    small = x < _SQRTHF
    tmp = np.where(small, x, _F(0))
    x = x - _F(1)
    e = e - small.astype(np.float32)
    x = x + tmp
    z = x * x
    y = np.full_like(x, _LOG_P[0])
    for p in _LOG_P[1:]:
        y = _fma(y, x, p)
    y = y * x
    y = _fma(y, z, e * _LOG_Q1)
    y = y - z * _F(0.5)
    x = x + y
    x = _fma(e, _LOG_Q2, x)
    x[invalid] = np.nan
    return x


def _sincos_ps(x):
    """``sincos256_ps``: reduce by multiples of pi/4 (cephes' three-part
    pi), then the sine and cosine polynomials, swapped and signed by the
    octant."""
    sign = x.view(np.uint32) & np.uint32(0x80000000)
    x = np.abs(x)
    j = ((x * _FOPI).astype(np.int32) + 1) & ~1
    y = j.astype(np.float32)
    swap = ((j & 4) << 29).astype(np.uint32)
    first = (j & 2) == 0
    for dp in _DP:
        x = _fma(y, dp, x)
    sign_cos = ((~(j - 2) & 4) << 29).astype(np.uint32)
    z = x * x
    yc = _fma(np.full_like(x, _COSCOF[0]), z, _COSCOF[1])
    yc = _fma(yc, z, _COSCOF[2])
    yc = yc * z
    yc = _fma(yc, z, -(z * _F(0.5)))
    yc = yc + _F(1)
    ys = _fma(np.full_like(x, _SINCOF[0]), z, _SINCOF[1])
    ys = _fma(ys, z, _SINCOF[2])
    ys = ys * z
    ys = _fma(ys, x, x)
    sin = np.where(first, ys, yc).view(np.uint32) ^ (sign ^ swap)
    cos = np.where(first, yc, ys).view(np.uint32) ^ sign_cos
    return sin.view(np.float32), cos.view(np.float32)


def randint(mt: MTState, n: int, lo: int, hi: int) -> np.ndarray:
    """``n`` integers in [lo, hi) (int64)."""
    span = hi - lo
    raw = _words64(mt, n) if span >= 1 << 32 else _words(mt, n)
    return (raw % _U64(span)).astype(np.int64) + lo


def random_full(mt: MTState, n: int, np_dtype, digits: int | None = None) -> np.ndarray:
    """``random_()`` without bounds: [0, 2**digits] for floats, [0, max]
    for integers (int64 and float64 from ``random64()``).  ``digits``: the
    float's when ``np_dtype`` is only its carrier (bfloat16: 8, float32)."""
    d = np.dtype(np_dtype)
    if d.kind == "f":
        digits = digits or _DIGITS.get(d.name, 53)
        raw = _words64(mt, n) if d == np.float64 else _words(mt, n)
        return (raw % _U64((1 << digits) + 1)).astype(d)
    if d == np.bool_:
        return (_words(mt, n) % _U64(2)).astype(d)
    top = int(np.iinfo(d).max) + 1
    raw = _words64(mt, n) if d == np.int64 else _words(mt, n)
    return (raw % _U64(top)).astype(d)


#: Below this size the NumPy path's loop costs as little as the kernel's call.
RANDPERM_NATIVE_MIN = 64


def randperm(mt: MTState, n: int) -> np.ndarray:
    """PyTorch's Fisher-Yates: for i in 0 .. n-2, swap ``i`` with ``z_i =
    random() % (n - i) + i``.  The ``z_i`` are computed at once; then the
    swaps run in blocks ``[a, a + k)`` that NumPy does in one go where that
    is provably the sequential result: every target ``z_j`` of the block
    lies past it and no two coincide, so the swaps touch disjoint pairs of
    positions and commute.  A block stops before its first swap that breaks
    this (it starts the next block); blocks of ~2 sqrt(n - a) meet about
    one such swap each.  The last 4096 swaps, where blocks get short, run
    one by one on a list (3-5x faster than the plain loop from 10**6
    elements; as fast below)."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    # PyTorch draws 64-bit words only past 2**32 / 20 elements
    wide = n >= 0xFFFFFFFF // 20
    kernels = _native(n) if n >= RANDPERM_NATIVE_MIN else None
    if kernels is not None:
        return kernels.randperm(kernels.words64(mt, n - 1) if wide else kernels.words(mt, n - 1), n)
    raw = mt.random64(n - 1) if wide else mt.random(n - 1)
    steps = np.arange(n - 1, dtype=np.uint64)
    zs = (raw % (_U64(n) - steps) + steps).astype(np.int64)
    perm = np.arange(n, dtype=np.int64)
    first = np.empty(n, np.int64)            # target -> its first index in a block
    a = 0
    while n - a > 4096:
        b = min(a + int(2 * (n - a) ** 0.5), n - 1)
        z = zs[a:b]
        past = np.flatnonzero(z < b)         # a target inside the block
        k = int(past[0]) if past.size else b - a
        z = z[:k]
        first[z[::-1]] = np.arange(k - 1, -1, -1)
        dup = np.flatnonzero(first[z] != np.arange(k))
        if dup.size:
            k = int(dup[0])
            z = z[:k]
        if k == 0:                           # the block's first swap: alone
            t = int(zs[a])
            perm[a], perm[t] = perm[t], perm[a]
            a += 1
            continue
        head = perm[a:a + k].copy()
        perm[a:a + k] = perm[z]
        perm[z] = head
        a += k
    rest = perm.tolist()
    for i, t in enumerate(zs[a:].tolist(), a):
        rest[i], rest[t] = rest[t], rest[i]
    return np.array(rest, np.int64)


def _uniform1(mt: MTState) -> float:
    """One float64 uniform (``uniform_real_distribution<double>``)."""
    hi, lo = mt.bits.random_raw(2).tolist()
    return (((hi << 32) | lo) & ((1 << 53) - 1)) * 2.0 ** -53


def _normal1(mt: MTState) -> float:
    """One ``normal_distribution<double>(0, 1)`` draw (with the cache)."""
    if mt.next_double is not None:
        z, mt.next_double = mt.next_double, None
        return z
    u1, u2 = _uniform1(mt), _uniform1(mt)
    r = math.sqrt(-2.0 * math.log1p(-u2))
    theta = 2.0 * math.pi * u1
    mt.next_double = r * math.sin(theta)
    return r * math.cos(theta)


_F32 = np.float32
_THIRD_F = float(_F32(1) / _F32(3))         # ``1.0f / 3.0f``
_C0331_F = float(_F32(0.0331))


def standard_gamma(mt: MTState, alpha: np.ndarray, single: bool) -> np.ndarray:
    """``Gamma(alpha, 1)`` draws (float64), one per element of ``alpha`` in
    order; ``single``: ``alpha`` is float32 (``_standard_gamma`` of a float
    tensor), else double arithmetic (float64, ``_sample_dirichlet``)."""
    out = np.empty(alpha.size, np.float64)
    for i, a in enumerate(np.asarray(alpha, np.float64).ravel().tolist()):
        scale = 1.0
        if a < 1.0:
            if a == 0.0:
                out[i] = 0.0
                continue
            if single:
                scale *= (1.0 - _uniform1(mt)) ** float(_F32(1) / _F32(a))
                a = float(_F32(a) + _F32(1))
            else:
                scale *= (1.0 - _uniform1(mt)) ** (1.0 / a)
                a += 1.0
        d = float(_F32(a) - _F32(_THIRD_F)) if single else a - _THIRD_F
        c = 1.0 / math.sqrt(9.0 * d)
        while True:
            x = _normal1(mt)
            y = 1.0 + c * x
            while y <= 0:
                x = _normal1(mt)
                y = 1.0 + c * x
            v = y * y * y
            u = 1.0 - _uniform1(mt)
            xx = x * x
            if u < 1.0 - _C0331_F * xx * xx or \
                    math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
                out[i] = scale * d * v
                break
    return out


def poisson(mt: MTState, rates: np.ndarray) -> np.ndarray:
    """``torch.poisson``: one count (int64) per rate, in order."""
    out = np.empty(rates.size, np.int64)
    for i, lam in enumerate(np.asarray(rates, np.float64).ravel().tolist()):
        if lam >= 10:
            slam, loglam = math.sqrt(lam), math.log(lam)
            b = 0.931 + 2.53 * slam
            a = -0.059 + 0.02483 * b
            invalpha = 1.1239 + 1.1328 / (b - 3.4)
            vr = 0.9277 - 3.6224 / (b - 2)
            while True:
                u = _uniform1(mt) - 0.5
                v = _uniform1(mt)
                us = 0.5 - abs(u)
                k = math.floor((2 * a / us + b) * u + lam + 0.43)
                if us >= 0.07 and v <= vr:
                    break
                if k < 0 or (us < 0.013 and v > us):
                    continue
                if math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b) <= \
                        -lam + k * loglam - math.lgamma(k + 1.0):
                    break
            out[i] = k
        elif lam == 0:
            out[i] = 0
        else:
            enlam, k, prod = math.exp(-lam), 0, 1.0
            while True:
                prod *= _uniform1(mt)
                if prod > enlam:
                    k += 1
                else:
                    break
            out[i] = k
    return out


_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
         0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
         0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: float) -> float:
    if k <= 9:
        return _TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def binomial(mt: MTState, count: np.ndarray, prob: np.ndarray, single: bool) -> np.ndarray:
    """``torch.binomial``: one draw (float64) per element of the broadcast
    ``count``, ``prob`` in order; ``single``: float32 tensors (their
    scalar_t arithmetic rounded to float)."""
    f = (lambda x: float(_F32(x))) if single else float
    out = np.empty(count.size, np.float64)
    for i, (n, p) in enumerate(zip(np.asarray(count, np.float64).ravel().tolist(),
                                   np.asarray(prob, np.float64).ravel().tolist())):
        if n <= 0.0 or p <= 0.0:
            out[i] = 0.0
        elif p >= 1.0:
            out[i] = n
        elif p <= 0.5:
            out[i] = _btrs(mt, n, p, f) if f(n * p) >= 10.0 else _inversion(mt, n, p, f)
        elif p > 0.5:
            q = f(1.0 - p)
            out[i] = f(n - (_btrs(mt, n, q, f) if f(n * q) >= 10.0 else _inversion(mt, n, q, f)))
        else:
            out[i] = math.nan
    return out


def _inversion(mt, n, p, f):
    logprob = f(math.log1p(-p))
    geom_sum, k = 0.0, 0.0
    while True:
        geom_sum += math.ceil(math.log(_uniform1(mt)) / logprob)
        if geom_sum > n:
            return k
        k = f(k + 1)


def _btrs(mt, n, p, f):
    stddev = math.sqrt(f(f(n * p) * f(1 - p)))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = f(n * p) + 0.5
    v_r = 0.92 - 4.2 / b
    r = p / f(1 - p)
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor(f(f(n + 1) * p))
    while True:
        u = _uniform1(mt) - 0.5
        v = _uniform1(mt)
        us = 0.5 - abs(u)
        k = f(math.floor((2 * a / us + b) * u + c))
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = math.log(v * alpha / (a / (us * us) + b))
        upper = ((m + 0.5) * math.log((m + 1) / (r * (n - m + 1)))
                 + f(n + 1) * math.log((n - m + 1) / f(f(n - k) + 1))
                 + (k + 0.5) * math.log(r * f(f(n - k) + 1) / f(k + 1))
                 + _stirling_tail(m) + _stirling_tail(n - m)
                 - _stirling_tail(k) - _stirling_tail(f(n - k)))
        if v <= upper:
            return k


def bernoulli_scalar(mt: MTState, n: int, p: float) -> np.ndarray:
    """``n`` draws of ``bernoulli_(p)``: True with probability ``p``."""
    return uniform(mt, n, np.float64) < p


def bernoulli_tensor(mt: MTState, p: np.ndarray) -> np.ndarray:
    """``bernoulli_(p_tensor)`` / ``torch.bernoulli(p)``: one float32
    uniform per element of ``p`` (broadcast to the output), ``u < p``."""
    return uniform(mt, p.size, np.float32).reshape(p.shape) < p
