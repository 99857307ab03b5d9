"""``tracec-canonicalize``: local algebraic simplification and constant folding.

The rules are one table, ``RULES`` (one rule per line).  A rule looks at one
primitive op and returns ``None`` (no match), an existing value that replaces
the op's result (always of the op's result type), or new ops whose last
result replaces it.  Every rewrite is exact for the primitives' NumPy
semantics (the interpreter's), with one documented exception: ``x + 0 -> x``
keeps a ``-0.0`` that IEEE addition would turn into ``+0.0`` (a
no-signed-zeros identity, as in fast-math; the two values compare equal).

Constant folding runs the primitive's own NumPy ``impl`` on the constant
operands (with the parameters stored on the op), so a folded value is
exactly what the interpreter would have computed.  It only folds results of
at most ``FOLD_LIMIT`` elements, so the pass stays cheap and the IR small
however large the tensors are; larger values that are one repeated scalar
are kept as ``broadcast_to`` of a 0-d constant ("splats"), which fusion
turns into a scalar inside a kernel.

Guarantees: the module still verifies; no rule grows the number of non-splat
elements in constants beyond ``FOLD_LIMIT`` per folded op; rules never touch
ops inside ``tracec.kernel`` bodies (the fusion pass owns their invariant).

Importing this module installs the primitives' full result-type rule into
the IR verifier (``install_type_rule``): from then on ``verify()`` checks
every primitive op's result type against ``PRIMITIVES[name].abstract_eval``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from tracec import ir
from tracec.ops import PRIMITIVES
from tracec.ops.core import Aval, broadcast_shapes
from tracec.symbolic import Sym

__all__ = ["CanonicalizePass", "RULES", "FOLD_LIMIT", "splat_value", "install_type_rule"]

#: Largest result (in elements) that constant folding materializes.
FOLD_LIMIT = 1024
#: Largest constant scanned for "all elements equal" (bounds the pass's time).
_SPLAT_SCAN_LIMIT = 1 << 16
#: Largest constant operand folding reads (bounds the pass's time).
_FOLD_INPUT_LIMIT = 1 << 16


# --- the verifier's full type rule -----------------------------------------------

def _type_rule(name: str, operands: list, params: dict) -> tuple:
    aval = PRIMITIVES[name].abstract_eval(*[Aval(s, d) for s, d in operands], **params)
    return aval.shape, aval.dtype


def install_type_rule() -> None:
    """Make ``verify()`` check every primitive op's result type with the
    primitive's own shape and dtype rules (``abstract_eval``)."""
    ir.set_type_rule(_type_rule)


install_type_rule()


# --- helpers -----------------------------------------------------------------------

def _numel(v: SSAValue) -> int:
    return math.prod(ir.shape_of(v.type))


def _prim(v: SSAValue) -> str | None:
    """The primitive that defines ``v`` (None for arguments and non-primitives)."""
    owner = v.owner
    return ir.primitive_name(owner) if isinstance(owner, Operation) else None


def _const(v: SSAValue) -> np.ndarray | None:
    """The data of ``v`` if a ``tracec.constant`` defines it."""
    if isinstance(v.owner, ir.ConstantOp):
        return ir.constant_array(v)
    return None


def splat_value(v: SSAValue):
    """The scalar every element of ``v`` equals, when that is known at compile
    time (a constant with equal elements, or a broadcast of one); else None.
    Returned as a 0-d NumPy array of ``v``'s storage dtype."""
    owner = v.owner
    if isinstance(owner, ir.ConstantOp):
        n = _numel(v)
        if n == 0 or n > _SPLAT_SCAN_LIMIT:
            return None
        a = ir.constant_array(v).reshape(-1)
        first = a[0]
        if n > 1 and not (a == first).all():
            return None
        return np.asarray(first)
    if ir.primitive_name(owner) == "broadcast_to" and _numel(v) > 0:
        return splat_value(owner.operands[0])
    return None


def _is_splat_of(v: SSAValue, x) -> bool:
    s = splat_value(v)
    return s is not None and bool(s == x)


