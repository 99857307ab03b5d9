"""Native kernels for eager depthwise convolution (``nn/_conv_depthwise_eager``).

A depthwise convolution (one input and one output channel per group) is
no GEMM: per output element, ``kk`` products of one channel's input window
and that channel's weights.  NumPy runs it as ``kk`` passes over the whole
tensor (or im2col and a ``[1, kk]`` matmul per image and channel), which
costs MobileNetV2's step ~45 ms of depthwise convolution against PyTorch's
~5.  Here three loops, written as LLVM IR text, compiled at O3 for the host
by the cpu backend's code generator (its loop vectorizer vectorizes each
output row's multiply-add), kept in the disk cache and loaded like the rng
kernels (``rng_kernels``: a shared library from the second process on).

Layout: NCHW planes, ``P = N * C`` of them, each ``[H, W]`` (the *padded*
input; 1-d convolutions are ``H = 1``), the output planes ``[OH, OW]``, the
weight ``[C, KH * KW]``; ``geo`` is int64 ``[P, C, H, W, OH, OW, KH, KW,
sh, sw, dh, dw]``.  Every array is C-contiguous.

* ``forward``: ``y[p, oh, ow] = sum_k w[c, k] * x[p, oh*sh + kh*dh,
  ow*sw + kw*dw]``, the kernel offsets ``k = (kh, kw)`` in row-major order,
  the first product stored and the others added (elementwise IEEE
  operations: the NumPy column-free path's bits).
* ``input_grad``: the padded input's gradient, each plane zeroed, then
  ``w[c, k] * g`` added into each offset's window, output rows outer.
* ``weight_grad``: ``gw[c, k] += sum_{oh, ow} g * window_k(x)`` per plane:
  the products added into a row ``acc`` (``[OW]``, scratch) over ``oh``,
  then the row summed in order.

Invariants: no fast-math flags (no reassociation, no FMA contraction), so
each result is a fixed sequence of IEEE operations on every machine; the
callers (``nn/_conv``) check shapes, dtypes and contiguity.  ``load()``
makes the kernels once per process (disk cache or compiled), and a failure
is remembered and answered with None (the caller runs its NumPy path).
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

__all__ = ["Kernels", "load", "INFO", "ir_text"]

#: How this process got its kernels: ``source`` or ``error``.
INFO: dict = {}
_lock = threading.Lock()
_made: list = []
_PREFIX = "tracec_dwconv_"
_TYPES = {"f32": ("float", 4), "f64": ("double", 8)}
NAMES = tuple(f"{_PREFIX}{k}_{t}" for k in ("fwd", "dx", "dw") for t in _TYPES)
_GEO = ("P", "C", "H", "W", "OH", "OW", "KH", "KW", "sh", "sw", "dh", "dw")


class _Fn:
    """One function's IR: numbered values, blocks, and counted loops."""

    def __init__(self, ty: str):
        self.ty, self.lines, self.n, self.block = ty, [], 0, "entry"

    def v(self, expr: str) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"  {name} = {expr}")
        return name

    def op(self, text: str):
        self.lines.append(f"  {text}")

    def label(self) -> str:
        self.n += 1
        return f"b{self.n}"

    def start(self, label: str):
        self.lines.append(f"{label}:")
        self.block = label

    def gep(self, base: str, index: str) -> str:
        return self.v(f"getelementptr inbounds {self.ty}, ptr {base}, i64 {index}")

    def load(self, ptr: str) -> str:
        return self.v(f"load {self.ty}, ptr {ptr}")

    def loop(self, count: str, body):
        """``for i in range(count): body(i)`` (count >= 0)."""
        pre, head, inner, done = self.block, self.label(), self.label(), self.label()
        self.op(f"br label %{head}")
        self.start(head)
        self.n += 2
        i, nxt = f"%v{self.n - 1}", f"%v{self.n}"
        slot = len(self.lines)
        self.lines.append(None)
        more = self.v(f"icmp slt i64 {i}, {count}")
        self.op(f"br i1 {more}, label %{inner}, label %{done}")
        self.start(inner)
        body(i)
        self.op(f"{nxt} = add nsw i64 {i}, 1")
        self.op(f"br label %{head}")
        self.lines[slot] = f"  {i} = phi i64 [0, %{pre}], [{nxt}, %{self.block}]"
        self.start(done)

    def branch(self, cond: str, then, other):
        yes, no, join = self.label(), self.label(), self.label()
        self.op(f"br i1 {cond}, label %{yes}, label %{no}")
        self.start(yes)
        then()
        self.op(f"br label %{join}")
        self.start(no)
        other()
        self.op(f"br label %{join}")
        self.start(join)

    def strided(self, g: dict, count: str, body):
        """``body(i, j)`` for ``i in range(count)``, ``j = i * sw``: a loop
        of its own for ``sw == 1`` (unit stride: vectorized)."""
        unit = self.v(f"icmp eq i64 {g['sw']}, 1")
        self.branch(unit, lambda: self.loop(count, lambda i: body(i, i)),
                    lambda: self.loop(count, lambda i: body(i, self.v(f"mul nsw i64 {i}, "
                                                                      f"{g['sw']}"))))


