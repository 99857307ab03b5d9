"""Print -> parse round trips of tracec IR: structure and locations."""
from __future__ import annotations

import pytest
from xdsl.dialects.builtin import FileLineColLoc

import tracec.ir as ir
from tracec import dtypes as dt
from ir_samples import USER, all_primitives_module, hand_module


def _locations(module):
    return [(op.name, ir.loc_tuple(op)) for op in module.walk()]


@pytest.mark.parametrize("build", [hand_module, all_primitives_module])
def test_custom_syntax_round_trip(build):
    module = build()
    module.verify()
    text = ir.print_module(module)
    parsed = ir.parse_module(text)
    assert parsed.is_structurally_equivalent(module)
    assert _locations(parsed) == _locations(module)
    # Printing is a fixed point: the parsed module prints the same text.
    assert ir.print_module(parsed) == text


def test_generic_syntax_round_trip():
    module = hand_module()
    text = ir.print_op(module, generic=True)
    assert '"tracec.add"' in text
    parsed = ir.parse_module(text)
    assert parsed.is_structurally_equivalent(module)
    assert _locations(parsed) == _locations(module)


def test_locations_print_as_mlir_locs():
    module = hand_module()
    text = ir.print_module(module)
    add_line = next(line for line in text.splitlines() if "tracec.add" in line)
    assert add_line.rstrip().endswith(f'loc("{USER}":10:4)')
    ops = {op.name: op for op in ir.parse_module(text).walk()}
    loc = ops["tracec.backward"].location
    assert isinstance(loc, FileLineColLoc)
    assert ir.loc_tuple(ops["tracec.backward"]) == (USER, 19, 4)
    assert ir.format_loc(ops["tracec.backward"]) == f"{USER}:19:4"


def test_every_op_of_the_hand_module_has_a_user_location():
    for op in hand_module().walk():
        if op.name.startswith("tracec.") or op.name.startswith("func."):
            assert ir.loc_tuple(op) is not None, op.name
            assert ir.loc_tuple(op)[0] == USER


def test_without_debuginfo_no_locations():
    text = ir.print_module(hand_module(), debuginfo=False)
    assert "loc(" not in text
    assert ir.parse_module(text).is_structurally_equivalent(hand_module())


def test_parse_rejects_bad_types_with_verify():
    text = """builtin.module {
  func.func @f(%a: tensor<4xf32>, %b: tensor<4xf64>) -> tensor<4xf32> {
    %0 = tracec.add %a, %b : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32> loc("u.py":3:1)
    func.return %0 : tensor<4xf32>
  }
}
"""
    with pytest.raises(Exception, match=r"tracec.add .*u.py:3:1.*element types differ"):
        ir.parse_module(text)
    ir.parse_module(text, verify=False)  # parses fine; only verification fails


def test_hand_written_text_parses():
    text = """builtin.module {
  func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
    %0 = tracec.exp %x : tensor<4x8xf32> loc("m.py":1:0)
    %1 = tracec.reduce_max %0 axes [1] : tensor<4x8xf32> -> tensor<4xf32> loc("m.py":2:0)
    %2 = tracec.full value 0.0 shape [4] dtype f32 : tensor<4xf32>
    %3 = tracec.maximum %1, %2 : tensor<4xf32>
    func.return %3 : tensor<4xf32>
  }
}
"""
    m = ir.parse_module(text)
    ops = [op for op in m.walk() if op.name.startswith("tracec.")]
    assert [ir.primitive_name(op) for op in ops] == ["exp", "reduce_max", "full", "maximum"]
    assert ir.op_params(ops[1]) == {"axes": (1,)}
    assert ir.op_params(ops[2]) == {"value": 0.0, "shape": (4,), "dtype": dt.float32}
    assert isinstance(ir.op_params(ops[2])["value"], float)