def _new(name: str, operands, params, like: Operation, result_type=None) -> Operation:
    """A new op of primitive ``name`` at ``like``'s location."""
    return ir.make_op(name, operands, params, result_type or like.results[0].type,
                      loc=like.location)


def _as_result(op: Operation, x: SSAValue):
    """``x`` standing for ``op``'s result: ``x`` itself when the types agree, a
    ``broadcast_to`` when ``x`` only needs widening, else None (no rewrite)."""
    t = op.results[0].type
    if x.type == t:
        return x
    shape = ir.shape_of(t)
    if ir.dtype_of(x.type) is ir.dtype_of(t) and _broadcasts_to(ir.shape_of(x.type), shape):
        return [_new("broadcast_to", [x], {"shape": shape}, op)]
    return None


def _broadcasts_to(src: tuple, dst: tuple) -> bool:
    try:
        return broadcast_shapes(src, dst) == tuple(dst)
    except Exception:  # noqa: BLE001 - ShapeError: not broadcastable
        return False


def _constant(op: Operation, data) -> ir.ConstantOp:
    d = ir.dtype_of(op.results[0].type)
    return ir.constant(np.asarray(data).astype(d.np, copy=False), d, loc=op.location)


# --- rules ------------------------------------------------------------------------
# Each takes the matched op and returns None, a value, or a list of new ops.

def _drop_identity(unit, positions: tuple[int, ...], floats_only: bool = False) -> Callable:
    """``x <op> unit -> x`` (and ``unit <op> x`` for the positions given)."""
    def rule(op):
        if floats_only and not ir.dtype_of(op.results[0].type).is_floating_point:
            return None
        for i in positions:
            if _is_splat_of(op.operands[i], unit):
                return _as_result(op, op.operands[1 - i])
        return None
    return rule


def _neg_neg(op):
    inner = op.operands[0]
    return inner.owner.operands[0] if _prim(inner) == "neg" else None


def _same_type(op):
    x = op.operands[0]
    return x if x.type == op.results[0].type else None


def _transpose_identity(op):
    perm = ir.op_params(op)["perm"]
    return op.operands[0] if perm == tuple(range(len(perm))) else None


def _transpose_transpose(op):
    inner = op.operands[0]
    if _prim(inner) != "transpose":
        return None
    p = ir.op_params(inner.owner)["perm"]
    q = ir.op_params(op)["perm"]
    composed = tuple(p[i] for i in q)
    x = inner.owner.operands[0]
    if composed == tuple(range(len(composed))):
        return x
    return [_new("transpose", [x], {"perm": composed}, op)]


def _swaps_last_two(perm) -> bool:
    n = len(perm)
    return n >= 2 and tuple(perm) == tuple(range(n - 2)) + (n - 1, n - 2)


def _transpose_matmul(op):
    """transpose(a @ b) -> transpose(b) @ transpose(a) when the product has no
    other user: a weight gradient then comes out in the weight's layout
    (transposes of operands cancel, or fold into the GEMM's packing)."""
    inner = op.operands[0]
    if _prim(inner) != "matmul" or not _swaps_last_two(ir.op_params(op)["perm"]):
        return None
    if len(list(inner.uses)) != 1:
        return None
    a, b = inner.owner.operands
    new = []
    for x in (b, a):
        perm = tuple(range(len(ir.shape_of(x.type)) - 2)) + (
            len(ir.shape_of(x.type)) - 1, len(ir.shape_of(x.type)) - 2)
        shape = tuple(ir.shape_of(x.type)[i] for i in perm)
        new.append(_new("transpose", [x], {"perm": perm}, op,
                        ir.tensor_type(shape, ir.dtype_of(x.type))))
    new.append(_new("matmul", [new[0].results[0], new[1].results[0]], {}, op))
    return new


def _reshape_reshape(op):
    inner = op.operands[0]
    if _prim(inner) != "reshape":
        return None
    return [_new("reshape", [inner.owner.operands[0]], ir.op_params(op), op)]


