"""Symbolic sizes in the IR: the Sym algebra, tensor types with ``?`` and
named sizes, symbolic parameters, verifier messages, text round trips and
specialization to static IR."""
import pytest

from tracec import dtypes as dt
from tracec import ir
from tracec.symbolic import GUARD_SINKS, Sym, SymbolicError, evaluate, parse, symbol
import tracec.passes.simplify  # noqa: F401 - installs the full type rule in the verifier

B, T = symbol("B"), symbol("T")


def test_sym_algebra_normalizes():
    assert (B * T * 4) // (4 * B) == T and isinstance((B * T) // T, Sym)
    assert B - B == 0 and isinstance(B - B, int)
    assert str(2 * B - 1) == "2*B-1" and str((T + 1) // 2) == "(T+1)//2"
    for e in (B * T, (T + 1) // 2, (B * T + B) % (B + 1), -B, 3 * B * B + T):
        assert parse(str(e)).same(e)
    assert evaluate(parse("(B+1)//2*T"), {"B": 6, "T": 3}) == 9


def test_divmod_and_powers_of_sizes():
    """divmod (tensor_split's sections) and ``**`` (attention's
    ``d ** 0.5``) on sizes, as on SymInts: a natural power stays a size,
    another exponent specializes the size to its value under a guard."""
    assert divmod(B * 6 + 4, 2) == (B * 3 + 2, 0) and divmod(12, symbol("X", 5))[1] == 2
    q, r = divmod(T + 1, 2)
    assert q.same((T + 1) // 2) and r.same((T + 1) % 2)
    assert (T ** 2).same(T * T) and T ** 0 == 1
    seen = []
    GUARD_SINKS.append(lambda *a: seen.append(a))
    try:
        d = symbol("D", 16)
        assert d ** 0.5 == 4.0 and 2 ** d == 65536 and d ** symbol("E", 2) == 256
    finally:
        GUARD_SINKS.pop()
    assert [s[0] for s in seen] == ["specialize"] * 4
    with pytest.raises(SymbolicError, match="no value"):
        B ** 0.5


def test_numpy_reads_a_size_as_its_number_under_a_guard():
    """``np.sqrt(d_k)`` and ``torch.tensor(x.size(0))`` on a size: NumPy gets
    the number (``__array__``), specialized as int() is."""
    import numpy as np
    seen = []
    GUARD_SINKS.append(lambda *a: seen.append(a))
    try:
        d = symbol("D", 16)
        assert np.sqrt(d) == 4.0 and np.array([d, 2]).tolist() == [16, 2]
    finally:
        GUARD_SINKS.pop()
    assert seen and all(s[:2] == ("specialize", d) for s in seen)


def test_text_of_a_floor_division_factor_parses_back():
    """A ``//`` or ``%`` factor multiplied or negated is parenthesized: the
    signature's workspace offsets (``64*((4*B*T+63)//64)``) parse back to
    the same size (``64*(X)//64`` would read as ``(64*X)//64``)."""
    cases = (64 * ((4 * B * T + 63) // 64) + 128, -((B + 3) // 2), B * ((T + 1) // 2),
             ((B % 3) * T) - 2 * ((B * T) // 5), 64 * ((64 * ((B + 63) // 64) + 191) // 64))
    for e in cases:
        back = parse(str(e))
        for b in range(2, 40, 3):
            for t in range(2, 9):
                env = {"B": b, "T": t}
                assert evaluate(back, env) == evaluate(e, env), (str(e), env)
    assert str(64 * ((B + 63) // 64)) == "64*((B+63)//64)"


def test_sizes_are_at_least_two():
    assert B != 1 and B > 0 and B >= 2 and not (B == 0) and bool(B)
    assert B * T >= 4 and B + 1 != B and 2 * B - 3 > 0
    with pytest.raises(SymbolicError, match="cannot decide"):
        B > 5   # noqa: B015 - no hint, no guard: undecidable


def test_hinted_decisions_are_reported():
    seen = []
    GUARD_SINKS.append(lambda *a: seen.append(a))
    try:
        b = symbol("B", 7)
        assert (b > 5) is True and int(b) == 7 and (b * 2 == 14) is True
    finally:
        GUARD_SINKS.pop()
    assert [s[0] for s in seen] == ["compare", "specialize", "compare"]


def _fn():
    f = ir.new_function("f", [ir.tensor_type((B, T, 4), dt.float32)])
    x = f.body.block.args[0]
    r = ir.make_op("reshape", [x], {"shape": (B * T, 4)}, ((B * T, 4), dt.float32))
    s = ir.make_op("reduce_sum", [r], {"axes": (0,)}, ((4,), dt.float32))
    n = ir.make_op("full", [], {"value": B * T, "shape": (), "dtype": dt.float32},
                   ((), dt.float32))
    d = ir.make_op("div", [s, n], {}, ((4,), dt.float32))
    for op in (r, s, n, d):
        f.body.block.add_op(op)
    ir.set_returns(f, [d, r])
    return ir.new_module([f]), r


def test_symbolic_types_and_params_round_trip():
    m, r = _fn()
    m.verify()
    text = ir.print_module(m)
    assert 'tensor<?x?x4xf32, ["B", "T", "4"]>' in text
    assert 'sym_shape = ["B*T", "4"]' in text and 'sym_value = "B*T"' in text
    m2 = ir.parse_module(text)
    assert m2.is_structurally_equivalent(m)
    assert ir.op_params(r) == {"shape": (B * T, 4)}
    assert ir.format_type(r.results[0].type) == "f32[B*T,4]"
    assert ir.shape_of(r.results[0].type) == (B * T, 4)


def test_verifier_names_the_symbols():
    m, r = _fn()
    x = m.body.block.ops.first.body.block.args[0]
    bad = ir.make_op("reshape", [x], {"shape": (B * T, 4)}, ((B * T + 1, 4), dt.float32))
    r.parent.insert_op_before(bad, r)
    with pytest.raises(Exception, match=r"f32\[B\*T\+1,4\].*result shape should be \(B\*T, 4\)"):
        m.verify()


def test_specialize_gives_static_ir():
    m, _ = _fn()
    s = ir.specialize(m, {"B": 3, "T": 5})
    s.verify()
    text = ir.print_module(s)
    assert "?" not in text and "sym_" not in text
    assert "tensor<3x5x4xf32>" in text and "shape [15, 4]" in text and "value 15" in text
    assert ir.is_symbolic_type(m.body.block.ops.first.body.block.args[0].type)
