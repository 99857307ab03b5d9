"""tracec.constant keeps NumPy data bit-exact through the text form."""
from __future__ import annotations

import numpy as np
import pytest

import tracec.ir as ir
from tracec import dtypes as dt


def _round_trip(op):
    text = "builtin.module {\n" + ir.print_op(op) + "}\n"
    module = ir.parse_module(text)
    back = next(iter(module.body.block.ops))
    assert back.is_structurally_equivalent(op)
    return back, text


def _same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes()


SPECIALS = [0.0, -0.0, 1 / 3, 0.1, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, 123456792.0]


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.float16])
def test_float_data_is_bit_exact(d):
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        small = np.array(SPECIALS, dtype=d.np)
    bits = rng.integers(0, 2 ** (8 * d.np.itemsize), size=(5, 7), dtype=np.uint64)
    any_bits = bits.astype(f"u{d.np.itemsize}").view(d.np)  # includes NaN payloads
    for data in (small, any_bits, np.asarray(d.np.type(2.5)), np.zeros((0, 3), d.np),
                 rng.standard_normal((40, 50)).astype(d.np)):
        op = ir.constant(data, loc=("c.py", 1, 0))
        back, _ = _round_trip(op)
        _same_bits(ir.constant_array(back), data)
        assert ir.dtype_of(back.result) is d


@pytest.mark.parametrize("d", [dt.int32, dt.int64])
def test_int_data(d):
    info = np.iinfo(d.np)
    data = np.array([[info.min, -1, 0], [1, 42, info.max]], dtype=d.np)
    back, text = _round_trip(ir.constant(data))
    _same_bits(ir.constant_array(back), data)
    assert "dense<[[" in text  # small integer constants print readably


def test_bool_data():
    data = np.array([[True, False, True], [False, False, True]])
    back, text = _round_trip(ir.constant(data))
    _same_bits(ir.constant_array(back), data)
    assert "dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>" in text
    big = np.random.default_rng(0).random(1000) < 0.3
    back, _ = _round_trip(ir.constant(big))
    _same_bits(ir.constant_array(back), big)


def test_bfloat16_data():
    data = dt.round_bfloat16(np.array([1.0, -2.5, 1 / 3, np.inf, 3.0e38], np.float32))
    op = ir.constant(data, dtype=dt.bfloat16)
    assert ir.dtype_of(op.result) is dt.bfloat16
    back, text = _round_trip(op)
    assert 'dense<"0x' in text and "xbf16>" in text
    _same_bits(ir.constant_array(back), data)


def test_text_forms():
    _, text = _round_trip(ir.constant(np.array([1.0, 2.5], np.float32)))
    assert "tracec.constant dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>" in text
    _, text = _round_trip(ir.constant(np.array([1.0, np.nan], np.float32)))
    assert 'tracec.constant dense<"0x0000803F0000C07F"> : tensor<2xf32>' in text
    _, text = _round_trip(ir.constant(np.ones(100, np.float32)))
    assert 'dense<"0x' in text  # large: hex, exact and short to parse


def test_constant_verifier():
    op = ir.constant(np.zeros(3, np.float32))
    op.verify()
    bad = ir.ConstantOp.create(result_types=[ir.tensor_type((4,), "f32")],
                               properties={"value": op.value})
    with pytest.raises(Exception, match="differs from result type"):
        bad.verify()
