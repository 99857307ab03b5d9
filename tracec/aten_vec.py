"""ATen's vectorized CPU float32 helpers that reduced-precision kernels use,
emulated bit for bit in NumPy: ``fexp_u20`` (the fast exponential of the
CPU flash-attention softmax) and the row sums those kernels make (vector
lanes, then the lanes folded by halves, then the tail element by element).

Which elements take the vector path depends on ATen's CPU capability (16
float lanes with AVX-512, 8 with AVX2): ``vector_width`` reads it the way
ATen picks it (``ATEN_CPU_CAPABILITY``, else the processor's flags).
Invariant: on a capability without vectors (or off x86) ``fexp_u20`` is
``None`` and callers use ``np.exp``, as ATen's scalar fallback does.
"""
from __future__ import annotations

import functools
import os

import numpy as np

from tracec.torch_rng import _fma

__all__ = ["vector_width", "onednn_takes", "fexp_u20", "exp_rows", "row_sum"]

_F = np.float32


def _bits(h: int) -> np.float32:
    return np.array([h], np.uint32).view(np.float32)[0]


_LN_FLT_MIN, _LN_FLT_MAX, _LOG2E = _bits(0xC2AEAC50), _bits(0x42B17218), _bits(0x3FB8AA3B)
# the cubic for 2**frac - 1 - frac ... as ATen writes it (float literals)
_C = (_F(0.00010703434948458272), _F(0.30354260500649682), _F(-0.22433836478672356),
      _F(-0.079204240219773236))


@functools.lru_cache(maxsize=None)
def _cpuinfo_field(name: str) -> str:
    """The first ``name`` field of /proc/cpuinfo ("" where it is unreadable
    or has none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _flags() -> frozenset:
    """The processor's feature flags as Linux names them (empty where
    /proc/cpuinfo is unreadable)."""
    return frozenset(_cpuinfo_field("flags").split())


def intel() -> bool:
    """Whether the processor is Intel's (MKL takes its AVX-512 kernels only
    there: on other vendors' processors its rounding is another)."""
    return _cpuinfo_field("vendor_id") == "GenuineIntel"


def onednn_takes(dtype_name: str) -> bool:
    """Whether PyTorch's CPU convolution sends a ``dtype_name`` input
    ("float16" / "bfloat16") to oneDNN on this machine (its
    ``mkldnn_fp16_device_check`` / ``mkldnn_bf16_device_check``: oneDNN's
    ISA at least AVX-512 core (with FP16 for half), or AVX-NE-CONVERT),
    which decides the words of its dtype-mismatch error."""
    flags = _flags()
    core = {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    if dtype_name == "bfloat16":
        return core or "avx_ne_convert" in flags
    if dtype_name == "float16":
        return (core and "avx512_fp16" in flags) or "avx_ne_convert" in flags \
            or "amx_fp16" in flags
    return False


@functools.lru_cache(maxsize=None)
def _capability() -> str:
    want = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    flags = _flags()
    avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "fma"} <= flags
    avx2 = {"avx2", "fma"} <= flags
    if want == "default":
        return "default"
    if want == "avx2":
        return "avx2" if avx2 else "default"
    return "avx512" if avx512 else "avx2" if avx2 else "default"


def vector_width() -> int:
    """float32 lanes of ATen's ``Vectorized<float>`` on this machine."""
    return 16 if _capability() == "avx512" else 8


def fexp_u20(x: np.ndarray) -> np.ndarray | None:
    """ATen's ``Vectorized<float>::fexp_u20`` (AVX2 / AVX-512): ``2**(x
    log2 e)`` built in the exponent bits, its fraction corrected by a
    cubic; within an ulp of bfloat16, about 1e-4 relative in float32.  0
    below ``ln(FLT_MIN)``, inf above ``ln(FLT_MAX)``.  None without
    vectors (ATen then calls ``exp``)."""
    if _capability() == "default":
        return None
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        src = x * _LOG2E
        frac = src - np.floor(src)
        res = _fma(frac, _C[3], _C[2])
        res = _fma(frac, res, _C[1])
        res = _fma(frac, res, _C[0])
        src = src - res
        tmp = _fma(src, _F(2.0 ** 23), _F(2.0 ** 23 * 127))
        ints = np.trunc(np.where(np.isfinite(tmp), tmp, 0)).astype(np.int64).astype(np.int32)
    out = ints.view(np.float32).copy()
    out[x < _LN_FLT_MIN] = 0.0
    out[x > _LN_FLT_MAX] = np.inf
    return out


def exp_rows(d: np.ndarray) -> np.ndarray:
    """``exp`` of each row of ``d`` (last axis) as ATen's fused
    ``exp(a - max)`` loops make it: ``fexp_u20`` on the whole vectors of a
    row, ``std::exp`` on its tail."""
    out = np.exp(d)
    width = vector_width()
    cut = d.shape[-1] - d.shape[-1] % width
    fast = fexp_u20(d[..., :cut]) if cut else None
    if fast is not None:
        out[..., :cut] = fast
    return out


def row_sum(e: np.ndarray) -> np.ndarray:
    """Sums of the rows of float32 ``e`` (keepdim) in ATen's order: lane
    ``j`` adds elements ``j, j + w, ...`` of the whole vectors, the lanes
    are folded by halves (``vec_reduce_all``), then the tail is added one by
    one."""
    width = vector_width()
    n = e.shape[-1]
    cut = n - n % width
    if cut:
        acc = e[..., :width].copy()
        for i in range(width, cut, width):
            acc += e[..., i:i + width]
        while acc.shape[-1] > 1:
            h = acc.shape[-1] // 2
            acc = acc[..., :h] + acc[..., h:]
    else:
        acc = np.zeros(e.shape[:-1] + (1,), np.float32)
    for j in range(cut, n):
        acc = acc + e[..., j:j + 1]
    return acc
