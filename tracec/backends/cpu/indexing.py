"""Emitters for ``pad``, ``concatenate``, the integer-index ops (``take``,
``gather``, ``index_add``, ``scatter_add``), ``argmax`` / ``argmin`` and
``argsort``.

Index ops view their operands as ``[O, A, I]`` (dims before the axis, the
axis, dims after it) and the indices as ``[O, J, I]`` (``gather``,
``scatter_add``) or ``[J]`` (``take``, ``index_add``).  Every index is
checked before it is used: an index outside ``[-A, A)`` makes the kernel
store it in the error slot and return the op's error code, so a bad index
is a Python error naming the op and its location, never a wild memory
access.  Negative indices count from the end, as in NumPy.

A ``slice`` or ``broadcast_to`` read only by ``pad`` /
``concatenate`` ops (directly or through reshapes that only add or drop
unit dims) is never materialized: those ops read its source through the
view (``folds_into_movement``, ``movement_reads``), so an im2col or its
gradient copies each element once instead of twice.

``scatter_max`` / ``scatter_min`` / ``scatter_mul`` are ``scatter_add``
with their own combine.

Invariant: the accumulating ops (``index_add``, ``scatter_*``) only split
their ``O`` dimension across threads, so repeated indices never race.
"""
from __future__ import annotations

import math

from xdsl.ir import Operation

from tracec import ir
from tracec.symbolic import same
from tracec.backends.cpu import scalar
from tracec.backends.cpu.builder import I1, I64, PTR, FuncBuilder
from tracec.backends.cpu.fuse import _raw_strides, splat_value

__all__ = ["emit_movement", "emit_index", "emit_arg", "emit_argsort", "folds_into_movement",
           "folds_into_kernels", "sibling_slices", "emit_slices", "movement_reads",
           "accumulate_fill"]

MOVEMENT = ("pad", "concatenate")
# The accumulating index ops and the scalar op each combines with.
ACCUMULATE = {"index_add": "add", "scatter_add": "add", "scatter_max": "maximum",
              "scatter_min": "minimum", "scatter_mul": "mul"}
# Not transposes: a blocked transpose then a contiguous copy beats one
# copy whose reads stride across rows.
_FOLDABLE_VIEWS = ("slice", "broadcast_to")


def _unit_reshape(op) -> bool:
    """A reshape that only adds or drops dims of size 1 (it composes with
    any strided view)."""
    a, b = ir.shape_of(op.operands[0].type), ir.shape_of(op.results[0].type)
    return [n for n in a if n != 1] == [n for n in b if n != 1]


def _read_by_movement_only(v) -> bool:
    uses = list(v.uses)
    if not uses:
        return False
    for u in uses:
        o = u.operation
        name = ir.primitive_name(o)
        if name in MOVEMENT:
            continue
        if name == "reshape" and _unit_reshape(o) and _read_by_movement_only(o.results[0]):
            continue
        return False
    return True


def folds_into_movement(op) -> bool:
    """Whether the view op ``op`` is left to the pad / concatenate ops that
    read it (then it gets no step of its own)."""
    return ir.primitive_name(op) in _FOLDABLE_VIEWS and _read_by_movement_only(op.results[0])


def folds_into_kernels(op, pending: set) -> bool:
    """Whether the ``slice`` ``op`` is read only by fused kernels, which can
    then read its source through the strided view (a max pool's window
    taps, an RNN's gate chunks) instead of a copy; ``pending``: the slices
    already left to kernels (a slice of one of those is not: one view
    level keeps the fallback, a copy step, simple)."""
    if ir.primitive_name(op) != "slice":
        return False
    uses = list(op.results[0].uses)
    # A strided innermost read would keep the kernel's loop from vectorizing
    # (a max pool's taps ran 3x slower read in place than copied first).
    shape = ir.shape_of(op.results[0].type)
    inner = [s for s, n in zip(ir.op_params(op)["steps"], shape) if n != 1][-1:]
    return (inner in ([], [1]) and bool(uses)
            and all(isinstance(u.operation, ir.KernelOp) for u in uses)
            and op.operands[0].owner not in pending)


def sibling_slices(op, pending: set) -> list:
    """The slices of ``op``'s source in its block with ``op``'s steps and
    result type (``op`` first) that get copy steps: a max pool's window
    taps, copied by one program that reads each line of the source once
    (``emit_slices``) rather than once per tap."""
    src = op.operands[0]
    p = ir.op_params(op)
    out = [op]
    for u in src.uses:
        o = u.operation
        if o is op or o.parent is not op.parent or ir.primitive_name(o) != "slice" or \
                o.results[0].type != op.results[0].type or \
                ir.op_params(o)["steps"] != p["steps"] or folds_into_movement(o) or \
                folds_into_kernels(o, pending) or o in out:
            continue
        out.append(o)
    return out


