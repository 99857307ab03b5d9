"""A sum of zero-``pad`` results, written window by window (``padsum``).

The gradient of a ``slice`` is a ``pad`` with zeros, so a value sliced many
times gets, as its gradient, a sum of pads: an LSTM's gate projection
(``[T, B, 4H]``, sliced once per time step, and each step's ``[B, 4H]``
cut into four gates), a convolution's im2col (the input gradient, col2im:
nine shifted windows).  Fused as written, each pad fills a whole output
sized buffer (mostly zeros) and the sum reads them all back: ``T`` full
buffers for an LSTM layer, which costs ``O(T^2)`` memory traffic.

Here a left-folded chain of ``add`` ops inside a ``tracec.kernel``
(``((p0 + p1) + p2) + ...``) whose operands are zero pads used nowhere
else (with interior zeros too: a strided convolution's col2im, each
window a strided one) is computed into one buffer: fill it with zeros (unless the windows
are disjoint and tile it), then for each pad, in the chain's order, store
(first, or where the windows are disjoint) or add its source into its
window.  Adding the same terms in the same order as the chain (a zero term
is exact), the result equals the chain's elementwise; only the sign of a
zero may differ (``-0.0`` where the chain adds ``+0.0``).  When other ops
of the kernel read the chain's sum (a ReLU's mask, a bias gradient), the
sum gets a buffer of its own and the rest of the kernel stays one loop
program reading it.  The pads get no step: their sources are read through
the pads' folded views (``indexing.movement_reads``), so an im2col's
gradient reads its ``[N, C, 9, H, W]`` once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from tracec import dtypes as dt
from tracec import ir
from tracec.backends.cpu import indexing
from tracec.backends.cpu.fuse import _raw_strides
from tracec.backends.cpu.loops import Access, Node, emit_program

__all__ = ["PadSum", "match", "emit"]


@dataclass(eq=False)
class PadSum:
    """``adds``: the chain's add ops, in order; ``pads``: the pad op of each
    term, in the order the chain adds them; ``whole``: the chain's sum is
    the kernel's only result (the kernel needs no program of its own)."""
    kernel: ir.KernelOp
    adds: list
    pads: list
    whole: bool

    @property
    def total(self) -> SSAValue:
        return self.adds[-1].results[0]


def _zero_pad(v: SSAValue, kop: Operation):
    """The pad op producing ``v`` if it pads with zeros, without interior
    padding or cropping, and only ``kop`` reads it; else None."""
    o = v.owner
    if not isinstance(o, Operation) or ir.primitive_name(o) != "pad":
        return None
    p = ir.op_params(o)
    if p["value"] != 0 or min(p["interior"], default=0) < 0 or min(p["low"]) < 0 \
            or min(p["high"]) < 0:
        return None
    if any(u.operation is not kop for u in v.uses):
        return None
    return o


def match(kop: ir.KernelOp) -> PadSum | None:
    """The first pad-sum chain of fused kernel ``kop``, if any."""
    body = kop.body.block
    env = dict(zip(body.args, kop.operands))

    def term(x: SSAValue, add: Operation):
        # A body argument read only by this add, standing for a zero pad.
        uses = list(x.uses)
        if x not in env or len(uses) != 1 or uses[0].operation is not add:
            return None
        return _zero_pad(env[x], kop)

    def plain_add(o) -> bool:
        # Same type in and out (no broadcast, no promotion); bool add is or.
        if ir.primitive_name(o) != "add":
            return False
        t = o.results[0].type
        return ir.dtype_of(t) is not dt.bool_ and all(
            x.type == t for x in o.operands)

    # The chain starts at an add of two pads, then follows the sole user of
    # each partial sum while that is an add of it and another pad.
    adds, pads = [], []
    for o in body.ops:
        if plain_add(o):
            ts = [term(x, o) for x in o.operands]
            if all(t is not None for t in ts):
                adds, pads = [o], ts
                break
    if not adds:
        return None
    while True:
        uses = list(adds[-1].results[0].uses)
        if len(uses) != 1 or not plain_add(uses[0].operation):
            break
        o = uses[0].operation
        a, b = o.operands
        t = term(b if a is adds[-1].results[0] else a, o)
        if t is None or a is b:
            break
        adds.append(o)
        pads.append(t)
    if len(pads) < 2:
        return None
    total = adds[-1].results[0]
    yields = list(body.last_op.operands)
    whole = yields == [total] and len(list(total.uses)) == 1
    return PadSum(kop, adds, pads, whole)


