"""Native kernels for PyTorch's eager random transforms (``torch_rng``).

``torch_rng`` reproduces PyTorch's CPU streams with NumPy: the Mersenne
Twister's words come from NumPy's ``MT19937`` (~2.7 ns a word), but PyTorch's
float32 normals need its AVX2 kernel's own log and sincos
(``avx_mathfun.h``), emulated there in ~40 float32 NumPy passes; float64
normals call the C library's ``log`` once per element from Python; and
``randperm``'s Fisher-Yates swaps are sequential.  Here the same
transforms, and the twister itself, are LLVM IR written as text (``rng_ir``:
the kernels and their contracts), compiled at O3 for the host with the cpu
backend's code generator, kept in the disk cache and loaded like compiled
modules (``runtime._link``: a shared library from the second process on,
no LLVM), and called on NumPy arrays (``Kernels``).

Why here: ``torch_rng`` is a base-layer module and may not import the
backend; the package registers ``load`` with it (``torch_rng.NATIVE``,
``tracec/__init__.py``), which imports this module on the first draws
that want the kernels, so ``import tracec`` loads neither llvmlite nor xDSL.

Invariants: every value equals the NumPy path's (``torch_rng``) bit for bit,
and the transforms consume no words themselves (``words`` draws exactly
the words asked for), so the stream stays where NumPy's draws leave it
(``tests/test_torch_rng_native.py`` checks both);
``load()`` makes the kernels once per process, from the disk cache or
compiled, and a failure is remembered and answered with None (the caller
then runs its NumPy path, same values).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time

import numpy as np

from tracec import torch_rng as R
from tracec.backends.cpu.rng_ir import NAMES, ir_text

__all__ = ["Kernels", "load", "INFO"]


#: How this process got its kernels: ``source`` ("compiled", "disk cache"),
#: ``seconds`` (the whole ``load``), or ``error``.
INFO: dict = {}
_lock = threading.Lock()
_made: list = []          # [Kernels or None] once tried

class Kernels:
    """The loaded kernels, called on NumPy arrays (C-contiguous, of the
    dtypes named; the caller checks sizes)."""

    _NORMAL = [ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, c, c,
                                ctypes.c_int32) for c in (ctypes.c_float, ctypes.c_double)]
    _PERM = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int32)
    _WORDS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

    def __init__(self, library):
        self._library = library              # keeps the code mapped
        self._normal = {np.dtype(np.float32): self._NORMAL[0](int(library[NAMES[0]])),
                        np.dtype(np.float64): self._NORMAL[1](int(library[NAMES[1]]))}
        self._perm = self._PERM(int(library[NAMES[2]]))
        self._mt = self._WORDS(int(library[NAMES[3]]))
        self._pack = {np.dtype(np.uint64): self._WORDS(int(library[NAMES[4]])),
                      np.dtype(np.float64): self._WORDS(int(library[NAMES[5]]))}
        #: whether ``words`` runs the twister here (NumPy's state layout checked)
        self.native_words = _twister_ok(self)
        INFO["native words"] = self.native_words

    def words(self, mt: R.MTState, n: int) -> np.ndarray:
        """``mt.random(n)``'s words as uint32, and ``mt`` advanced as far."""
        if not self.native_words:
            return mt.random(n).astype(np.uint32)
        return self._words(mt.bits, n)

    def _words(self, bits, n: int) -> np.ndarray:
        out = np.empty(n, np.uint32)
        with bits.lock:                      # (as NumPy's random_raw holds it)
            self._mt(bits.ctypes.state_address, _ptr(out), n)
        return out

    def words64(self, mt: R.MTState, n: int, dtype=np.uint64) -> np.ndarray:
        """``mt.random64(n)`` (uint64), or, for ``dtype`` float64, the
        uniforms of their low 53 bits (``uniform``'s float64 draws)."""
        words = self.words(mt, 2 * n)
        out = np.empty(n, dtype)
        self._pack[out.dtype](_ptr(words), _ptr(out), n)
        return out

    def normal(self, words: np.ndarray, out: np.ndarray, mean: float, std: float) -> None:
        """``out`` (float32 or float64, a multiple of 16 elements) from as
        many ``words`` (uint32; twice as many for float64)."""
        per = 2 if out.dtype == np.float64 else 1
        assert words.dtype == np.uint32 and words.size == per * out.size
        assert out.size % 16 == 0 and words.flags.c_contiguous and out.flags.c_contiguous
        self._normal[out.dtype](_ptr(words), _ptr(out), out.size // 16,
                                mean, std, int((mean, std) != (0.0, 1.0)))

    def randperm(self, r: np.ndarray, n: int) -> np.ndarray:
        """The permutation of ``n`` from its ``n - 1`` draws ``r``: uint32
        words, or uint64 ``random64()`` values."""
        assert r.dtype in (np.uint32, np.uint64) and r.size == max(n - 1, 0)
        assert r.flags.c_contiguous
        perm = np.empty(n, np.int64)
        self._perm(_ptr(r), _ptr(perm), n, int(r.dtype == np.uint64))
        return perm


