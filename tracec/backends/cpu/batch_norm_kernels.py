"""Native kernels for eager batch normalization's backward (training mode,
``nn/_batch_norm_eager``).

The NumPy backward runs the composite's VJPs one primitive at a time: a
dozen passes over the tensor (MobileNetV2's step: 27 ms of batch-norm
backward against PyTorch's 6.5).  Its result is, per channel ``c``,

    gx = g * a[c] + dev * b[c] + k[c]

with ``a``, ``b``, ``k`` from three channel sums ``sum(g)``, ``sum(g *
dev)`` and ``sum(dev)`` (``dev = x - mean``).  Here two loops, LLVM IR
text compiled like the depthwise kernels (``depthwise_kernels``,
``rng_kernels.ir_object_code``): ``sums`` (one pass reading ``g`` and
``dev``) and ``apply`` (one pass writing ``gx``); the caller computes the
per-channel coefficients between them, in NumPy on ``[C]`` arrays.

Layout: ``[N, C, S]`` C-contiguous (``S`` the spatial size, 1 for
``BatchNorm1d`` on ``[N, C]``); ``geo`` is int64 ``[N, C, S]``.

Invariants: the sums' adds carry ``reassoc`` (the vectorizer sums
``S``-long rows in lanes), so they are sums in some order, fixed for a
machine, not NumPy's pairwise ones: results equal the composite's within
float rounding (the fused eager kernels' contract, ``fused_eager``), not
bit for bit.  ``load()`` makes the kernels once per process; a failure is
remembered and answered with None (the caller runs its NumPy path).
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from tracec.backends.cpu.depthwise_kernels import _Fn

__all__ = ["Kernels", "load", "INFO", "ir_text"]

INFO: dict = {}
_lock = threading.Lock()
_made: list = []
_PREFIX = "tracec_bnorm_"
_TYPES = {"f32": "float", "f64": "double"}
NAMES = tuple(f"{_PREFIX}{k}_{t}" for k in ("sums", "apply", "center") for t in _TYPES)


def _header(f: _Fn):
    n, c, s = (f.v(f"load i64, ptr {f.v(f'getelementptr inbounds i64, ptr %geo, i64 {k}')}")
               for k in range(3))
    return n, c, s, f.v(f"mul nsw i64 {c}, {s}")


def _wide(f: _Fn, v: str) -> str:
    """``v`` as a double (the sums' accumulator: float32 sums of 30K
    terms in 16 lanes lose ~1e-5 relative, which the gradient's
    cancellation of its three terms turns into differences Adam trains
    apart: PointNet's compiled-against-eager check, measured)."""
    return v if f.ty == "double" else f.v(f"fpext float {v} to double")


def _narrow(f: _Fn, v: str) -> str:
    return v if f.ty == "double" else f.v(f"fptrunc double {v} to float")


def _sums(suffix: str, meta: list) -> str:
    ty = _TYPES[suffix]
    f = _Fn(ty, meta)
    n, c, s, cs = _header(f)
    slots = ("%sg", "%sgd", "%sd")

    def per_channel(ch):
        for p in slots:
            f.op(f"store double 0.0, ptr {p}")

        def per_image(i):
            at = f.v(f"mul nsw i64 {i}, {cs}")
            at = f.v(f"add nsw i64 {at}, {f.v(f'mul nsw i64 {ch}, {s}')}")
            gr, dr = f.gep("%g", at), f.gep("%dev", at)

            def per_elt(j):
                gv, dv = (_wide(f, f.load(f.gep(r, j))) for r in (gr, dr))
                prod = f.v(f"fmul double {gv}, {dv}")
                for p, v in zip(slots, (gv, prod, dv)):
                    acc = f.v(f"fadd reassoc nsz double {f.v(f'load double, ptr {p}')}, {v}")
                    f.op(f"store double {acc}, ptr {p}")
            f.loop(s, per_elt)      # (sums: the vectorizer's own width, faster at S=256)
        f.loop(n, per_image)
        for q, p in enumerate(slots):
            at = f.v(f"mul nsw i64 {q}, {c}")
            total = _narrow(f, f.v(f"load double, ptr {p}"))
            f.op(f"store {ty} {total}, ptr {f.gep('%out', f.v(f'add nsw i64 {at}, {ch}'))}")
    for p in slots:
        f.lines.insert(0, f"  {p} = alloca double")
    f.loop(c, per_channel)
    return (f"define void @{_PREFIX}sums_{suffix}(ptr noalias nocapture readonly %g, "
            f"ptr noalias nocapture readonly %dev, ptr noalias nocapture %out, "
            f"ptr noalias nocapture readonly %geo) nounwind {{\nentry:\n"
            + "\n".join(f.lines) + "\n  ret void\n}\n")


def _apply(suffix: str, meta: list) -> str:
    ty = _TYPES[suffix]
    f = _Fn(ty, meta)
    n, c, s, cs = _header(f)

    def per_image(i):
        def per_channel(ch):
            a = f.load(f.gep("%coef", ch))
            b = f.load(f.gep("%coef", f.v(f"add nsw i64 {ch}, {c}")))
            k = f.load(f.gep("%coef", f.v(f"add nsw i64 {f.v(f'mul nsw i64 {c}, 2')}, {ch}")))
            at = f.v(f"mul nsw i64 {i}, {cs}")
            at = f.v(f"add nsw i64 {at}, {f.v(f'mul nsw i64 {ch}, {s}')}")
            gr, dr, xr = f.gep("%g", at), f.gep("%dev", at), f.gep("%gx", at)

            def per_elt(j):
                t = f.v(f"fmul {ty} {f.load(f.gep(gr, j))}, {a}")
                u = f.v(f"fmul {ty} {f.load(f.gep(dr, j))}, {b}")
                v = f.v(f"fadd {ty} {f.v(f'fadd {ty} {t}, {u}')}, {k}")
                f.op(f"store {ty} {v}, ptr {f.gep(xr, j)}")
            f.loop(s, per_elt, f.short_rows())
        f.loop(c, per_channel)
    f.loop(n, per_image)
    return (f"define void @{_PREFIX}apply_{suffix}(ptr noalias nocapture readonly %g, "
            f"ptr noalias nocapture readonly %dev, ptr noalias nocapture readonly %coef, "
            f"ptr noalias nocapture %gx, ptr noalias nocapture readonly %geo) nounwind {{\n"
            f"entry:\n" + "\n".join(f.lines) + "\n  ret void\n}\n")


def _center(suffix: str, meta: list) -> str:
    ty = _TYPES[suffix]
    f = _Fn(ty, meta)
    n, c, s, cs = _header(f)

    def per_channel(ch):
        m = f.load(f.gep("%mean", ch))
        f.op("store double 0.0, ptr %ss")

        def per_image(i):
            at = f.v(f"mul nsw i64 {i}, {cs}")
            at = f.v(f"add nsw i64 {at}, {f.v(f'mul nsw i64 {ch}, {s}')}")
            xr, dr = f.gep("%x", at), f.gep("%dev", at)

            def per_elt(j):
                d = f.v(f"fsub {ty} {f.load(f.gep(xr, j))}, {m}")
                f.op(f"store {ty} {d}, ptr {f.gep(dr, j)}")
                dd = _wide(f, d)
                sq = f.v(f"fmul double {dd}, {dd}")
                acc = f.v(f"fadd reassoc nsz double {f.v('load double, ptr %ss')}, {sq}")
                f.op(f"store double {acc}, ptr %ss")
            f.loop(s, per_elt, f.short_rows())
        f.loop(n, per_image)
        total = _narrow(f, f.v("load double, ptr %ss"))
        f.op(f"store {ty} {total}, ptr {f.gep('%out', ch)}")
    f.lines.insert(0, "  %ss = alloca double")
    f.loop(c, per_channel)
    return (f"define void @{_PREFIX}center_{suffix}(ptr noalias nocapture readonly %x, "
            f"ptr noalias nocapture readonly %mean, ptr noalias nocapture %dev, "
            f"ptr noalias nocapture %out, ptr noalias nocapture readonly %geo) nounwind {{\n"
            f"entry:\n" + "\n".join(f.lines) + "\n  ret void\n}\n")


def ir_text() -> str:
    meta: list = []
    body = "".join(make(s, meta) for make in (_sums, _apply, _center) for s in _TYPES)
    return body + "".join(line + "\n" for line in meta)


class Kernels:
    """The loaded kernels on NumPy arrays ``[N, C, S]`` (C-contiguous, one
    float dtype; the caller checks)."""

    _SUMS = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)
    _APPLY = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 5)

    def __init__(self, library):
        self._library = library
        self._fns = {}
        for name in NAMES:
            kind, suffix = name[len(_PREFIX):].split("_")
            make = self._SUMS if kind == "sums" else self._APPLY
            self._fns[(kind, np.dtype(np.float32 if suffix == "f32" else np.float64))] = \
                make(int(library[name]))

    def sums(self, g: np.ndarray, dev: np.ndarray) -> np.ndarray:
        """``[3, C]``: per channel ``sum(g)``, ``sum(g * dev)``, ``sum(dev)``."""
        out = np.empty((3, g.shape[1]), g.dtype)
        geo = np.array(g.shape, np.int64)
        self._fns[("sums", g.dtype)](g.ctypes.data, dev.ctypes.data, out.ctypes.data,
                                     geo.ctypes.data)
        return out

    def center(self, x: np.ndarray, mean: np.ndarray):
        """``(x - mean[c], sum((x - mean[c]) ** 2))`` (the second ``[C]``)."""
        dev = np.empty_like(x)
        out = np.empty(x.shape[1], x.dtype)
        geo = np.array(x.shape, np.int64)
        self._fns[("center", x.dtype)](x.ctypes.data, mean.ctypes.data, dev.ctypes.data,
                                       out.ctypes.data, geo.ctypes.data)
        return dev, out

    def apply(self, g: np.ndarray, dev: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """``g * coef[0, c] + dev * coef[1, c] + coef[2, c]`` (``coef``
        ``[3, C]`` contiguous)."""
        gx = np.empty_like(g)
        geo = np.array(g.shape, np.int64)
        self._fns[("apply", g.dtype)](g.ctypes.data, dev.ctypes.data, coef.ctypes.data,
                                      gx.ctypes.data, geo.ctypes.data)
        return gx


def load() -> Kernels | None:
    """This process's kernels (made on the first call), or None where they
    could not be made (the reason in ``INFO["error"]``)."""
    from tracec.backends.cpu import rng_kernels, runtime

    def make():
        code = rng_kernels.ir_object_code("batch norm kernels", ir_text(), INFO)
        return Kernels(runtime._link(code, list(NAMES)))
    return rng_kernels.load_once(_made, _lock, INFO, make)