def emit_slices(low, ops) -> None:
    """One loop program storing every slice of ``ops`` (one source, one
    result type)."""
    res = [o.results[0] for o in ops]
    shape = ir.shape_of(res[0].type)
    slots: list = []
    pb = low._builder(shape, [False] * len(shape), set(ops), slots)
    for r in res:
        out = len(slots)
        slots.append(low.slot_value(r))
        pb.store(r, out)
    low.kernels.program("slices", pb.finish(), slots)


def movement_reads(op, folded: set):
    """``(reads, inside)`` for a pad / concatenate ``op``: the materialized
    values it reads (the sources of its folded views, for buffer liveness)
    and the view and reshape ops its program evaluates itself."""
    reads, inside = [], set()
    for v in op.operands:
        while True:
            o = v.owner
            if not isinstance(o, Operation) or isinstance(o, ir.ConstantOp):
                break
            name = ir.primitive_name(o)
            if o in folded or (name == "reshape" and _unit_reshape(o) and any(
                    x.owner in folded for x in _reshape_chain(o))):
                inside.add(o)
                v = o.operands[0]
                continue
            break
        reads.append(v)
    return reads, inside


def accumulate_fill(v):
    """The scalar ``v`` holds everywhere if it is a ``broadcast_to`` of a
    splat constant read only as the base of accumulating index ops (a
    gather's gradient: ``scatter_add`` into zeros): those ops fill their
    output with it instead of copying it, and it is never materialized.
    None otherwise."""
    o = v.owner
    if not isinstance(o, Operation) or ir.primitive_name(o) != "broadcast_to":
        return None
    c = o.operands[0].owner
    if not isinstance(c, ir.ConstantOp):
        return None
    uses = list(v.uses)
    if not uses or any(ir.primitive_name(u.operation) not in ACCUMULATE or u.index != 0
                       for u in uses):
        return None
    return splat_value(c)


def _reshape_chain(op):
    """The values under a chain of reshapes starting at ``op``."""
    v = op.operands[0]
    while True:
        yield v
        o = v.owner
        if not isinstance(o, Operation) or ir.primitive_name(o) != "reshape":
            return
        v = o.operands[0]


def _split(shape, axis):
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def emit_movement(low, op, name: str, inside: frozenset = frozenset()) -> None:
    """``inside``: the folded view ops (and reshapes of them) the operands
    are read through (``movement_reads``)."""
    res = op.results[0]
    oshape = ir.shape_of(res.type)
    d = ir.dtype_of(res.type)
    p = ir.op_params(op)
    ostr = _raw_strides(oshape)
    if name == "pad":
        x = op.operands[0]
        xshape = ir.shape_of(x.type)
        no, nx = math.prod(oshape), math.prod(xshape)
        # (symbolic sizes: filled unless structurally the same size; a slice's
        # gradient pads a window-multiple crop back to the image, by zero or
        # one row depending on its parity, and comparing made a size guard)
        if (no > nx) if isinstance(no, int) and isinstance(nx, int) else not same(no, nx):
            slots: list = []
            pb = low._builder(oshape, [False] * len(oshape), set(), slots)
            slots.append(low.slot_value(res))
            pb.store_const(p["value"], d, 0)
            low.kernels.program("pad_fill", pb.finish(), slots)
        parts = [(x, [lo * s for lo, s in zip(p["low"], ostr)],
                  [s * (i + 1) for s, i in zip(ostr, p["interior"])])]
    else:
        axis = p["axis"]
        parts, at = [], 0
        for x in op.operands:
            parts.append((x, [at * ostr[axis] if k == axis else 0 for k in range(len(oshape))],
                          list(ostr)))
            at += ir.shape_of(x.type)[axis]
    parts = [p for p in parts if math.prod(ir.shape_of(p[0].type)) != 0]
    first = ir.shape_of(parts[0][0].type) if parts else ()
    if name == "concatenate" and len(parts) > 1 and all(
            len(ir.shape_of(x.type)) == len(first) and all(
                same(a, b) for a, b in zip(ir.shape_of(x.type), first)) for x, _, _ in parts):
        # Parts of one shape (an im2col's shifted windows): one kernel
        # storing every part per point, so the windows of one input row are
        # read while it is in cache, instead of one pass over the input per
        # part.
        xshape = ir.shape_of(parts[0][0].type)
        slots = []
        pb = low._builder(xshape, [False] * len(xshape), set(inside), slots)
        out = len(slots)
        slots.append(low.slot_value(res))
        for x, offs, strides in parts:
            pb.store(x, out, sum(offs), [0 if n == 1 else s for s, n in zip(strides, xshape)])
        low.kernels.program(name, pb.finish(), slots)
        return
    for x, offs, strides in parts:
        xshape = ir.shape_of(x.type)
        slots = []
        pb = low._builder(xshape, [False] * len(xshape), set(inside), slots)
        out = len(slots)
        slots.append(low.slot_value(res))
        pb.store(x, out, sum(offs), [0 if n == 1 else s for s, n in zip(strides, xshape)])
        low.kernels.program(name, pb.finish(), slots)


