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

Layout: NCHW planes, ``P = N * C`` of them, each ``[H, W]`` (the input,
not padded: 1-d convolutions are ``H = 1``), the output planes ``[OH,
OW]``, the weight ``[C, KH * KW]``; ``geo`` is int64 ``[P, C, H, W, OH,
OW, KH, KW, sh, sw, dh, dw, ph, pw]`` (``ph``, ``pw``: the zero padding
above and left; below and right follow from ``OH``, ``OW``) and then, per
kernel column ``kw``, the first output column reading inside the input,
how many do, and the input column the first reads (``Kernels._geo``).
Every array is C-contiguous.  Padding positions are skipped, never read.

* ``forward``: each output plane zeroed, then per output row and kernel
  offset ``k = (kh, kw)`` (row-major) ``y[p, oh, ow] += w[c, k] * x[p,
  oh*sh + kh*dh - ph, ow*sw + kw*dw - pw]`` over the columns inside.
* ``input_grad``: the input's gradient, each plane zeroed, then ``w[c, k]
  * g`` added into each offset's window, output rows outer.
* ``weight_grad``: per plane, the products ``g * window_k(x)`` added into
  rows ``acc[k]`` (``[KK, OW]``, scratch) over the output rows, then each
  row summed in order into ``gw[c, k]``.

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
_GEO = ("P", "C", "H", "W", "OH", "OW", "KH", "KW", "sh", "sw", "dh", "dw", "ph", "pw")


