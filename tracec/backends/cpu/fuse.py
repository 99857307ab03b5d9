"""From tracec ops to loop programs (``loops.LoopProgram``).

``ProgramBuilder`` evaluates tracec values at a point of an iteration
domain.  Each value is evaluated under an *index map*: for each of its dims,
the domain dim that indexes it (None: index 0, a broadcast dim).  NumPy
broadcasting, ``broadcast_to`` and ``transpose`` are maps, so they fuse at no
cost; values read from memory ("views": a buffer, or a reshape / slice /
transpose / broadcast of one) become one ``Access`` with an offset and a
stride per domain dim.

Invariant: a program built here computes, at every domain point, exactly
what the ops compute elementwise; anything it cannot express raises
``NotFusable`` and the caller lowers those ops one at a time instead.
"""
from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation, SSAValue

from tracec import dtypes as dt
from tracec import ir
from tracec.backends.cpu import scalar
from tracec.backends.cpu.loops import Access, LoopProgram, Node, Reduction

__all__ = ["NotFusable", "ProgramBuilder", "splat_value", "REDUCE_KIND", "VIEW_OPS"]

REDUCE_KIND = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min"}
VIEW_OPS = frozenset({"reshape", "slice", "transpose", "broadcast_to"})
#: Domains with a reduced dim 0 at least this large are split into blocks
#: that threads can share (``LoopProgram.split_for_threads``): the
#: lowering's ``PARALLEL_WORK``, below which a kernel runs on one thread.
SPLIT_MIN_SIZE = 1 << 18


class NotFusable(Exception):
    """The ops cannot be expressed as one loop program."""


def _raw_strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def splat_value(op: ir.ConstantOp):
    """The Python scalar of a constant whose elements are all equal (or a
    0-d constant); None otherwise."""
    arr = ir.constant_array(op.value)
    if arr.size == 0:
        return None
    flat = arr.reshape(-1)
    first = flat[0]
    if arr.size > 1:
        same = (flat == first) | (np.isnan(flat) & np.isnan(first)) \
            if flat.dtype.kind == "f" else flat == first
        if not bool(np.all(same)):
            return None
        if flat.dtype.kind == "f" and np.any(np.signbit(flat) != np.signbit(first)):
            return None
    return first.item()


def _check_kind(message: str) -> tuple[str, str]:
    """``(kind prefix, text)`` of a check's message (``ops.INDEX_ERROR``:
    an IndexError, ``ops.VALUE_ERROR`` a ValueError; the prefix stays
    first, before the user's line)."""
    from tracec.ops.elementwise import check_kind
    prefix, _, _, text = check_kind(message)
    return prefix, text