def _common_suffix(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    return n


def _reshape_elementwise(op):
    """``reshape(f(x, b))`` -> ``f(reshape(x), b)`` for an elementwise ``f``
    read only by the reshape, with an operand ``b`` broadcast over the dims
    the reshape regroups (a bias added before ``view(-1, n)``): the op then
    runs on the reshaped shape, where it fuses with that shape's readers."""
    x = op.operands[0]
    f = x.owner
    if not isinstance(f, Operation) or _prim(x) is None or \
            PRIMITIVES[_prim(x)].kind != "elementwise" or len(list(x.uses)) != 1:
        return None
    src, dst = ir.shape_of(x.type), ir.shape_of(op.results[0].type)
    if not all(isinstance(n, int) for n in (*src, *dst)):
        return None
    keep = _common_suffix(src, dst)
    shapes = []              # each operand's new shape (None: as it is)
    for u in f.operands:
        us = tuple(ir.shape_of(u.type))
        lead = len(us) - keep
        if us == tuple(src):
            shapes.append(tuple(dst))
        elif any(n != 1 for n in us[:max(lead, 0)]):
            return None          # varies along a regrouped dim
        else:
            shapes.append(us[lead:] if lead > 0 else None)
    if all(sh == tuple(dst) for sh in shapes):
        return None              # no broadcast operand: leave the reshape
    # (ops are made only once the rule matches: a made op holds uses)
    new, args = [], []
    for u, sh in zip(f.operands, shapes):
        if sh is None:
            args.append(u)
            continue
        new.append(_new("reshape", [u], {"shape": sh}, op,
                        ir.tensor_type(sh, ir.dtype_of(u.type))))
        args.append(new[-1].results[0])
    return new + [_new(_prim(x), args, ir.op_params(f), op)]


def _reduce_reshape(op):
    """``reduce(reshape(y), leading axes)`` -> ``reduce(y, leading axes)``
    when the reshape only regroups the reduced leading dims (the bias
    gradient of a ``[T, B, n]`` product read as ``[T * B, n]``): the sum
    then runs over ``y``'s own domain, fused with ``y``'s kernel."""
    y = op.operands[0]
    if _prim(y) != "reshape":
        return None
    src = ir.shape_of(y.owner.operands[0].type)
    mid = ir.shape_of(y.type)
    axes = tuple(ir.op_params(op)["axes"])
    if not axes or axes != tuple(range(len(axes))) or \
            not all(isinstance(n, int) for n in (*src, *mid)):
        return None
    rest = tuple(mid[len(axes):])
    k = len(src) - len(rest)
    if k < 1 or tuple(src[k:]) != rest or math.prod(src[:k]) != math.prod(mid[:len(axes)]):
        return None
    p = dict(ir.op_params(op), axes=tuple(range(k)))
    return [_new(ir.primitive_name(op), [y.owner.operands[0]], p, op)]


def _broadcast_broadcast(op):
    inner = op.operands[0]
    if _prim(inner) != "broadcast_to":
        return None
    return [_new("broadcast_to", [inner.owner.operands[0]], ir.op_params(op), op)]


def _where_known_condition(op):
    s = splat_value(op.operands[0])
    if s is None:
        return None
    return _as_result(op, op.operands[1] if bool(s) else op.operands[2])


def _reduce_nothing(op):
    x = op.operands[0]
    if (not ir.op_params(op)["axes"] or not ir.shape_of(x.type)) and x.type == op.results[0].type:
        return x
    return None


def _full(op):
    p = ir.op_params(op)
    if isinstance(p["value"], Sym):
        return None      # a size known at run time (a mean's count): no constant
    c = ir.constant(np.asarray(p["value"]).astype(p["dtype"].np), p["dtype"], loc=op.location)
    if not p["shape"]:
        return [c]
    return [c, _new("broadcast_to", [c], {"shape": p["shape"]}, op)]


def _splat_constant(op):
    """A constant of n > 1 equal elements -> broadcast_to of a 0-d constant."""
    if _numel(op.results[0]) <= 1:
        return None
    s = splat_value(op.results[0])
    if s is None:
        return None
    d = ir.dtype_of(op.results[0].type)
    c = ir.constant(s, d, loc=op.location)
    return [c, _new("broadcast_to", [c], {"shape": ir.shape_of(op.results[0].type)}, op)]


def _absorb_broadcast(op):
    """``f(broadcast_to(y), z) -> f(y, z)`` when implicit broadcasting of the
    elementwise op already gives the same result shape."""
    # (tried on every primitive op at every walk: the cheap test first)
    if not any(_prim(v) == "broadcast_to" for v in op.operands) or len(op.operands) < 2 or \
            PRIMITIVES[ir.primitive_name(op)].kind != "elementwise":
        return None
    shapes = [ir.shape_of(v.type) for v in op.operands]
    out = ir.shape_of(op.results[0].type)
    operands = list(op.operands)
    changed = False
    for i, v in enumerate(operands):
        if _prim(v) != "broadcast_to":
            continue
        inner = v.owner.operands[0]
        trial = shapes[:i] + [ir.shape_of(inner.type)] + shapes[i + 1:]
        if broadcast_shapes(*trial) == out:
            operands[i], shapes, changed = inner, trial, True
    if not changed:
        return None
    return [_new(ir.primitive_name(op), operands, ir.op_params(op), op)]


def _fold_splats(op):
    """An elementwise op of splats is a splat: fold it on 0-d arrays."""
    # (a splat is a constant or a broadcast: the cheap test first)
    if not all(isinstance(v.owner, ir.ConstantOp) or _prim(v) == "broadcast_to"
               for v in op.operands):
        return None
    prim = PRIMITIVES[ir.primitive_name(op)]
    if prim.kind != "elementwise" or not op.results[0].type.get_shape():
        return None  # 0-d results: ``_fold`` makes them one constant
    scalars = [splat_value(v) for v in op.operands]
    if any(s is None for s in scalars):
        return None
    value = _run_impl(prim, scalars, ir.op_params(op))
    if value is None:
        return None
    c = _constant(op, value)
    return [c, _new("broadcast_to", [c], {"shape": ir.shape_of(op.results[0].type)}, op)]


def _move_splat(op):
    """Moving the elements of a splat around gives the same splat."""
    x = op.operands[0]
    if _prim(x) != "broadcast_to" or _numel(op.results[0]) == 0:
        return None
    s = splat_value(x)
    if s is None:
        return None
    c = _constant(op, s)
    return [c, _new("broadcast_to", [c], {"shape": ir.shape_of(op.results[0].type)}, op)]


def _run_impl(prim, arrays, params):
    try:
        with np.errstate(all="ignore"):
            return np.asarray(prim.impl(*arrays, **params))
    except Exception:  # noqa: BLE001 - leave the op for run time to report
        return None


def _fold(op):
    """All operands constant and a small result: run the primitive's impl."""
    if not all(isinstance(v.owner, ir.ConstantOp) for v in op.operands):
        return None     # (the cheap test first: this rule is tried on every op)
    name = ir.primitive_name(op)
    prim = PRIMITIVES[name]
    # Random draws and collectives (which every rank must run) never fold;
    # nor does a symbolic size (a constant has static sizes).
    n = _numel(op.results[0])
    if prim.kind in ("random", "collective") or name == "full" or not isinstance(n, int) \
            or n > FOLD_LIMIT:
        return None
    if name == "broadcast_to" and _numel(op.results[0]) > _numel(op.operands[0]):
        return None  # a broadcast is free in a kernel; materializing it is not
    if any(not isinstance(v.owner, ir.ConstantOp) or _numel(v) > _FOLD_INPUT_LIMIT
           for v in op.operands):
        return None
    value = _run_impl(prim, [_const(v) for v in op.operands], ir.op_params(op))
    if value is None or value.shape != ir.shape_of(op.results[0].type):
        return None
    return [_constant(op, value)]


_REDUCE = ("reduce_sum", "reduce_max", "reduce_min")

#: (primitive, "constant", or "*" for every primitive; rule), tried in order.
#: "1" and "0" are splats: constants of equal elements, or broadcasts of one,
#: of any shape that broadcasts with x; where x is narrower than the result,
#: the identity rules give ``broadcast_to(x)`` instead of x.
RULES: tuple[tuple[str, Callable], ...] = (
    ("stop_gradient", lambda op: op.operands[0]),  # autodiff is done: detach(x) -> x
    ("constant", _splat_constant),                 # constant of n > 1 equal elements -> splat
    ("mul", _drop_identity(1, (0, 1))),            # x * 1 -> x, 1 * x -> x
    ("add", _drop_identity(0, (0, 1))),            # x + 0 -> x, 0 + x -> x (keeps -0.0)
    ("sub", _drop_identity(0, (1,))),              # x - 0 -> x
    ("div", _drop_identity(1, (1,), True)),        # x / 1 -> x (floats: ints divide via f64)
    ("neg", _neg_neg),                             # neg(neg(x)) -> x
    ("transpose", _transpose_identity),            # transpose(x, identity) -> x
    ("transpose", _transpose_transpose),           # transpose(transpose(x, p), q) -> transpose(x, p[q])
    ("transpose", _transpose_matmul),              # (a @ b)^T -> b^T @ a^T (single use)
    ("reshape", _same_type),                       # reshape(x) to x's shape -> x
    ("reshape", _reshape_reshape),                 # reshape(reshape(x)) -> reshape(x)
    ("reshape", _reshape_elementwise),             # reshape(x + bias) -> reshape(x) + bias
    ("broadcast_to", _same_type),                  # broadcast_to(x) to x's shape -> x
    ("broadcast_to", _broadcast_broadcast),        # broadcast_to(broadcast_to(x)) -> broadcast_to(x)
    ("cast", _same_type),                          # cast(x) to x's dtype -> x (a clone; SSA is immutable)
    ("where", _where_known_condition),             # where(true, a, b) -> a; where(false, a, b) -> b
    *((r, _reduce_nothing) for r in _REDUCE),      # reduce over no axes / of a 0-d value -> x
    *((r, _reduce_reshape) for r in _REDUCE),      # reduce(reshape(y), leading) -> reduce(y, leading)
    ("full", _full),                               # full -> 0-d constant (broadcast if shaped)
    ("*", _absorb_broadcast),                      # f(broadcast_to(y), z) -> f(y, z) if shapes allow
    ("*", _fold_splats),                           # f(splat a, splat b) -> splat f(a, b)
    *((m, _move_splat) for m in ("reshape", "transpose", "slice")),  # move(splat c) -> splat c
    ("*", _fold),                                  # f(constants) -> constant (<= FOLD_LIMIT elements)
)


def _rules_by_primitive() -> dict[str, list[Callable]]:
    table: dict[str, list[Callable]] = {name: [] for name in PRIMITIVES}
    table["constant"] = []
    for name, rule in RULES:
        for target in (PRIMITIVES if name == "*" else [name]):
            table[target].append(rule)
    return table


class ApplyRules(RewritePattern):
    """Applies ``RULES`` to the primitive and constant ops outside kernels."""

    def __init__(self):
        self.table = _rules_by_primitive()

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if isinstance(op.parent_op(), ir.KernelOp):
            return
        name = "constant" if isinstance(op, ir.ConstantOp) else ir.primitive_name(op)
        if name is None:
            return
        for rule in self.table[name]:
            out = rule(op)
            if out is None:
                continue
            if isinstance(out, SSAValue):
                assert out.type == op.results[0].type, (op, out)
                rewriter.replace(op, [], [out])
            else:
                assert out[-1].results[0].type == op.results[0].type, (op, out[-1])
                rewriter.replace(op, out)
            return


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Simplify and fold tracec primitive ops with ``RULES`` until nothing
    matches (see the module docstring).  Leaves dead ops for DCE."""

    name = "tracec-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(GreedyRewritePatternApplier([ApplyRules()]),
                                      apply_recursively=True)
        walker.rewrite_module(op)