def _header(f: _Fn):
    g = {}
    for k, name in enumerate(_GEO):
        p = f.v(f"getelementptr inbounds i64, ptr %geo, i64 {k}")
        g[name] = f.v(f"load i64, ptr {p}")
    g["HW"] = f.v(f"mul nsw i64 {g['H']}, {g['W']}")
    g["OHW"] = f.v(f"mul nsw i64 {g['OH']}, {g['OW']}")
    g["KK"] = f.v(f"mul nsw i64 {g['KH']}, {g['KW']}")
    return g


def _offsets(f: _Fn, g: dict, xb: str, oh: str, body):
    """``body(k, row)`` per kernel offset in row-major order: ``k`` its
    index, ``row`` the address of its window's row ``oh`` in plane ``xb``."""
    top = f.v(f"mul nsw i64 {oh}, {g['sh']}")

    def per_kh(kh):
        r = f.v(f"mul nsw i64 {kh}, {g['dh']}")
        r = f.v(f"add nsw i64 {top}, {r}")
        r = f.v(f"mul nsw i64 {r}, {g['W']}")
        xr = f.gep(xb, r)

        def per_kw(kw):
            k = f.v(f"mul nsw i64 {kh}, {g['KW']}")
            k = f.v(f"add nsw i64 {k}, {kw}")
            col = f.v(f"mul nsw i64 {kw}, {g['dw']}")
            body(k, f.gep(xr, col))
        f.loop(g["KW"], per_kw)
    f.loop(g["KH"], per_kh)


def _plane(f: _Fn, g: dict, p: str):
    c = f.v(f"urem i64 {p}, {g['C']}")
    return (f.v(f"mul nsw i64 {p}, {g['HW']}"), f.v(f"mul nsw i64 {p}, {g['OHW']}"),
            f.v(f"mul nsw i64 {c}, {g['KK']}"))


def _forward(suffix: str) -> str:
    ty = _TYPES[suffix][0]
    f = _Fn(ty)
    g = _header(f)

    def per_plane(p):
        xo, yo, wo = _plane(f, g, p)
        xb, yb, wb = f.gep("%x", xo), f.gep("%y", yo), f.gep("%w", wo)

        def per_row(oh):
            yr = f.gep(yb, f.v(f"mul nsw i64 {oh}, {g['OW']}"))

            def per_offset(k, xs):
                wv = f.load(f.gep(wb, k))

                def first():
                    def store(i, j):
                        f.op(f"store {ty} {f.v(f'fmul {ty} {wv}, {f.load(f.gep(xs, j))}')}, "
                             f"ptr {f.gep(yr, i)}")
                    f.strided(g, g["OW"], store)

                def add():
                    def acc(i, j):
                        dst = f.gep(yr, i)
                        prod = f.v(f"fmul {ty} {wv}, {f.load(f.gep(xs, j))}")
                        f.op(f"store {ty} {f.v(f'fadd {ty} {f.load(dst)}, {prod}')}, "
                             f"ptr {dst}")
                    f.strided(g, g["OW"], acc)
                f.branch(f.v(f"icmp eq i64 {k}, 0"), first, add)
            _offsets(f, g, xb, oh, per_offset)
        f.loop(g["OH"], per_row)
    f.loop(g["P"], per_plane)
    return (f"define void @{_PREFIX}fwd_{suffix}(ptr noalias nocapture readonly %x, "
            f"ptr noalias nocapture readonly %w, ptr noalias nocapture %y, "
            f"ptr noalias nocapture readonly %geo) nounwind {{\nentry:\n"
            + "\n".join(f.lines) + "\n  ret void\n}\n")


