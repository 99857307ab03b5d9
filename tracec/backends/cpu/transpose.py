"""Materialized ``transpose``: a cache-blocked kernel.

A transpose whose innermost output dim is not the input's innermost dim
reads (or writes) with a large stride in a plain loop nest: every element
touches a new cache line.  This kernel walks the output in T x T tiles of
the two dims involved (``p``: the output's last dim; ``q``: the output dim
that is contiguous in the input), so a tile's T input lines and T output
lines stay in L1.  For 4- and 8-byte elements T is one vector register's
lanes and a full tile moves through registers: T vector loads along ``q``,
an in-register transpose (``gemm._transpose_tile``), T vector stores along
``p``; edge tiles and other element sizes go element by element.

The kernel's outer range is (the other output dims) x (tiles of ``q``), so
large transposes split across threads.  A transpose that keeps the input's
last dim innermost (contiguous rows moved around) stays a loop program
(``fuse.py``), which already copies contiguously.  Matmuls never need one:
they read a transposed operand through the packing (``lower.py``).
"""
from __future__ import annotations

import math

from tracec import ir
from tracec.backends.cpu import codegen, scalar
from tracec.backends.cpu.builder import several

__all__ = ["plan_transpose", "emit_transpose"]

#: Tile edge for element-by-element tiles (1- and 2-byte elements).
SCALAR_TILE = 32


def _contiguous(shape) -> list[int]:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return out[::-1]


def plan_transpose(in_shape, perm):
    """``(shape, in_strides)`` of the output dims after dropping size-1 dims
    and merging dims that stay adjacent and in order, or None when the
    result's innermost dim is contiguous in the input (no blocking needed)."""
    ist = _contiguous(in_shape)
    dims = [(in_shape[q], ist[q]) for q in perm if in_shape[q] != 1]
    merged: list[list[int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == s * n:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    if not merged or merged[-1][1] == 1:
        return None
    return [n for n, _ in merged], [s for _, s in merged]


def emit_transpose(low, op, shape, st) -> None:
    x, res = op.operands[0], op.results[0]
    d = ir.dtype_of(res.type)
    elt = scalar.storage_type(d)
    es = scalar.itemsize(d)
    n = len(shape)
    p = n - 1
    q = st.index(1)
    ost = _contiguous(shape)
    vl = codegen.vector_bits() // (8 * es)
    fast = es in (4, 8)
    T = vl if fast else SCALAR_TILE
    # Tile counts by ceiling division on sizes, so that a symbolic size
    # (``Sym``) stays symbolic: the kernel reads it at run time.
    nqt = (shape[q] + T - 1) // T
    npt = (shape[p] + T - 1) // T
    many_q = several(nqt)
    others = [k for k in range(n) if k not in (p, q)]
    nouter = math.prod(shape[k] for k in others)
    slots = [low.slot_value(res), low.slot_value(x)]

    def body(fb, ptrs, err, lo, hi, status):
        from tracec.backends.cpu.gemm import _transpose_tile, _vptr
        from tracec.backends.cpu.builder import vec
        outp, inp = ptrs
        vt = vec(elt, T)

        def unit(u):
            qt = fb.ibin("srem", u, fb.i64(nqt)) if many_q else fb.i64(0)
            rest = fb.ibin("sdiv", u, fb.i64(nqt)) if many_q else u
            in_off, out_off = fb.i64(0), fb.i64(0)
            for k in reversed(others):
                idx = fb.ibin("srem", rest, fb.i64(shape[k])) if k != others[0] else rest
                if k != others[0]:
                    rest = fb.ibin("sdiv", rest, fb.i64(shape[k]))
                in_off = fb.add(in_off, fb.mul(idx, fb.i64(st[k])))
                out_off = fb.add(out_off, fb.mul(idx, fb.i64(ost[k])))
            i0 = fb.mul(qt, fb.i64(T))
            i1 = fb.select(fb.icmp("slt", fb.add(i0, fb.i64(T)), fb.i64(shape[q])),
                           fb.add(i0, fb.i64(T)), fb.i64(shape[q]))

            def ptile(pt):
                j0 = fb.mul(pt, fb.i64(T))
                j1 = fb.select(fb.icmp("slt", fb.add(j0, fb.i64(T)), fb.i64(shape[p])),
                               fb.add(j0, fb.i64(T)), fb.i64(shape[p]))

                def elementwise():
                    def row(i):
                        ob = fb.add(out_off, fb.mul(i, fb.i64(ost[q])))
                        ib = fb.add(in_off, i)

                        def col(j):
                            v = fb.load(fb.gep(inp, fb.add(ib, fb.mul(j, fb.i64(st[p]))), elt),
                                        elt, es)
                            fb.store(v, fb.gep(outp, fb.add(ob, j), elt), es)
                            return ()
                        fb.for_range(j0, j1, col)
                        return ()
                    fb.for_range(i0, i1, row)

                if not fast:
                    elementwise()
                    return ()

                def tile():
                    rows = [fb.load(_vptr(fb, inp, fb.add(fb.add(in_off, i0), fb.mul(
                        fb.add(j0, fb.i64(r)), fb.i64(st[p]))), elt, vt), vt, es)
                        for r in range(T)]
                    for i, c in enumerate(_transpose_tile(fb, rows, vt)):
                        at = fb.add(fb.add(out_off, fb.mul(fb.add(i0, fb.i64(i)),
                                                           fb.i64(ost[q]))), j0)
                        fb.store(c, _vptr(fb, outp, at, elt, vt), es)
                full = fb.ibin("and", fb.icmp("eq", fb.ibin("sub", i1, i0), fb.i64(T)),
                               fb.icmp("eq", fb.ibin("sub", j1, j0), fb.i64(T)))
                fb.if_else(full, tile, elementwise)
                return ()
            fb.for_range(fb.i64(0), fb.i64(npt), ptile)
            return ()
        fb.for_range(lo, hi, unit)
    # The kernel depends only on the dtype, the shape and the source strides.
    low.kernels.kernel("transpose", slots, nouter * nqt, body, work=math.prod(shape),
                       key=("transpose", d.name, tuple(shape), tuple(st)))