def _checked_index(fb: FuncBuilder, raw, size: int, err, code: int):
    """sext the index, fail if outside [-size, size), wrap negatives."""
    i = fb.cast("sext", raw, I64)
    bad = fb.ibin("or", fb.icmp("slt", i, fb.i64(-size)), fb.icmp("sge", i, fb.i64(size)))
    tb, ok = fb.new_block(), fb.new_block()
    fb.cond_br(bad, tb, ok)
    fb.set_block(tb)
    fb.store(i, err, 8)
    fb.ret_(fb.i32(code))
    fb.set_block(ok)
    return fb.select(fb.icmp("slt", i, fb.i64(0)), fb.add(i, fb.i64(size)), i)


def emit_index(low, op, name: str) -> None:
    from tracec.backends.cpu.lower import describe
    x, idx = op.operands[0], op.operands[1]
    res = op.results[0]
    axis = ir.op_params(op)["axis"]
    xshape = ir.shape_of(x.type)
    d = ir.dtype_of(x.type)
    idd = ir.dtype_of(idx.type)
    O, A, I = _split(xshape, axis)
    J = ir.shape_of(idx.type)[axis] if name != "take" and name != "index_add" \
        else math.prod(ir.shape_of(idx.type))
    code = low.kernels.error(f"{describe(op)}: index {{index}} is out of bounds for "
                             f"dimension {axis} with size {A}", "index")
    accumulate = name in ACCUMULATE
    per_element = name != "take" and name != "index_add"
    fill = accumulate_fill(x) if accumulate else None
    slots = [low.slot_value(res)] + ([low.slot_value(x)] if fill is None else []) + [
        low.slot_value(idx)]
    if accumulate:
        slots.append(low.slot_value(op.operands[2]))
    st, sz = scalar.storage_type(d), scalar.itemsize(d)
    outer_j = O == 1 and not accumulate

    def body(fb, ptrs, err, lo, hi, status):
        if fill is not None:       # the base is a broadcast scalar: no buffer
            ptrs = [ptrs[0], None] + list(ptrs[1:])
        out, xp, ip = ptrs[0], ptrs[1], ptrs[2]
        if accumulate:
            src = ptrs[3]
            row = A * I * sz
            if row and fill is not None:
                value = scalar.constant(fb, fill, d)

                def put(e):
                    scalar.store(fb, value, out, e, d)
                    return ()
                fb.for_range(fb.mul(lo, fb.i64(A * I)), fb.mul(hi, fb.i64(A * I)), put)
            elif row:
                fb.intr("llvm.memcpy", [fb.gep(out, fb.mul(lo, fb.i64(A * I)), st),
                                        fb.gep(xp, fb.mul(lo, fb.i64(A * I)), st),
                                        fb.mul(fb.ibin("sub", hi, lo), fb.i64(row)),
                                        fb.const(False, I1)], None,
                        overload=[PTR, PTR, I64])

        def at_j(o, j):
            jrow = fb.add(fb.mul(o, fb.i64(J)), j)
            if not per_element:
                k = _checked_index(fb, scalar.load(fb, ip, j, idd), A, err, code)
                xrow = fb.mul(fb.add(fb.mul(o, fb.i64(A)), k), fb.i64(I))

            def at_i(i):
                flat = fb.add(fb.mul(jrow, fb.i64(I)), i)
                if per_element:
                    k = _checked_index(fb, scalar.load(fb, ip, flat, idd), A, err, code)
                    xi = fb.add(fb.mul(fb.add(fb.mul(o, fb.i64(A)), k), fb.i64(I)), i)
                else:
                    xi = fb.add(xrow, i)
                if accumulate:
                    v = scalar.load(fb, src, flat, d)
                    old = scalar.load(fb, out, xi, d)
                    new = scalar.apply(fb, ACCUMULATE[name], {}, [old, v], [d, d], d)
                    scalar.store(fb, new, out, xi, d)
                else:
                    scalar.store(fb, scalar.load(fb, xp, xi, d), out, flat, d)
                return ()
            fb.for_range(fb.i64(0), fb.i64(I), at_i)
            return ()

        if outer_j:
            fb.for_range(lo, hi, lambda j: at_j(fb.i64(0), j))
        else:
            def at_o(o):
                fb.for_range(fb.i64(0), fb.i64(J), lambda j: at_j(o, j))
                return ()
            fb.for_range(lo, hi, at_o)
    n = J if outer_j else O
    low.kernels.kernel(name, slots, n, body, work=O * J * I, can_fail=True)


