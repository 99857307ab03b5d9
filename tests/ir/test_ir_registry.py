"""Every primitive has an op class, and make_op/op_params round-trip its
parameters; the IR signature agrees with the primitive's own rules."""
from __future__ import annotations

import numpy as np
import pytest

import tracec.ir as ir
import tracec.ops as tops
from tracec import dtypes as dt
from ir_samples import PRIMITIVE_SAMPLES, all_primitives_module


def test_every_primitive_has_an_op_class():
    assert len(tops.PRIMITIVES) == 66
    assert set(ir.OP_BY_PRIMITIVE) == set(tops.PRIMITIVES)
    assert set(ir.SPECS) == set(tops.PRIMITIVES)
    assert set(PRIMITIVE_SAMPLES) == set(tops.PRIMITIVES)
    for name, cls in ir.OP_BY_PRIMITIVE.items():
        assert cls.name == f"tracec.{name}"
        assert cls.PRIMITIVE == name
        assert cls in ir.TRACEC.operations


@pytest.mark.parametrize("name", sorted(PRIMITIVE_SAMPLES))
def test_spec_matches_primitive(name):
    spec, prim = ir.SPECS[name], tops.PRIMITIVES[name]
    assert spec.variadic == prim.variadic
    avals, params = PRIMITIVE_SAMPLES[name]
    # The primitive accepts exactly these operands and params.
    prim.abstract_eval(*[tops.Aval(*a) for a in avals], **params)
    if not spec.variadic:
        assert len(avals) == len(spec.operands)


def _random(aval, rng):
    shape, d = aval
    if d.name == "bool":
        return rng.random(shape) < 0.5
    if d.category == 1:
        return rng.integers(0, 2, size=shape).astype(d.np)
    return (rng.random(shape) + 0.5).astype(d.np)


@pytest.fixture(scope="module")
def modules():
    module = all_primitives_module()
    return module, ir.parse_module(ir.print_module(module))


@pytest.mark.parametrize("name", sorted(PRIMITIVE_SAMPLES))
def test_make_op_op_params_round_trip(name, modules):
    avals, params = PRIMITIVE_SAMPLES[name]
    module, parsed = modules
    op = next(o for o in module.walk() if ir.primitive_name(o) == name)
    got = ir.op_params(op)
    assert got == params
    for k, v in params.items():
        assert type(got[k]) is type(v), (k, got[k], v)
    # ... and after a trip through text.
    op2 = next(o for o in parsed.walk() if ir.primitive_name(o) == name)
    assert ir.op_params(op2) == params
    assert [ir.format_type(t) for t in op2.operand_types] == \
        [ir.format_type(ir.tensor_type(*a)) for a in avals]
    # The primitive's NumPy implementation takes the decoded params as is
    # and produces the op's result type.
    rng = np.random.default_rng(0)
    arrays = [_random(a, rng) for a in avals]
    if name == "check":
        arrays[1][...] = True       # a check that passes (one that fails raises)
    out = tops.PRIMITIVES[name].impl(*arrays, **ir.op_params(op2))
    assert tuple(out.shape) == ir.shape_of(op2.result)


def test_scalar_params_keep_their_python_type():
    for value in (0.0, -0.0, 1e-5, 1 / 3, 3.0e38, float("inf"), float("-inf"), 7, -(2 ** 63),
                  2 ** 63 - 1, True, False, np.float32(0.5), np.int64(4), np.bool_(True)):
        op = ir.make_op("full", [], {"value": value, "shape": (2,), "dtype": dt.float32},
                        ((2,), dt.float32))
        text = ir.print_op(op, debuginfo=False)
        back = ir.parse_module("builtin.module {\n" + text + "}\n", verify=False)
        got = ir.op_params(next(iter(back.body.block.ops)))["value"]
        want = value.item() if isinstance(value, np.generic) else value
        assert type(got) is type(want) and got == want
        if isinstance(want, float):
            assert np.copysign(1, got) == np.copysign(1, want)
    nan = ir.make_op("full", [], {"value": float("nan"), "shape": (), "dtype": "f32"}, ((), "f32"))
    assert "value nan" in ir.print_op(nan)


def test_make_op_rejects_bad_arguments():
    fn = ir.new_function("f", [((2,), "f32")])
    x = fn.body.block.args[0]
    with pytest.raises(ValueError, match="unknown primitive"):
        ir.make_op("frobnicate", [x], {}, ((2,), "f32"))
    with pytest.raises(ValueError, match="expects 2 operands"):
        ir.make_op("add", [x], {}, ((2,), "f32"))
    with pytest.raises(ValueError, match="expects params"):
        ir.make_op("reduce_sum", [x], {}, ((), "f32"))
    with pytest.raises(TypeError, match="tuple of ints"):
        ir.make_op("reduce_sum", [x], {"axes": 0}, ((), "f32"))
    with pytest.raises(ValueError, match="int64"):
        ir.make_op("full", [], {"value": 2 ** 64, "shape": (), "dtype": "i64"}, ((), "i64"))