def _windows(ps: PadSum):
    """Per term: (low corner, shape, steps) of its window in the output:
    its source's element ``i`` lands at ``low + i * step`` (a strided
    slice's gradient, a strided convolution's col2im, pads with interior
    zeros: ``step = interior + 1``)."""
    out = []
    for p in ps.pads:
        q = ir.op_params(p)
        out.append((q["low"], ir.shape_of(p.operands[0].type),
                    tuple(i + 1 for i in q["interior"])))
    return out


def _extent(n, step):
    return (n - 1) * step + 1 if n else 0


def _apart(a0, an, at, b0, bn, bt) -> bool:
    """Whether windows ``a`` and ``b`` share no index along one dim: their
    bounding ranges do not overlap, or (equal steps) their lattices are
    offset by a non-multiple of the step (a max pool's taps, 2x2 windows of
    stride 2 interleaved)."""
    if not max(a0, b0) < min(a0 + _extent(an, at), b0 + _extent(bn, bt)):
        return True
    return at == bt and an > 1 and bn > 1 and (a0 - b0) % at != 0


def _disjoint_cover(windows, oshape) -> tuple[bool, bool]:
    """(pairwise disjoint, disjoint and covering the output); both False
    unless every size is static.  Disjoint windows inside the output cover
    it exactly when their sizes add up to its size."""
    if not all(isinstance(n, int) for _, s, _ in windows for n in s) or not all(
            isinstance(n, int) for n in oshape):
        return False, False
    for i, (la, sa, ta) in enumerate(windows):
        for lb, sb, tb in windows[i + 1:]:
            if not any(_apart(*d) for d in zip(la, sa, ta, lb, sb, tb)):
                return False, False
    cover = sum(math.prod(s) for _, s, _ in windows) == math.prod(oshape)
    return True, cover


def _strided(windows) -> bool:
    return any(t != 1 and n != 1 for _, s, st in windows for n, t in zip(s, st))


def _spans_dim0(windows, oshape) -> bool:
    """Whether every window spans dim 0 whole (a batch dim), static sizes."""
    return len(oshape) > 1 and all(isinstance(n, int) for n in oshape) and oshape[0] > 1 and all(
        lo[0] == 0 and s[0] == oshape[0] and st[0] == 1 for lo, s, st in windows)


def _window_strides(ostr, xshape, steps) -> list:
    """The output's strides for a window's source dims (0 on size-1 dims)."""
    return [0 if k == 1 else s * t for s, k, t in zip(ostr, xshape, steps)]


def emit(low, ps: PadSum, target: SSAValue) -> None:
    """Kernels computing the chain's sum into ``target``'s buffer."""
    oshape = ir.shape_of(target.type)
    d = ir.dtype_of(target.type)
    ostr = _raw_strides(oshape)
    windows = _windows(ps)
    disjoint, cover = _disjoint_cover(windows, oshape)
    if (not disjoint or _strided(windows)) and _spans_dim0(windows, oshape):
        _emit_blocked(low, ps, target, windows, fill=not cover, add=not disjoint)
        return
    if not cover:
        slots: list = []
        pb = low._builder(oshape, [False] * len(oshape), set(), slots)
        slots.append(low.slot_value(target))
        pb.store_const(0, d, 0)
        low.kernels.program("padsum_fill", pb.finish(), slots)
    for n, (pad, (lo, xshape, steps)) in enumerate(zip(ps.pads, windows)):
        if math.prod(xshape) == 0:
            continue
        x = pad.operands[0]
        _reads, inside = indexing.movement_reads(pad, low.folded_views)
        slots = []
        pb = low._builder(xshape, [False] * len(xshape), set(inside), slots)
        out = len(slots)
        slots.append(low.slot_value(target))
        off = sum(a * s for a, s in zip(lo, ostr))
        strides = _window_strides(ostr, xshape, steps)
        k = pb.value(x, tuple(range(len(xshape))))
        if n and not disjoint:
            acc = Access(out, d, off, list(strides))
            old = pb._add(Node("load", d, access=acc))
            k = pb._add(Node("prim", d, name="add", params={}, args=[old, k],
                             in_dtypes=[d, d]))
        pb.prog.stores.append((k, Access(out, d, off, list(strides))))
        low.kernels.program("padsum", pb.finish(), slots)