def _input_grad(suffix: str) -> str:
    ty = _TYPES[suffix][0]
    f = _Fn(ty)
    g = _header(f)

    def per_plane(p):
        xo, go, wo = _plane(f, g, p)
        xb, gb, wb = f.gep("%gx", xo), f.gep("%g", go), f.gep("%w", wo)
        f.loop(g["HW"], lambda i: f.op(f"store {ty} 0.0, ptr {f.gep(xb, i)}"))

        def per_row(oh):
            gr = f.gep(gb, f.v(f"mul nsw i64 {oh}, {g['OW']}"))

            def per_offset(k, xs):
                wv = f.load(f.gep(wb, k))

                def acc(i, j):
                    dst = f.gep(xs, j)
                    prod = f.v(f"fmul {ty} {wv}, {f.load(f.gep(gr, i))}")
                    f.op(f"store {ty} {f.v(f'fadd {ty} {f.load(dst)}, {prod}')}, ptr {dst}")
                f.strided(g, g["OW"], acc)
            _offsets(f, g, xb, oh, per_offset)
        f.loop(g["OH"], per_row)
    f.loop(g["P"], per_plane)
    return (f"define void @{_PREFIX}dx_{suffix}(ptr noalias nocapture readonly %g, "
            f"ptr noalias nocapture readonly %w, ptr noalias nocapture %gx, "
            f"ptr noalias nocapture readonly %geo) nounwind {{\nentry:\n"
            + "\n".join(f.lines) + "\n  ret void\n}\n")


def _weight_grad(suffix: str) -> str:
    ty = _TYPES[suffix][0]
    f = _Fn(ty)
    g = _header(f)

    def per_plane(p):
        xo, go, wo = _plane(f, g, p)
        xb, gb, wb = f.gep("%x", xo), f.gep("%g", go), f.gep("%gw", wo)

        def per_kh(kh):
            def per_kw(kw):
                k = f.v(f"mul nsw i64 {kh}, {g['KW']}")
                k = f.v(f"add nsw i64 {k}, {kw}")
                f.loop(g["OW"], lambda i: f.op(f"store {ty} 0.0, ptr {f.gep('%acc', i)}"))

                def per_row(oh):
                    gr = f.gep(gb, f.v(f"mul nsw i64 {oh}, {g['OW']}"))
                    dh = f.v(f"mul nsw i64 {kh}, {g['dh']}")
                    dw = f.v(f"mul nsw i64 {kw}, {g['dw']}")
                    r = f.v(f"mul nsw i64 {oh}, {g['sh']}")
                    r = f.v(f"add nsw i64 {r}, {dh}")
                    r = f.v(f"mul nsw i64 {r}, {g['W']}")
                    xs = f.gep(xb, f.v(f"add nsw i64 {r}, {dw}"))

                    def acc(i, j):
                        dst = f.gep("%acc", i)
                        prod = f.v(f"fmul {ty} {f.load(f.gep(gr, i))}, {f.load(f.gep(xs, j))}")
                        f.op(f"store {ty} {f.v(f'fadd {ty} {f.load(dst)}, {prod}')}, ptr {dst}")
                    f.strided(g, g["OW"], acc)
                f.loop(g["OH"], per_row)
                # the row's sum, in order, added to gw[c, k] (``%sum``: a
                # stack slot of the entry block, promoted to a register)
                f.op(f"store {ty} 0.0, ptr %sum")

                def total(i):
                    s = f.v(f"fadd {ty} {f.load('%sum')}, {f.load(f.gep('%acc', i))}")
                    f.op(f"store {ty} {s}, ptr %sum")
                f.loop(g["OW"], total)
                dst = f.gep(wb, k)
                s = f.v(f"fadd {ty} {f.load(dst)}, {f.load('%sum')}")
                f.op(f"store {ty} {s}, ptr {dst}")
            f.loop(g["KW"], per_kw)
        f.loop(g["KH"], per_kh)
    f.lines.insert(0, f"  %sum = alloca {ty}")
    f.loop(g["P"], per_plane)
    return (f"define void @{_PREFIX}dw_{suffix}(ptr noalias nocapture readonly %x, "
            f"ptr noalias nocapture readonly %g, ptr noalias nocapture %gw, "
            f"ptr noalias nocapture %acc, ptr noalias nocapture readonly %geo) nounwind {{\n"
            f"entry:\n" + "\n".join(f.lines) + "\n  ret void\n}\n")


