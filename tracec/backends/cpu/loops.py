"""Loop programs: one loop nest computing elementwise expressions over a
rectangular domain, optionally accumulating reductions.

A ``LoopProgram`` is what ``fuse.py`` builds from tracec ops (one
elementwise op, a reduction, a movement op, or a whole ``tracec.kernel``
body) and what ``emit_program`` turns into the body of one kernel function:

* ``shape``: the iteration domain; ``reduced[d]`` marks reduced dims;
* ``nodes``: a DAG of scalar computations (``Node``), in topological order;
  leaves read memory through an ``Access`` (a buffer slot, an element
  offset and one stride per domain dim, 0 where the value is broadcast);
* ``stores``: (node, Access) pairs written at every domain point;
* ``reductions``: accumulations into an output Access whose strides are 0
  on the reduced dims.

Invariants kept by the emitter: the domain's dims are coalesced where every
access is contiguous across them, so a contiguous elementwise op is a single
loop over its elements (which LLVM vectorizes); float sums carry ``reassoc``
on their accumulating add and nothing else does; dim 0's range is
``[lo, hi)`` so a kernel can be split across threads when dim 0 is not
reduced.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tracec import dtypes as dt
from tracec.backends.cpu import scalar
from tracec.backends.cpu.builder import F64, I1, I64, FuncBuilder, bits_of
from tracec.ops.random import uniform_bits
from tracec.symbolic import Sym, same

__all__ = ["Access", "Node", "LoopProgram", "emit_program", "check_messages", "contiguous_strides"]

#: Blocks (about) of ``LoopProgram.split_for_threads``, and the least width
#: of a block along a contiguous innermost dim (it stays vectorized).
SPLIT_BLOCKS = 16
SPLIT_MIN_INNER = 64


def contiguous_strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s if d != 1 else 0)
        s *= d
    return out[::-1]


@dataclass
class Access:
    slot: int
    dtype: dt.DType
    offset: int
    strides: list[int]


@dataclass
class Node:
    """``kind`` is one of: load (access), const (value), index (dim: the
    domain index, i64), linear (access: its offset expression, i64), prim
    (name, params, args, in_dtypes), random (state access, arg: linear)."""
    kind: str
    dtype: dt.DType
    access: Access | None = None
    value: object = None
    dim: int = -1
    name: str = ""
    params: dict = field(default_factory=dict)
    args: list[int] = field(default_factory=list)
    in_dtypes: list = field(default_factory=list)


@dataclass
class Reduction:
    kind: str          # sum | max | min
    node: int
    out: Access
    acc_dtype: dt.DType


@dataclass
class LoopProgram:
    shape: list[int]
    reduced: list[bool]
    nodes: list[Node] = field(default_factory=list)
    stores: list[tuple[int, Access]] = field(default_factory=list)
    reductions: list[Reduction] = field(default_factory=list)

    def accesses(self):
        for n in self.nodes:
            if n.access is not None:
                yield n.access
        for _, a in self.stores:
            yield a
        for r in self.reductions:
            yield r.out

    def coalesce(self) -> None:
        """Drop size-1 dims and merge adjacent dims every access walks
        contiguously (and that are both reduced or both kept)."""
        pinned = {n.dim for n in self.nodes if n.kind == "index"}
        keep = [d for d, n in enumerate(self.shape) if n != 1 or d in pinned]
        self._select(keep)
        pinned = {n.dim for n in self.nodes if n.kind == "index"}
        d = len(self.shape) - 2
        while d >= 0:
            n1 = self.shape[d + 1]
            if (d not in pinned and d + 1 not in pinned
                    and self.reduced[d] == self.reduced[d + 1]
                    # (structurally: a symbolic stride equal to the
                    # product only at some sizes, as a stride-2 view's
                    # ``2*(X//2+1) == X+1`` at odd X, is not merged,
                    # rather than guarded: one version serves all sizes)
                    and all(same(a.strides[d], a.strides[d + 1] * n1)
                            for a in self.accesses())):
                self.shape[d] *= n1
                del self.shape[d + 1]
                del self.reduced[d + 1]
                for a in self.accesses():
                    del a.strides[d]
                pinned = {p - 1 if p > d else p for p in pinned}
                for n in self.nodes:
                    if n.kind == "index" and n.dim > d:
                        n.dim -= 1
            d -= 1
        if any(r.out.dtype in (dt.float16, dt.bfloat16) for r in self.reductions):
            # A float16/bfloat16 sum must accumulate in float32 and round
            # once, as eager does: reduced dims innermost, so the sum stays
            # in a register instead of being stored (rounded) at every step.
            order = ([d for d, r in enumerate(self.reduced) if not r]
                     + [d for d, r in enumerate(self.reduced) if r])
            self._select(order)

    def split_for_threads(self, min_size: int, blocks: int = SPLIT_BLOCKS) -> None:
        """A domain whose dim 0 is reduced (a bias gradient summed over the
        batch) cannot be split across threads by dim 0's range: split its
        outermost kept dim ``d`` of size ``n`` into ``n / bs`` blocks of
        ``bs`` instead, the block dim first (kept, so it splits), ``bs`` in
        ``d``'s place.  Every access reads and writes what it did at each
        point, each output element sums its terms in the same order, and
        blocks write disjoint outputs; done only for domains of at least
        ``min_size`` points, static sizes and strides, no index node on
        ``d``, and a block count near ``blocks`` (each block at least
        ``SPLIT_MIN_INNER`` wide where ``d`` is the contiguous innermost)."""
        shape, reduced = self.shape, self.reduced
        if not shape or not reduced[0] or all(reduced) or \
                not all(isinstance(n, int) for n in shape) or self.size < min_size:
            return
        d = reduced.index(False)
        if any(n.kind == "index" and n.dim == d for n in self.nodes) or \
                not all(isinstance(x, int) for a in self.accesses() for x in a.strides):
            return
        n = shape[d]
        least = SPLIT_MIN_INNER if d == len(shape) - 1 else 1
        cands = [nb for nb in range(2, min(n, 64 * blocks) + 1)
                 if n % nb == 0 and n // nb >= least]
        if not cands:
            return
        nb = min(cands, key=lambda c: (abs(c - blocks), -c))
        bs = n // nb
        self.shape = [nb] + shape[:d] + [bs] + shape[d + 1:]
        self.reduced = [False] + reduced
        for a in self.accesses():
            a.strides[:] = [a.strides[d] * bs] + a.strides
        for node in self.nodes:
            if node.kind == "index":
                node.dim += 1

    def _select(self, dims: list[int]) -> None:
        """Keep ``dims`` (a subset, or a permutation), in that order."""
        if dims == list(range(len(self.shape))):
            return
        where = {d: i for i, d in enumerate(dims)}
        self.shape = [self.shape[d] for d in dims]
        self.reduced = [self.reduced[d] for d in dims]
        for a in self.accesses():
            a.strides[:] = [a.strides[d] for d in dims]
        for n in self.nodes:
            if n.kind == "index":
                n.dim = where[n.dim]

    def body_key(self) -> str:
        """What ``emit_program`` builds from this program, as text: its
        repr, except dim 0's extent where the body never reads it (dim 0
        kept and of static nonzero size: the body runs over the ``[lo, hi)``
        its caller passes, and only a reduced dim 0, a long sum's blocking
        and an empty domain read the extent).  Programs with equal keys
        emit equal kernels: an elementwise update of parameters of
        different lengths is one kernel."""
        if self.shape and not self.reduced[0] and isinstance(self.shape[0], int) \
                and self.shape[0] > 0:
            return repr(LoopProgram([None] + self.shape[1:], self.reduced, self.nodes,
                                    self.stores, self.reductions))
        return repr(self)

    @property
    def parallel_ok(self) -> bool:
        return bool(self.shape) and not self.reduced[0]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


# --- emission ----------------------------------------------------------------------

class _Eval:
    """Evaluates nodes at one domain point (memoized per point)."""

    def __init__(self, fb: FuncBuilder, prog: LoopProgram, ptrs, on_error):
        self.fb, self.prog, self.ptrs, self.on_error = fb, prog, ptrs, on_error

    def offset(self, a: Access, idx):
        fb = self.fb
        off = fb.i64(a.offset) if a.offset else None
        for i, s in zip(idx, a.strides):
            if s == 0 or i is None:
                continue
            term = i if s == 1 else fb.mul(i, fb.i64(s))
            off = term if off is None else fb.add(off, term)
        return off if off is not None else fb.i64(0)

    def position(self, idx):
        """The row-major position (i64) of the domain point ``idx``."""
        fb, shape = self.fb, self.prog.shape
        pos, stride = None, 1
        for d in reversed(range(len(shape))):
            i = idx[d] if d < len(idx) else None
            if i is not None and shape[d] != 1:
                term = i if stride == 1 else fb.mul(i, fb.i64(stride))
                pos = term if pos is None else fb.add(pos, term)
            stride = stride * shape[d]
        return pos if pos is not None else fb.i64(0)

    def value_at(self, message: str, pos):
        """The int64 value, at the domain point of row-major position ``pos``
        (i64), of the operand of the first ``check`` with ``message`` that
        fails there (checks of one message: index ops on one line)."""
        fb, shape, nodes = self.fb, self.prog.shape, self.prog.nodes
        ks = [k for k, n in enumerate(nodes) if n.kind == "prim" and n.name == "check"
              and n.params["message"] == message]
        idx: list = [None] * len(shape)
        rest = pos
        for d in reversed(range(len(shape))):
            if d == 0:
                idx[d] = rest
            elif shape[d] != 1:
                size = fb.i64(shape[d])
                idx[d] = fb.ibin("srem", rest, size)
                rest = fb.ibin("sdiv", rest, size)
        # (checks met again on the way report nothing: this is their failure)
        vals = _Eval(fb, self.prog, self.ptrs, lambda *a: None).run(
            idx, [a for k in ks for a in nodes[k].args])
        out = None
        for j in reversed(range(len(ks))):
            x, ok = vals[2 * j], vals[2 * j + 1]
            d = nodes[nodes[ks[j]].args[0]].dtype
            x = x if d is dt.int64 else scalar.cast(fb, x, d, dt.int64)
            out = x if out is None else fb.select(ok, out, x)
        return out

    def run(self, idx, wanted):
        fb, nodes = self.fb, self.prog.nodes
        vals: dict[int, object] = {}

        def ev(k):
            v = vals.get(k)
            if v is not None:
                return v
            n = nodes[k]
            if n.kind == "load":
                v = scalar.load(fb, self.ptrs[n.access.slot], self.offset(n.access, idx),
                                n.dtype)
            elif n.kind == "const":
                v = scalar.constant(fb, n.value, n.dtype)
            elif n.kind == "index":
                v = idx[n.dim] if n.dim < len(idx) and idx[n.dim] is not None else fb.i64(0)
                v = scalar.cast(fb, v, dt.int64, n.dtype)
            elif n.kind == "linear":
                v = self.offset(n.access, idx)
            elif n.kind == "random":
                v = _uniform(fb, self.ptrs[n.access.slot], ev(n.args[0]), n.dtype)
            elif n.name == "check":
                x, cond = [ev(a) for a in n.args]
                if self.on_error is None:
                    raise scalar.LoweringError(f"a run-time check ({n.params['message']}) in "
                                               "a loop that cannot report errors")
                failed = fb.ibin("xor", cond, fb.const(True, I1))
                if INDEX_VALUE in n.params["message"]:
                    # an index check: the failing index goes into its message;
                    # its value here, and this point's row-major position
                    # (a min over failures finds the first without a
                    # dependence that would keep the loop from vectorizing;
                    # ``value_at`` then reads the value there)
                    value = x if n.dtype is dt.int64 else scalar.cast(fb, x, n.dtype, dt.int64)
                    self.on_error(failed, n.params["message"], value, self.position(idx))
                else:
                    self.on_error(failed, n.params["message"])
                v = x
            else:
                args = [ev(a) for a in n.args]
                v = None
                if n.name == "pow" and nodes[n.args[1]].kind == "const" \
                        and n.dtype.is_floating_point \
                        and not isinstance(nodes[n.args[1]].value, Sym):
                    v = scalar.pow_by_constant(fb, args[0], float(nodes[n.args[1]].value),
                                               n.dtype in (dt.float32, dt.float64))
                if v is None:
                    v = scalar.apply(fb, n.name, n.params, args, n.in_dtypes, n.dtype)
            vals[k] = v
            return v

        return [ev(k) for k in wanted]


_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _splitmix(fb: FuncBuilder, z):
    def xs(z, s):
        return fb.ibin("xor", z, fb.ibin("lshr", z, fb.i64(s)))
    z = fb.ibin("mul", xs(z, 30), fb.i64(_M1))
    z = fb.ibin("mul", xs(z, 27), fb.i64(_M2))
    return xs(z, 31)


def _uniform(fb: FuncBuilder, state_ptr, linear, d: dt.DType):
    """Element ``linear`` of ``random_uniform`` (see tracec/ops/random.py)."""
    seed = fb.load(fb.gep(state_ptr, fb.i64(0), I64), I64, 8)
    off = fb.load(fb.gep(state_ptr, fb.i64(1), I64), I64, 8)
    key = _splitmix(fb, fb.ibin("add", seed, fb.i64(_GOLDEN)))
    ctr = fb.ibin("add", linear, off)
    bits = _splitmix(fb, fb.ibin("add", fb.ibin("mul", ctr, fb.i64(_GOLDEN)), key))
    b = uniform_bits(d)
    u = fb.fbin("fmul", fb.cast("sitofp", fb.ibin("lshr", bits, fb.i64(64 - b)), F64),
                fb.const(1.0 / (1 << b), F64))
    return scalar.cast(fb, u, dt.float64, d)


#: In a ``check``'s message: where the first failing element's value goes
#: (an index check's index, read as int64: "index {index} is out of bounds
#: ..."); kernels store it in the workspace's first 8 bytes.
INDEX_VALUE = "{index}"


def check_messages(prog: LoopProgram) -> list[str]:
    """The messages of ``prog``'s run-time checks, in node order, each once."""
    return list(dict.fromkeys(n.params["message"] for n in prog.nodes
                              if n.kind == "prim" and n.name == "check"))