class ProgramBuilder:
    """Builds one LoopProgram over ``shape``.

    ``inside``: the ops whose results are computed in the program;
    ``slot_of(value)``: the kernel slot of a value held in memory;
    ``const_slot(op)``: the slot of a non-splat constant's global;
    ``subst``: values (a kernel's block arguments) to evaluate as other
    values (the kernel operands that are views evaluated in the program,
    their ops in ``inside``)."""

    def __init__(self, shape, reduced, inside: set, slot_of, const_slot, subst=None):
        self.prog = LoopProgram(list(shape), list(reduced))
        self.inside = inside
        self.slot_of = slot_of
        self.const_slot = const_slot
        self.subst = subst or {}
        self._memo: dict = {}

    # --- nodes -------------------------------------------------------------------

    def _add(self, node: Node) -> int:
        self.prog.nodes.append(node)
        return len(self.prog.nodes) - 1

    def _const(self, value, d: dt.DType) -> int:
        key = ("const", repr(value), d.name)
        k = self._memo.get(key)
        if k is None:
            k = self._memo[key] = self._add(Node("const", d, value=value))
        return k

    def _op(self, v: SSAValue):
        op = v.owner
        return op if isinstance(op, Operation) and op in self.inside else None

    def view(self, v: SSAValue):
        """``(slot, offset, strides)`` if ``v`` is readable from memory (a
        buffer or a view op of one), else None."""
        # (a view op in the kernel reads a block argument that may stand for
        # a pending kernel view: substituted here too, not only in _value)
        v = self.subst.get(v, v)
        op = self._op(v)
        if op is None:
            if isinstance(v.owner, ir.ConstantOp) and splat_value(v.owner) is not None:
                return None
            if isinstance(v.owner, ir.ConstantOp):
                return self.const_slot(v.owner), 0, _raw_strides(ir.shape_of(v.type))
            return self.slot_of(v), 0, _raw_strides(ir.shape_of(v.type))
        name = ir.primitive_name(op)
        if name not in VIEW_OPS:
            return None
        src = self.view(op.operands[0])
        if src is None:
            return None
        slot, off, st = src
        p = ir.op_params(op)
        ishape = ir.shape_of(op.operands[0].type)
        oshape = ir.shape_of(v.type)
        if name == "reshape":
            if [s for s, n in zip(st, ishape) if n != 1] != \
                    [s for s, n in zip(_raw_strides(ishape), ishape) if n != 1]:
                return None        # reshape of a non-contiguous view
            return slot, off, _raw_strides(oshape)
        if name == "slice":
            off += sum(a * s for a, s in zip(p["starts"], st))
            return slot, off, [s * c for s, c in zip(st, p["steps"])]
        if name == "transpose":
            return slot, off, [st[q] for q in p["perm"]]
        lead = len(oshape) - len(ishape)
        return slot, off, [0] * lead + [0 if n == 1 else s for s, n in zip(st, ishape)]

    def value(self, v: SSAValue, m: tuple) -> int:
        """The node computing ``v`` at the domain point, ``v``'s dims indexed
        by domain dims ``m`` (None: index 0)."""
        key = (v, m)
        k = self._memo.get(key)
        if k is not None:
            return k
        k = self._memo[key] = self._value(v, m)
        return k

    def _value(self, v: SSAValue, m: tuple) -> int:
        v = self.subst.get(v, v)
        d = ir.dtype_of(v.type)
        if isinstance(v.owner, ir.ConstantOp):
            s = splat_value(v.owner)
            if s is not None:
                return self._const(s, d)
        view = self.view(v)
        if view is not None:
            slot, off, st = view
            strides = [0] * len(self.prog.shape)
            for dim, s, n in zip(m, st, ir.shape_of(v.type)):
                if dim is not None and n != 1:
                    strides[dim] += s
            return self._add(Node("load", d, access=Access(slot, d, off, strides)))
        op = self._op(v)
        if op is None:
            raise NotFusable(f"{v} is not available")
        name = ir.primitive_name(op)
        p = ir.op_params(op) if name else {}
        if name == "check":     # the message a failure raises names the user's line
            kind, text = _check_kind(p["message"])
            p = {"message": f"{kind}{ir.format_loc(op)}: {text}"}
        shape = ir.shape_of(v.type)
        if name in scalar.ELEMENTWISE or name == "broadcast_to":
            args = [self.value(u, self._bmap(m, shape, ir.shape_of(u.type)))
                    for u in op.operands]
            if name == "broadcast_to":
                return args[0]
            return self._add(Node("prim", d, name=name, params=p, args=args,
                                  in_dtypes=[ir.dtype_of(u.type) for u in op.operands]))
        if name == "transpose":
            um = [None] * len(shape)
            for k, q in enumerate(p["perm"]):
                um[q] = m[k]
            return self.value(op.operands[0], tuple(um))
        if name == "reshape":
            u = op.operands[0]
            ushape = ir.shape_of(u.type)
            if [n for n in shape if n != 1] != [n for n in ushape if n != 1]:
                raise NotFusable("reshape that regroups dims")
            dims = iter([dim for dim, n in zip(m, shape) if n != 1])
            return self.value(u, tuple(next(dims) if n != 1 else None for n in ushape))
        if name == "full":
            return self._const(p["value"], d)
        if name == "iota":
            dim = m[p["axis"]] if shape[p["axis"]] != 1 else None
            if dim is None:
                return self._const(0, d)
            return self._add(Node("index", d, dim=dim))
        if name == "random_uniform":
            strides = [0] * len(self.prog.shape)
            for dim, s, n in zip(m, _raw_strides(shape), shape):
                if dim is not None and n != 1:
                    strides[dim] += s
            lin = self._add(Node("linear", dt.int64,
                                 access=Access(-1, dt.int64, 0, strides)))
            sv = self.view(op.operands[0])
            if sv is None or sv[1] != 0:
                raise NotFusable("random state is not a buffer")
            return self._add(Node("random", d, access=Access(sv[0], dt.int64, 0,
                                                             [0] * len(self.prog.shape)),
                                  args=[lin]))
        raise NotFusable(f"{op.name} does not fuse")

    @staticmethod
    def _bmap(m: tuple, shape, ushape) -> tuple:
        lead = len(shape) - len(ushape)
        return tuple(None if n == 1 else m[k + lead] for k, n in enumerate(ushape))

    # --- roots ---------------------------------------------------------------------

    def identity_map(self, v: SSAValue) -> tuple:
        shape = ir.shape_of(v.type)
        lead = len(self.prog.shape) - len(shape)
        return tuple(None if n == 1 else k + lead for k, n in enumerate(shape))

    def store(self, v: SSAValue, slot: int, offset: int = 0, strides=None) -> None:
        """Store ``v`` (of the domain's shape unless ``strides`` are given)
        at every domain point."""
        k = self.value(v, self.identity_map(v) if strides is None
                       else tuple(range(len(self.prog.shape))))
        if strides is None:
            strides = [s if n != 1 else 0 for s, n in
                       zip(_raw_strides(self.prog.shape), self.prog.shape)]
        self.prog.stores.append((k, Access(slot, ir.dtype_of(v.type), offset, list(strides))))

    def store_const(self, value, d: dt.DType, slot: int) -> None:
        """Store the scalar ``value`` at every point of the domain."""
        strides = [s if n != 1 else 0 for s, n in
                   zip(_raw_strides(self.prog.shape), self.prog.shape)]
        self.prog.stores.append((self._const(value, d), Access(slot, d, 0, strides)))

    def reduce(self, op: Operation, slot: int) -> None:
        """Accumulate reduction ``op`` (over this domain: its operand's
        shape) into ``slot``."""
        x = op.operands[0]
        axes = ir.op_params(op)["axes"]
        shape = self.prog.shape
        kept = [n for k, n in enumerate(shape) if k not in axes]
        ks = iter(_raw_strides(kept))
        strides = [0 if k in axes else next(ks) for k in range(len(shape))]
        strides = [0 if n == 1 else s for s, n in zip(strides, shape)]
        out_d = ir.dtype_of(op.results[0].type)
        node = self.value(x, tuple(range(len(shape))))
        self.prog.reductions.append(Reduction(REDUCE_KIND[ir.primitive_name(op)], node,
                                              Access(slot, out_d, 0, strides), out_d))

    def finish(self) -> LoopProgram:
        self.prog.coalesce()
        self.prog.split_for_threads(SPLIT_MIN_SIZE)
        return self.prog


def reduced_mask(shape, axes) -> list[bool]:
    return [k in axes for k in range(len(shape))]


def program_size(shape) -> int:
    return math.prod(shape)
