"""The verifier: cheap per-op checks, with messages that name the op, its
operand types and its location; and the optional full type rule."""
from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, f32
from xdsl.utils.exceptions import VerifyException

import tracec.ir as ir
import tracec.ops as tops
from tracec import dtypes as dt
from ir_samples import all_primitives_module, hand_module

F32 = dt.float32


def _fn(*avals):
    fn = ir.new_function("f", list(avals))
    return fn, fn.body.block.args


def _check(op, match):
    with pytest.raises(VerifyException, match=match):
        op.verify()


def test_binary_operands_must_share_element_type():
    _, (a, b) = _fn(((4,), F32), ((4,), dt.float64))
    op = ir.make_op("add", [a, b], {}, ((4,), F32), ("bad.py", 7, 2))
    _check(op, r"tracec.add \(f32\[4\], f64\[4\]\) -> f32\[4\] at bad.py:7:2: "
               r"operand element types differ")


@pytest.mark.parametrize("name,avals,params,result,match", [
    ("add", [((4,), F32), ((3,), F32)], {}, ((4,), F32), "broadcast"),
    ("eq", [((4,), F32), ((4,), F32)], {}, ((4,), F32), "result dtype should be bool"),
    ("exp", [((4,), dt.int64)], {}, ((4,), dt.int64), "floating point"),
    ("where", [((4,), F32), ((4,), F32), ((4,), F32)], {}, ((4,), F32), "condition must be bool"),
    ("check", [((4,), F32), ((4,), F32)], {"message": "m"}, ((4,), F32), "condition must be bool"),
    ("check", [((4,), F32), ((3, 1), dt.bool_)], {"message": "m"}, ((4,), F32), "broadcast"),
    ("cast", [((4,), F32)], {"dtype": dt.float16}, ((4,), F32), "result dtype should be float16"),
    ("reduce_sum", [((2, 3), F32)], {"axes": (2,)}, ((2,), F32), "axes"),
    ("reduce_sum", [((2, 3), dt.bool_)], {"axes": (1,)}, ((2,), dt.bool_), "int64"),
    ("argmax", [((2, 3), F32)], {"axis": 1}, ((2,), F32), "int64"),
    ("transpose", [((2, 3), F32)], {"perm": (0, 0)}, ((2, 2), F32), "permutation"),
    ("reshape", [((2, 3), F32)], {"shape": (6,)}, ((3, 2), F32), r"result shape should be \(6,\)"),
    ("slice", [((4, 8), F32)], {"starts": (0,), "stops": (4,), "steps": (1,)}, ((4, 8), F32),
     "one entry per dimension"),
    ("concatenate", [((2,), F32), ((2,), dt.float64)], {"axis": 0}, ((4,), F32), "element types"),
    ("take", [((5,), F32), ((2,), F32)], {"axis": 0}, ((2,), F32), "integer tensor"),
    ("matmul", [((2, 3), F32), ((4, 5), F32)], {}, ((2, 5), F32), "inner dimensions"),
    ("full", [], {"value": 1.0, "shape": (2,), "dtype": F32}, ((3,), F32), "result type should be"),
    ("random_uniform", [((3,), dt.int64)], {"shape": (2,), "dtype": F32}, ((2,), F32),
     r"int64\[2\]"),
])
def test_cheap_checks(name, avals, params, result, match):
    _, args = _fn(*avals)
    _check(ir.make_op(name, args, params, result, ("v.py", 1, 0)), match)


def test_type_rule_hook_checks_full_shapes():
    def rule(name, avals, params):
        aval = tops.PRIMITIVES[name].abstract_eval(*[tops.Aval(*a) for a in avals], **params)
        return aval.shape, aval.dtype

    _, (a,) = _fn(((2, 3), F32))
    wrong = ir.make_op("reduce_sum", [a], {"axes": (1,)}, ((3,), F32))  # should be (2,)
    previous = ir.get_type_rule()
    ir.set_type_rule(None)
    try:
        wrong.verify()  # the cheap checks do not compute reduction shapes
    finally:
        ir.set_type_rule(previous)
    ir.set_type_rule(rule)
    try:
        _check(wrong, r"result type should be f32\[2\]")
        all_primitives_module().verify()
        hand_module().verify()
        _, (x,) = _fn(((4,), F32))
        _check(ir.make_op("reshape", [x], {"shape": (3,)}, ((3,), F32)), "invalid for input")
    finally:
        ir.set_type_rule(previous)


def test_kernel_checks():
    module = hand_module()
    kern = next(op for op in module.walk() if isinstance(op, ir.KernelOp))
    kern.verify()
    # A non-tracec op in the body.
    bad = arith.ConstantOp(FloatAttr(1.0, f32))
    kern.block.insert_op_before(bad, kern.block.first_op)
    _check(kern, "arith.constant is not allowed in a kernel body")
    bad.detach()
    kern.verify()
    # The yield must produce the result types.
    kern.block.last_op.operands = [kern.block.args[0]]
    _check(kern, "yielded types must equal the result types")


def test_kernel_block_arguments_match_inputs():
    from xdsl.ir import Block

    fn, (a,) = _fn(((4,), F32))
    kern = ir.KernelOp([a], [ir.tensor_type((4,), F32)],
                       body=Block(arg_types=[ir.tensor_type((4,), dt.float64)]))
    kern.block.add_op(ir.YieldOp([kern.block.args[0]]))
    _check(kern, r"block arguments must match the inputs one-to-one: \(f64\[4\]\) vs")
    open_ended = ir.KernelOp([a], [ir.tensor_type((4,), F32)])
    open_ended.block.add_op(ir.make_op("exp", [open_ended.block.args[0]], {}, ((4,), F32)))
    _check(open_ended, "not a terminator|must end with tracec.yield")


def test_kernel_is_isolated_from_above():
    fn, (a,) = _fn(((4,), F32))
    kern = ir.KernelOp([], [ir.tensor_type((4,), F32)])
    e = ir.make_op("exp", [a], {}, ((4,), F32))  # uses a value from outside
    kern.block.add_op(e)
    kern.block.add_op(ir.YieldOp([e.results[0]]))
    fn.body.block.add_op(kern)
    with pytest.raises(VerifyException):
        fn.verify()


def test_backward_checks():
    fn, (loss, w, s, v) = _fn(((), F32), ((3,), F32), ((4,), F32), ((4,), F32))
    ok = ir.BackwardOp(loss, [w], loc=("b.py", 3, 0))
    ok.verify()
    assert [g.type for g in ok.grads] == [w.type]
    _check(ir.BackwardOp(v, [w], loc=("b.py", 4, 0)), r"b.py:4:0: grad can be implicitly created")
    seeded = ir.BackwardOp(v, [w], seed=s)
    seeded.verify()
    text = ir.print_op(seeded)
    assert "wrt" in text and "seed" in text
    _check(ir.BackwardOp(v, [w], seed=loss), "seed type")


def test_backward_with_seed_round_trips():
    fn, (v, w, s) = _fn(((4,), F32), ((3,), F32), ((4,), F32))
    bw = ir.BackwardOp(v, [w, v], seed=s, loc=("s.py", 9, 1))
    fn.body.block.add_op(bw)
    ir.set_returns(fn, list(bw.grads))
    module = ir.new_module([fn])
    text = ir.print_module(module)
    assert ("tracec.backward %0 wrt %1, %0 seed %2 : tensor<4xf32> wrt tensor<3xf32>, "
            "tensor<4xf32> seed tensor<4xf32> -> tensor<3xf32>, tensor<4xf32>") in text
    parsed = ir.parse_module(text)
    assert parsed.is_structurally_equivalent(module)