def emit_program(fb: FuncBuilder, prog: LoopProgram, ptrs, lo, hi, on_error=None) -> None:
    """Emit ``prog``'s loop nest into ``fb`` at the current block; dim 0
    runs over ``[lo, hi)``.  ``on_error(cond, message)`` records a ``check``
    node's failure, with its message (``check_messages``), where the i1
    ``cond`` holds; ``on_error(cond, message, value, position)`` for a
    message that holds ``INDEX_VALUE``: the element's int64 value and its
    row-major position (``value_at`` of the evaluator returned reads the
    value at a position).  Returns that evaluator."""
    ev = _Eval(fb, prog, ptrs, on_error)
    shape, reduced = prog.shape, prog.reduced
    rank = len(shape)
    reds = prog.reductions
    if prog.size == 0:
        if reds:
            _fill_identity(fb, prog, ptrs, None)
        return ev
    suffix = 0
    while suffix < rank and reduced[rank - 1 - suffix]:
        suffix += 1
    split = rank - suffix                      # first dim of the register-accumulated suffix
    needs_init = bool(reds) and any(reduced[:split])
    if needs_init:
        _fill_identity(fb, prog, ptrs, (lo, hi) if rank and not reduced[0] else None)

    store_nodes = [k for k, _ in prog.stores]
    red_nodes = [r.node for r in reds]

    def bounds(d):
        return (lo, hi) if d == 0 else (fb.i64(0), fb.i64(shape[d]))

    def point(idx, accs):
        vals = ev.run(idx, store_nodes + red_nodes)
        for (k, a), v in zip(prog.stores, vals):
            scalar.store(fb, v, ptrs[a.slot], ev.offset(a, idx), a.dtype)
        if accs is None:
            return None
        xs = vals[len(store_nodes):]
        return [scalar.accumulate(fb, r.kind, acc,
                                  _widen(fb, x, prog.nodes[r.node].dtype, r.acc_dtype),
                                  r.acc_dtype)
                for r, acc, x in zip(reds, accs, xs)]

    def suffix_nest(d, idx, accs):
        if d == rank:
            return point(idx, accs)
        b0, b1 = bounds(d)

        def plain():
            return fb.for_range(b0, b1, lambda i, *a: suffix_nest(d + 1, idx + [i], list(a)),
                                carried=accs)
        if d == rank - 1 and blockable and (d or reduced[0]):
            if not isinstance(shape[d], int):
                # A symbolic length: the static code's choice, made at run
                # time (the same sums, in the same order, for every size).
                return _choose(fb, fb.icmp("sgt", fb.i64(shape[d]), fb.i64(2 * BLOCK)),
                               lambda: blocked(d, idx, accs), plain, accs)
            if shape[d] > 2 * BLOCK:
                return blocked(d, idx, accs)
        return plain()

    blockable = bool(reds) and all(r.kind == "sum" and r.acc_dtype.is_floating_point
                                   for r in reds)

    def blocked(d, idx, accs):
        """A long float sum in three levels (blocks of BLOCK elements summed
        in vector lanes, SUPER blocks of those, then the total), so rounding
        error grows like NumPy's pairwise sum rather than with the length."""
        n = shape[d]

        def span(lo_, step, inner):
            def body(i, *a):
                hi_ = fb.select(fb.icmp("slt", fb.add(i, fb.i64(step)), fb.i64(n)),
                                fb.add(i, fb.i64(step)), fb.i64(n))
                part = inner(i, hi_)
                return [scalar.accumulate(fb, "sum", x, p, r.acc_dtype)
                        for x, p, r in zip(a, part, reds)]
            return body

        def leaf(lo_, hi_):
            zero = [scalar.identity(fb, "sum", r.acc_dtype) for r in reds]
            return fb.for_range(lo_, hi_, lambda i, *a: point(idx + [i], list(a)), carried=zero)

        def mid(lo_, hi_):
            zero = [scalar.identity(fb, "sum", r.acc_dtype) for r in reds]
            return fb.for_range(lo_, hi_, span(lo_, BLOCK, leaf), carried=zero, step=BLOCK)
        return fb.for_range(fb.i64(0), fb.i64(n), span(0, BLOCK * SUPER, mid), carried=accs,
                            step=BLOCK * SUPER)

    def nest(d, idx):
        if reds and d == split:
            if needs_init:
                accs = [scalar.load(fb, ptrs[r.out.slot], ev.offset(r.out, idx), r.acc_dtype)
                        for r in reds]
            else:
                accs = [scalar.identity(fb, r.kind, r.acc_dtype) for r in reds]
            if suffix:
                accs = suffix_nest(d, idx, accs)
            else:
                accs = point(idx, accs)
            for r, acc in zip(reds, accs):
                out = scalar.round_to(fb, acc, r.out.dtype) \
                    if r.out.dtype in (dt.float16, dt.bfloat16) else acc
                scalar.store(fb, out, ptrs[r.out.slot], ev.offset(r.out, idx), r.out.dtype)
            return
        if d == rank:
            point(idx, None)
            return
        b0, b1 = bounds(d)
        fb.for_range(b0, b1, lambda i: nest(d + 1, idx + [i]))

    nest(0, [])
    return ev