def ir_text() -> str:
    return "".join(make(s) for make in (_forward, _input_grad, _weight_grad) for s in _TYPES)


class Kernels:
    """The loaded kernels, called on NumPy arrays (C-contiguous, float32 or
    float64; the caller checks shapes)."""

    _THREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p)
    _FOUR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_void_p)

    def __init__(self, library):
        self._library = library              # keeps the code mapped
        self._fns = {}
        for name in NAMES:
            kind, suffix = name[len(_PREFIX):].split("_")
            make = self._FOUR if kind == "dw" else self._THREE
            self._fns[(kind, np.dtype(np.float32 if suffix == "f32" else np.float64))] = \
                make(int(library[name]))

    @staticmethod
    def _geo(planes, c, padded, out, kernel, stride, dilation) -> np.ndarray:
        return np.array((planes, c) + tuple(padded) + tuple(out) + tuple(kernel)
                        + tuple(stride) + tuple(dilation), np.int64)

    def forward(self, xp: np.ndarray, wk: np.ndarray, out, kernel, stride,
                dilation) -> np.ndarray:
        """``xp`` ``[N, C, H, W]`` (padded), ``wk`` ``[C, KH*KW]`` ->
        ``[N, C, OH, OW]``."""
        n, c = xp.shape[:2]
        y = np.empty((n, c) + tuple(out), xp.dtype)
        geo = self._geo(n * c, c, xp.shape[2:], out, kernel, stride, dilation)
        self._fns[("fwd", xp.dtype)](xp.ctypes.data, wk.ctypes.data, y.ctypes.data,
                                     geo.ctypes.data)
        return y

    def input_grad(self, g: np.ndarray, wk: np.ndarray, padded, kernel, stride,
                   dilation) -> np.ndarray:
        """``g`` ``[N, C, OH, OW]`` -> the padded input's gradient
        ``[N, C, H, W]``."""
        n, c = g.shape[:2]
        gx = np.empty((n, c) + tuple(padded), g.dtype)
        geo = self._geo(n * c, c, padded, g.shape[2:], kernel, stride, dilation)
        self._fns[("dx", g.dtype)](g.ctypes.data, wk.ctypes.data, gx.ctypes.data,
                                   geo.ctypes.data)
        return gx

    def weight_grad(self, xp: np.ndarray, g: np.ndarray, kernel, stride,
                    dilation) -> np.ndarray:
        """``xp`` (padded) and ``g`` -> ``[C, KH*KW]``."""
        n, c = xp.shape[:2]
        gw = np.zeros((c, kernel[0] * kernel[1]), xp.dtype)
        acc = np.empty(g.shape[-1], xp.dtype)
        geo = self._geo(n * c, c, xp.shape[2:], g.shape[2:], kernel, stride, dilation)
        self._fns[("dw", xp.dtype)](xp.ctypes.data, g.ctypes.data, gw.ctypes.data,
                                    acc.ctypes.data, geo.ctypes.data)
        return gw


def load() -> Kernels | None:
    """This process's kernels (made on the first call), or None where they
    could not be made (the reason in ``INFO["error"]``)."""
    if _made:
        return _made[0]
    with _lock:
        if not _made:
            try:
                from tracec.backends.cpu import runtime
                _made.append(Kernels(runtime._link(_object_code(), list(NAMES))))
            except Exception as e:  # noqa: BLE001  (any failure: the NumPy path stays correct)
                INFO["error"] = f"{type(e).__name__}: {e}"
                _made.append(None)
    return _made[0]


def _object_code() -> bytes:
    from tracec.backends.cpu.rng_kernels import ir_object_code
    return ir_object_code("depthwise conv kernels", ir_text(), INFO)