#: Window programs in one ``padsum_blocked`` kernel at most.
BLOCKED_PROGRAMS = 32


def _emit_blocked(low, ps: PadSum, target: SSAValue, windows, *, fill: bool,
                  add: bool) -> None:
    """Overlapping windows (col2im), or strided ones (a max pool's taps),
    that all span dim 0 (the batch): one kernel over dim 0, split across
    threads; per index, the output's block (one image's) is filled with
    zeros (unless ``fill`` is False: the windows cover it), then each window
    added (stored, when ``add`` is False: they are disjoint) into it in the
    chain's order while the block is in cache: one pass over the output
    instead of one per window (strided stores of a whole pass each touch
    every line of the output)."""
    oshape = ir.shape_of(target.type)
    d = ir.dtype_of(target.type)
    ostr = _raw_strides(oshape)
    slots: list = []
    out = len(slots)
    slots.append(low.slot_value(target))
    progs = []

    def pinned(pb):
        # An index node on dim 0 keeps it from being merged with the inner
        # dims: each program's dim 0 is the kernel's unit (never stored).
        pb._add(Node("index", dt.int64, dim=0))
        return pb.finish()
    if fill:
        pb = low._builder(oshape, [False] * len(oshape), set(), slots)
        pb.store_const(0, d, out)
        progs.append(pinned(pb))
    # Disjoint windows of one shape and step are stored by one loop nest
    # (their order cannot matter): a max pool's taps, interleaved, become
    # stores to neighbouring elements in one loop, which LLVM vectorizes as
    # an interleaved group (shuffles, whole-vector stores) where a loop per
    # tap stored every other element (scalar).
    groups: list = []
    for pad, (lo, xshape, steps) in zip(ps.pads, windows):
        if math.prod(xshape) == 0:
            continue
        if not add and groups and groups[-1][0] == (xshape, steps):
            groups[-1][1].append((pad, lo))
        else:
            groups.append(((xshape, steps), [(pad, lo)]))
    for (xshape, steps), members in groups:
        inside = set()
        for pad, _lo in members:
            inside.update(indexing.movement_reads(pad, low.folded_views)[1])
        pb = low._builder(xshape, [False] * len(xshape), inside, slots)
        strides = _window_strides(ostr, xshape, steps)
        for pad, lo in members:
            src = pb.value(pad.operands[0], tuple(range(len(xshape))))
            off = sum(a * s for a, s in zip(lo, ostr))
            if add:
                old = pb._add(Node("load", d, access=Access(out, d, off, list(strides))))
                src = pb._add(Node("prim", d, name="add", params={}, args=[old, src],
                                   in_dtypes=[d, d]))
            pb.prog.stores.append((src, Access(out, d, off, list(strides))))
        progs.append(pinned(pb))

    # At most BLOCKED_PROGRAMS windows per kernel, run one after another
    # (the same additions in the same order): LLVM's time on one function
    # grows faster than its length, and a strided convolution read by 8
    # others (CapsNet's primary capsules) has 648 windows: 50 s as one.
    for first in range(0, len(progs), BLOCKED_PROGRAMS):
        part = progs[first:first + BLOCKED_PROGRAMS]

        def body(fb, ptrs, err, lo, hi, status, part=part):
            def unit(u):
                nxt = fb.add(u, fb.i64(1))
                for prog in part:
                    emit_program(fb, prog, ptrs, u, nxt)
                return ()
            fb.for_range(lo, hi, unit)
        low.kernels.kernel("padsum_blocked", slots, oshape[0], body,
                           work=sum(p.size for p in part),
                           key=("padsum_blocked", tuple(repr(p) for p in part)))


def reads(low, ps: PadSum) -> list[SSAValue]:
    """The materialized values the pads' sources are read from."""
    out = []
    for p in ps.pads:
        r, _inside = indexing.movement_reads(p, low.folded_views)
        out.extend(r)
    return out