def _ptr(a: np.ndarray) -> int:
    """The address of ``a``'s data (C-contiguous, writable): ~0.3 µs where
    ``a.ctypes.data`` costs ~1 µs, a tenth of a small draw's call."""
    return ctypes.addressof(ctypes.c_char.from_buffer(a)) if a.size else 0


def _twister_ok(kernels: Kernels) -> bool:
    """Whether the native twister, on NumPy's ``MT19937`` state, draws what
    ``random_raw`` draws and leaves the same state (the layout it assumes
    is NumPy's, not its API): from the middle of a block, over two twists."""
    try:
        a, b = np.random.MT19937(20261130), np.random.MT19937(20261130)
        a.random_raw(100), b.random_raw(100)
        got = kernels._words(a, 1500)
        want = b.random_raw(1500)
        sa, sb = a.state["state"], b.state["state"]
        return bool(np.array_equal(got, want) and sa["pos"] == sb["pos"]
                    and np.array_equal(sa["key"], sb["key"]))
    except (AttributeError, TypeError, ValueError):
        return False


def load() -> Kernels | None:
    """This process's kernels (made on the first call), or None where they
    could not be made (the reason in ``INFO["error"]``)."""
    return load_once(_made, _lock, INFO, lambda: Kernels(_library()))


def load_once(made: list, lock, info: dict, make):
    """``made[0]``, after ``make()`` ran once under ``lock`` (None where it
    raised: the reason in ``info["error"]``, its time in
    ``info["seconds"]``): a kernel set's per-process load."""
    if made:
        return made[0]
    with lock:
        if not made:
            start = time.perf_counter()
            try:
                made.append(make())
            except Exception as e:  # noqa: BLE001  (any failure: the NumPy path stays correct)
                info["error"] = f"{type(e).__name__}: {e}"
                made.append(None)
            info["seconds"] = time.perf_counter() - start
    return made[0]


def _library():
    from tracec.backends.cpu import runtime
    return runtime._link(_object_code(), list(NAMES))


def _object_code() -> bytes:
    return ir_object_code("rng kernels", ir_text(), INFO)


def ir_object_code(kind: str, text: str, info: dict) -> bytes:
    """The object code of the LLVM IR ``text`` (hand-written kernels
    named ``kind``) for this machine (the host's CPU even inside
    ``codegen.targeting``: they run here): from the disk cache
    (``<cache>/runtime``, keyed by ``kind``, the target and the IR), else
    compiled now and stored (the cache's writes are atomic and locked: a
    reader sees no entry or a whole one); ``info["source"]`` says which."""
    from tracec.backends import cache
    from tracec.backends.cpu import codegen
    target = codegen._target_id(codegen.host())
    key = hashlib.sha256(f"tracec {kind}|{target}|{text}".encode()).hexdigest()
    disk = None if os.environ.get("TRACEC_NO_CACHE") else \
        cache.DiskCache(os.path.join(cache.cache_root(), "runtime"))
    hit = disk.get(key) if disk is not None else None
    if hit is not None:
        info["source"] = "disk cache"
        return bytes(hit[1])
    obj = _compile(text)
    info["source"] = "compiled"
    if disk is not None:
        try:
            disk.put(key, {"kind": kind}, obj)
        except OSError:
            pass   # no cache: compiled again next time
    return obj


def _compile(text: str) -> bytes:
    """O3 for the host, on this thread (a target machine of its own)."""
    from tracec.backends.cpu import codegen
    host = codegen.host()
    layout = codegen._target_machine(host).target_data
    head = f'target triple = "{host[0]}"\ntarget datalayout = "{layout}"\n'
    return codegen._compile_part(head + text, host, want_asm=False)[1]