def _choose(fb: FuncBuilder, cond, then, else_, like) -> list:
    """``then()`` if ``cond`` else ``else_()``: each returns values of the
    types of ``like``; the values of the branch taken (through stack slots,
    which LLVM promotes to registers)."""
    slots = [fb.alloca(v.type, 1, 8) for v in like]

    def run(branch):
        for p, v in zip(slots, branch()):
            fb.store(v, p, bits_of(v.type) // 8)
    fb.if_else(cond, lambda: run(then), lambda: run(else_))
    return [fb.load(p, v.type, bits_of(v.type) // 8) for p, v in zip(slots, like)]


#: Block sizes of long float sums (see ``blocked`` in ``emit_program``).
BLOCK = 1024
SUPER = 64


def _widen(fb, x, src: dt.DType, acc: dt.DType):
    return scalar.cast(fb, x, src, acc) if src is not acc else x


def _fill_identity(fb: FuncBuilder, prog: LoopProgram, ptrs, chunk) -> None:
    """Set the reduction outputs (or the chunk of them owned by dim 0's
    range) to the reduction identity."""
    for r in prog.reductions:
        kept = [n for n, red in zip(prog.shape, prog.reduced) if not red]
        total = math.prod(kept)
        ident = scalar.identity(fb, r.kind, r.acc_dtype)
        if chunk is None:
            b0, b1 = fb.i64(0), fb.i64(total)
        else:
            s0 = r.out.strides[0]
            b0, b1 = fb.mul(chunk[0], fb.i64(s0)), fb.mul(chunk[1], fb.i64(s0))
        ptr = ptrs[r.out.slot]
        base = r.out.offset

        def body(i, ptr=ptr, base=base, ident=ident, dtype=r.out.dtype):
            idx = fb.add(i, fb.i64(base)) if base else i
            scalar.store(fb, ident, ptr, idx, dtype)
        fb.for_range(b0, b1, body)
