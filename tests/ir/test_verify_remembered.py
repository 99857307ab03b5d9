"""A primitive op's verification is run once per signature (class, types,
properties, attributes, type rule: ``ir.ops._remembering``): an op that
differs from a verified one in any of them is checked again, and a failure
is never remembered (each failing op is reported with its own location)."""
from __future__ import annotations

import pytest
from xdsl.utils.exceptions import VerifyException

import tracec.ir as ir
import tracec.ops as tops
from tracec import dtypes as dt

F32 = dt.float32


def _args(*avals):
    return ir.new_function("f", list(avals)).body.block.args


@pytest.fixture
def counting_rule():
    """The primitives' full type rule, counting its calls (installed for
    the test, a rule object of its own: nothing verified before counts)."""
    calls = []

    def rule(name, avals, params):
        calls.append(name)
        aval = tops.PRIMITIVES[name].abstract_eval(*[tops.Aval(*a) for a in avals], **params)
        return aval.shape, aval.dtype

    previous = ir.get_type_rule()
    ir.set_type_rule(rule)
    try:
        yield calls
    finally:
        ir.set_type_rule(previous)


def test_an_op_like_a_verified_one_is_not_checked_again(counting_rule):
    a, b = _args(((2, 3), F32), ((2, 3), F32))
    ir.make_op("add", [a, b], {}, ((2, 3), F32), ("a.py", 1, 1)).verify()
    assert counting_rule == ["add"]
    ir.make_op("add", [a, b], {}, ((2, 3), F32), ("b.py", 9, 9)).verify()   # another place
    assert counting_rule == ["add"]
    ir.make_op("add", [b, a], {}, ((2, 3), F32)).verify()   # other values, the same types
    assert counting_rule == ["add"]


def test_a_failure_is_reported_every_time_with_its_location(counting_rule):
    (a,) = _args(((2, 3), F32))
    for where in (("first.py", 3, 4), ("second.py", 5, 6)):
        op = ir.make_op("reduce_sum", [a], {"axes": (1,)}, ((3,), F32), where)
        with pytest.raises(VerifyException, match=rf"at {where[0]}:{where[1]}:{where[2]}: "
                                                  r"result type should be f32\[2\]"):
            op.verify()


@pytest.mark.parametrize("changed", ["result", "param", "operand", "class"])
def test_any_difference_is_checked_again(counting_rule, changed):
    a, c = _args(((2, 3), F32), ((3, 2), F32))
    ir.make_op("reduce_sum", [a], {"axes": (1,)}, ((2,), F32)).verify()
    bad = {
        "result": lambda: ir.make_op("reduce_sum", [a], {"axes": (1,)}, ((3,), F32)),
        "param": lambda: ir.make_op("reduce_sum", [a], {"axes": (0,)}, ((2,), F32)),
        "operand": lambda: ir.make_op("reduce_sum", [c], {"axes": (1,)}, ((2,), F32)),
        "class": lambda: ir.make_op("reduce_max", [a], {"axes": (0,)}, ((2,), F32)),
    }[changed]()
    with pytest.raises(VerifyException, match="result type should be"):
        bad.verify()


def test_another_type_rule_checks_again(counting_rule):
    (a,) = _args(((2, 3), F32))
    wrong = ir.make_op("reduce_sum", [a], {"axes": (1,)}, ((3,), F32))
    ir.set_type_rule(None)
    wrong.verify()          # the cheap checks do not compute reduction shapes
    ir.set_type_rule(lambda name, avals, params: ((2,), F32))
    with pytest.raises(VerifyException, match=r"result type should be f32\[2\]"):
        wrong.verify()