def emit_arg(low, op, name: str) -> None:
    x = op.operands[0]
    res = op.results[0]
    xshape = ir.shape_of(x.type)
    d = ir.dtype_of(x.type)
    if not xshape:
        O, A, I = 1, 1, 1
    else:
        O, A, I = _split(xshape, ir.op_params(op)["axis"])
    slots = [low.slot_value(res), low.slot_value(x)]
    if d.is_floating_point:
        pred = "ogt" if name == "argmax" else "olt"
    else:
        pred = scalar.int_pred(d, "gt" if name == "argmax" else "lt")

    def body(fb, ptrs, err, lo, hi, status):
        out, xp = ptrs

        def at_o(o):
            def at_i(i):
                base = fb.add(fb.mul(o, fb.i64(A * I)), i)
                first = scalar.load(fb, xp, base, d)

                def step(a, best, bi):
                    v = scalar.load(fb, xp, fb.add(base, fb.mul(a, fb.i64(I))), d)
                    if d.is_floating_point:
                        better = fb.fcmp(pred, v, best)
                        nan_new = fb.ibin("and", fb.fcmp("uno", v, v), fb.fcmp("ord", best, best))
                        better = fb.ibin("or", better, nan_new)
                    else:
                        better = fb.icmp(pred, v, best)
                    return [fb.select(better, v, best), fb.select(better, a, bi)]
                _, bi = fb.for_range(fb.i64(1), fb.i64(A), step, carried=[first, fb.i64(0)])
                fb.store(bi, fb.gep(out, fb.add(fb.mul(o, fb.i64(I)), i), I64), 8)
                return ()
            fb.for_range(fb.i64(0), fb.i64(I), at_i)
            return ()
        fb.for_range(lo, hi, at_o)
    low.kernels.kernel(name, slots, O, body, work=O * A * I)



def emit_argsort(low, op) -> None:
    """Stable argsort by counting: element ``a`` lands at the number of
    elements that come before it (smaller, or equal with a smaller index;
    NaN is the largest value).  Quadratic in the sorted axis, but simple,
    branch-free and exact; sorted axes in models (top-k over a row of
    logits) are short."""
    x = op.operands[0]
    res = op.results[0]
    xshape = ir.shape_of(x.type)
    d = ir.dtype_of(x.type)
    p = ir.op_params(op)
    O, A, I = _split(xshape, p["axis"]) if xshape else (1, 1, 1)
    desc = bool(p["descending"])
    slots = [low.slot_value(res), low.slot_value(x)]

    def body(fb, ptrs, err, lo, hi, status):
        out, xp = ptrs

        def strictly_before(vb, va):
            if d.is_floating_point:
                nan_a, nan_b = fb.fcmp("uno", va, va), fb.fcmp("uno", vb, vb)
                if desc:
                    bigger_nan = fb.ibin("and", nan_b, fb.fcmp("ord", va, va))
                    return fb.ibin("or", fb.fcmp("ogt", vb, va), bigger_nan)
                smaller = fb.ibin("and", nan_a, fb.fcmp("ord", vb, vb))
                return fb.ibin("or", fb.fcmp("olt", vb, va), smaller)
            pred = scalar.int_pred(d, "gt" if desc else "lt")
            return fb.icmp(pred, vb, va)

        def equal(vb, va):
            if d.is_floating_point:
                both_nan = fb.ibin("and", fb.fcmp("uno", va, va), fb.fcmp("uno", vb, vb))
                return fb.ibin("or", fb.fcmp("oeq", vb, va), both_nan)
            return fb.icmp("eq", vb, va)

        def at_o(o):
            def at_i(i):
                base = fb.add(fb.mul(o, fb.i64(A * I)), i)

                def at_a(a):
                    va = scalar.load(fb, xp, fb.add(base, fb.mul(a, fb.i64(I))), d)

                    def count(b, rank):
                        vb = scalar.load(fb, xp, fb.add(base, fb.mul(b, fb.i64(I))), d)
                        tie_first = fb.ibin("and", equal(vb, va), fb.icmp("slt", b, a))
                        before = fb.ibin("or", strictly_before(vb, va), tie_first)
                        return [fb.add(rank, fb.cast("zext", before, I64))]
                    (rank,) = fb.for_range(fb.i64(0), fb.i64(A), count, carried=[fb.i64(0)])
                    fb.store(a, fb.gep(out, fb.add(base, fb.mul(rank, fb.i64(I))), I64), 8)
                    return ()
                fb.for_range(fb.i64(0), fb.i64(A), at_a)
                return ()
            fb.for_range(fb.i64(0), fb.i64(I), at_i)
            return ()
        fb.for_range(lo, hi, at_o)
    low.kernels.kernel("argsort", slots, O, body, work=O * A * A * I)