class _Fn:
    """One function's IR: numbered values, blocks, and counted loops."""

    def __init__(self, ty: str, meta: list):
        self.ty, self.lines, self.n, self.block = ty, [], 0, "entry"
        self.meta = meta         # the module's metadata lines (``short_rows``)

    def short_rows(self) -> str:
        """``!llvm.loop`` metadata for a loop over short rows: vectorized
        256 bits wide, not interleaved.  (MobileNet's rows are 4 to 32
        elements: the vectorizer's own choice on AVX-512, 16 lanes
        interleaved, 32 or 64 elements an iteration, left a 16-element row
        to the scalar remainder.)"""
        n = len(self.meta)
        width = 8 if self.ty == "float" else 4
        self.meta += [f"!{n} = distinct !{{!{n}, !{n + 1}, !{n + 2}}}",
                      f'!{n + 1} = !{{!"llvm.loop.vectorize.width", i32 {width}}}',
                      f'!{n + 2} = !{{!"llvm.loop.interleave.count", i32 1}}']
        return f"!{n}"

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

    def loop(self, count: str, body, hint: str = ""):
        """``for i in range(count): body(i)`` (count >= 0); ``hint``: the
        loop's ``!llvm.loop`` metadata (``short_rows``)."""
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
        self.op(f"br label %{head}" + (f", !llvm.loop {hint}" if hint else ""))
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
        self.branch(unit, lambda: self.loop(count, lambda i: body(i, i), self.short_rows()),
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


def _windows(f: _Fn, g: dict, xb: str, oh: str, body):
    """``body(k, xs, lo, count)`` per kernel offset ``k`` (row-major) whose
    input row for output row ``oh`` lies inside the (unpadded) plane
    ``xb``: output columns ``lo .. lo + count`` read input columns inside
    the plane (the others read padding: zeros, skipped), the first of
    them at address ``xs``; consecutive columns ``sw`` apart."""
    top = f.v(f"mul nsw i64 {oh}, {g['sh']}")
    top = f.v(f"sub nsw i64 {top}, {g['ph']}")

    def per_kh(kh):
        ih = f.v(f"mul nsw i64 {kh}, {g['dh']}")
        ih = f.v(f"add nsw i64 {top}, {ih}")
        inside = f.v(f"icmp ult i64 {ih}, {g['H']}")      # 0 <= ih < H

        def row():
            xr = f.gep(xb, f.v(f"mul nsw i64 {ih}, {g['W']}"))

            def per_kw(kw):
                k = f.v(f"mul nsw i64 {kh}, {g['KW']}")
                k = f.v(f"add nsw i64 {k}, {kw}")
                # the offset's columns (``Kernels._geo``: after the sizes)
                at = f.v(f"mul nsw i64 {kw}, 3")
                at = f.v(f"add nsw i64 {at}, {len(_GEO)}")
                cols = []
                for q in range(3):
                    i = f.v(f"add nsw i64 {at}, {q}")
                    ptr = f.v(f"getelementptr inbounds i64, ptr %geo, i64 {i}")
                    cols.append(f.v(f"load i64, ptr {ptr}"))
                lo, count, first = cols
                body(k, f.gep(xr, first), lo, count)
            f.loop(g["KW"], per_kw)
        f.branch(inside, row, lambda: None)
    f.loop(g["KH"], per_kh)


def _plane(f: _Fn, g: dict, p: str):
    c = f.v(f"urem i64 {p}, {g['C']}")
    return (f.v(f"mul nsw i64 {p}, {g['HW']}"), f.v(f"mul nsw i64 {p}, {g['OHW']}"),
            f.v(f"mul nsw i64 {c}, {g['KK']}"))


def _madd(f: _Fn, dst: str, a: str, b: str):
    """``*dst += a * b``."""
    ty = f.ty
    prod = f.v(f"fmul {ty} {a}, {b}")
    f.op(f"store {ty} {f.v(f'fadd {ty} {f.load(dst)}, {prod}')}, ptr {dst}")


def _zero(f: _Fn, base: str, count: str):
    f.loop(count, lambda i: f.op(f"store {f.ty} 0.0, ptr {f.gep(base, i)}"))


def _define(name: str, args: str, f: _Fn) -> str:
    return (f"define void @{_PREFIX}{name}({args}, ptr noalias nocapture readonly %geo) "
            f"nounwind {{\nentry:\n" + "\n".join(f.lines) + "\n  ret void\n}\n")


def _forward(suffix: str, meta: list) -> str:
    f = _Fn(_TYPES[suffix][0], meta)
    g = _header(f)

    def per_plane(p):
        xo, yo, wo = _plane(f, g, p)
        xb, yb, wb = f.gep("%x", xo), f.gep("%y", yo), f.gep("%w", wo)
        _zero(f, yb, g["OHW"])

        def per_row(oh):
            yr = f.gep(yb, f.v(f"mul nsw i64 {oh}, {g['OW']}"))

            def per_offset(k, xs, lo, count):
                wv = f.load(f.gep(wb, k))
                ys = f.gep(yr, lo)
                f.strided(g, count, lambda i, j: _madd(f, f.gep(ys, i), wv,
                                                       f.load(f.gep(xs, j))))
            _windows(f, g, xb, oh, per_offset)
        f.loop(g["OH"], per_row)
    f.loop(g["P"], per_plane)
    return _define(f"fwd_{suffix}", "ptr noalias nocapture readonly %x, ptr noalias nocapture "
                   "readonly %w, ptr noalias nocapture %y", f)


def _input_grad(suffix: str, meta: list) -> str:
    f = _Fn(_TYPES[suffix][0], meta)
    g = _header(f)

    def per_plane(p):
        xo, go, wo = _plane(f, g, p)
        xb, gb, wb = f.gep("%gx", xo), f.gep("%g", go), f.gep("%w", wo)
        _zero(f, xb, g["HW"])

        def per_row(oh):
            gr = f.gep(gb, f.v(f"mul nsw i64 {oh}, {g['OW']}"))

            def per_offset(k, xs, lo, count):
                wv = f.load(f.gep(wb, k))
                gs = f.gep(gr, lo)
                f.strided(g, count, lambda i, j: _madd(f, f.gep(xs, j), wv,
                                                       f.load(f.gep(gs, i))))
            _windows(f, g, xb, oh, per_offset)
        f.loop(g["OH"], per_row)
    f.loop(g["P"], per_plane)
    return _define(f"dx_{suffix}", "ptr noalias nocapture readonly %g, ptr noalias nocapture "
                   "readonly %w, ptr noalias nocapture %gx", f)


def _weight_grad(suffix: str, meta: list) -> str:
    ty = _TYPES[suffix][0]
    f = _Fn(ty, meta)
    g = _header(f)
    accn = f.v(f"mul nsw i64 {g['KK']}, {g['OW']}")

    def per_plane(p):
        xo, go, wo = _plane(f, g, p)
        xb, gb, wb = f.gep("%x", xo), f.gep("%g", go), f.gep("%gw", wo)
        _zero(f, "%acc", accn)

        def per_row(oh):
            gr = f.gep(gb, f.v(f"mul nsw i64 {oh}, {g['OW']}"))

            def per_offset(k, xs, lo, count):
                start = f.v(f"mul nsw i64 {k}, {g['OW']}")
                start = f.v(f"add nsw i64 {start}, {lo}")
                acc, gs = f.gep("%acc", start), f.gep(gr, lo)
                f.strided(g, count, lambda i, j: _madd(f, f.gep(acc, i), f.load(f.gep(gs, i)),
                                                       f.load(f.gep(xs, j))))
            _windows(f, g, xb, oh, per_offset)
        f.loop(g["OH"], per_row)

        # each offset's row of products summed in order, added to gw[c, k]
        # (``%sum``: a stack slot of the entry block, promoted to a register)
        def per_k(k):
            row = f.gep("%acc", f.v(f"mul nsw i64 {k}, {g['OW']}"))
            f.op(f"store {ty} 0.0, ptr %sum")

            def total(i):
                s = f.v(f"fadd {ty} {f.load('%sum')}, {f.load(f.gep(row, i))}")
                f.op(f"store {ty} {s}, ptr %sum")
            f.loop(g["OW"], total)
            dst = f.gep(wb, k)
            s = f.v(f"fadd {ty} {f.load(dst)}, {f.load('%sum')}")
            f.op(f"store {ty} {s}, ptr {dst}")
        f.loop(g["KK"], per_k)
    f.lines.insert(0, f"  %sum = alloca {ty}")
    f.loop(g["P"], per_plane)
    return _define(f"dw_{suffix}", "ptr noalias nocapture readonly %x, ptr noalias nocapture "
                   "readonly %g, ptr noalias nocapture %gw, ptr noalias nocapture %acc", f)


def ir_text() -> str:
    meta: list = []
    body = "".join(make(s, meta) for make in (_forward, _input_grad, _weight_grad)
                   for s in _TYPES)
    return body + "".join(line + "\n" for line in meta)


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
    def _geo(planes, c, sp, out, kernel, stride, dilation, low) -> np.ndarray:
        """The sizes (``_GEO``), then per kernel column ``kw`` the output
        columns that read inside the input: the first (``lo``), their
        count and the input column ``lo`` reads (the kernels' row loops
        would otherwise divide, per row and offset)."""
        cols = []
        w, ow, sw, dw, pw = sp[1], out[1], stride[1], dilation[1], low[1]
        for kw in range(kernel[1]):
            t = pw - kw * dw                   # output column o reads o * sw - t
            lo = max(0, -(-t // sw))
            hi = min(ow, (w - 1 + t) // sw + 1) if w - 1 + t >= 0 else 0
            cols += [lo, max(0, hi - lo), lo * sw - t]
        return np.array((planes, c) + tuple(sp) + tuple(out) + tuple(kernel) + tuple(stride)
                        + tuple(dilation) + tuple(low) + tuple(cols), np.int64)

    def forward(self, x: np.ndarray, wk: np.ndarray, out, kernel, stride, dilation,
                low) -> np.ndarray:
        """``x`` ``[N, C, H, W]``, ``wk`` ``[C, KH*KW]``, zero padding
        ``low`` (top, left; the bottom and right follow from ``out``) ->
        ``[N, C, OH, OW]``."""
        n, c = x.shape[:2]
        y = np.empty((n, c) + tuple(out), x.dtype)
        geo = self._geo(n * c, c, x.shape[2:], out, kernel, stride, dilation, low)
        self._fns[("fwd", x.dtype)](x.ctypes.data, wk.ctypes.data, y.ctypes.data,
                                    geo.ctypes.data)
        return y

    def input_grad(self, g: np.ndarray, wk: np.ndarray, sp, kernel, stride, dilation,
                   low) -> np.ndarray:
        """``g`` ``[N, C, OH, OW]`` -> the input's gradient ``[N, C, *sp]``."""
        n, c = g.shape[:2]
        gx = np.empty((n, c) + tuple(sp), g.dtype)
        geo = self._geo(n * c, c, sp, g.shape[2:], kernel, stride, dilation, low)
        self._fns[("dx", g.dtype)](g.ctypes.data, wk.ctypes.data, gx.ctypes.data,
                                   geo.ctypes.data)
        return gx

    def weight_grad(self, x: np.ndarray, g: np.ndarray, kernel, stride, dilation,
                    low) -> np.ndarray:
        """``x`` and ``g`` -> ``[C, KH*KW]``."""
        n, c = x.shape[:2]
        kk = kernel[0] * kernel[1]
        gw = np.zeros((c, kk), x.dtype)
        acc = np.empty(kk * g.shape[-1], x.dtype)
        geo = self._geo(n * c, c, x.shape[2:], g.shape[2:], kernel, stride, dilation, low)
        self._fns[("dw", x.dtype)](x.ctypes.data, g.ctypes.data, gw.ctypes.data,
                                   acc.ctypes.data, geo.ctypes.data)
        return gw


def load() -> Kernels | None:
    """This process's kernels (made on the first call), or None where they
    could not be made (the reason in ``INFO["error"]``)."""
    from tracec.backends.cpu import rng_kernels, runtime

    def make():
        code = rng_kernels.ir_object_code("depthwise conv kernels", ir_text(), INFO)
        return Kernels(runtime._link(code, list(NAMES)))
    return rng_kernels.load_once(_made, _lock, INFO, make)

