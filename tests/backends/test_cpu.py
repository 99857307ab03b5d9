"""The cpu backend against the interpreter, primitive by primitive.

Every primitive in ``tracec.ops.PRIMITIVES`` must have cases here (a test
fails for one that has none), over several shapes, dtypes and parameters.
All cases of one primitive are compiled together as one function (one op per
case), so the suite compiles one module per primitive.
"""
from __future__ import annotations

import numpy as np
import pytest

from tracec import dtypes as dt
from tracec import ir
from tracec.backends import cpu, interp
from tracec.ops import PRIMITIVES

RNG = np.random.default_rng(1234)
F = (np.float32, np.float64)


def randn(*shape, dtype=np.float32):
    return np.asarray(RNG.standard_normal(shape), dtype=dtype)


def uniform(lo, hi, *shape, dtype=np.float32):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def ints(lo, hi, *shape, dtype=np.int64):
    return RNG.integers(lo, hi, shape).astype(dtype)


def bools(*shape):
    return RNG.random(shape) < 0.5


SMALL_INTS = (np.int8, np.int16, np.uint8)


def edges(d, n=24):
    """``n`` values of integer dtype ``d`` crowding both ends of its range."""
    info = np.iinfo(d)
    lo, hi = int(info.min), int(info.max)
    v = [lo, lo + 1, hi, hi - 1, 0, 1, 2, 127 if hi > 127 else hi - 2, 128 if hi > 128 else 3]
    return np.array((v * n)[:n], dtype=np.int64).astype(d)[RNG.permutation(n)]


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 30.0,
                    -30.0, 88.0, -88.0, 100.0, -104.0, 0.5, 3.9, -4.1, 1e-3])


def _unary_cases(positive=False):
    out = []
    for d in F:
        x = uniform(0.01, 20, 999, dtype=d) if positive else randn(999, dtype=d) * 3
        out += [([x], {}), ([randn(dtype=d)], {}), ([randn(3, 5, dtype=d) * 2], {}),
                ([SPECIAL.astype(d)], {})]
        if positive:
            out.append(([np.array([1e-40, 1e-42, 5e-45, 1e-300, 7.0, 1.0, 0.999], d)], {}))
    return out


def _binary_cases(name):
    out = []
    for d in F:
        a, b = randn(3, 4, dtype=d), randn(4, dtype=d)
        if name == "pow":
            a = np.abs(a) + 0.1
            out.append(([a, np.full((4,), 2.0, d)], {}))
        if name == "div":
            b = b + np.sign(b) * 0.5
        out += [([a, b], {}), ([randn(3, 1, dtype=d), randn(1, 4, dtype=d) + 3], {}),
                ([randn(dtype=d) + 3, randn(2, 3, dtype=d) + 3], {}),
                ([randn(1000, dtype=d) + 5, randn(1000, dtype=d) + 5], {})]
    for d in (np.int32, np.int64):
        lo = 0 if name == "pow" else -50
        hi_b = 5 if name == "pow" else 50
        b = ints(lo, hi_b, 3, 4, dtype=d)
        if name == "div":
            b[b == 0] = 7
        out.append(([ints(-50, 50, 3, 4, dtype=d), b], {}))
    if name in ("add", "mul", "maximum", "minimum"):
        out.append(([bools(3, 4), bools(4)], {}))
    for d in SMALL_INTS:   # wraparound and unsigned order at the range's edges
        a, b = edges(d), edges(d)[::-1].copy()
        if name == "pow":
            b = ints(0, 9, 24, dtype=d)
        if name == "div":
            b[b == 0] = 3
        out.append(([a, b], {}))
    return out


def _cmp_cases():
    out = []
    for d in F:
        a = randn(4, 5, dtype=d)
        b = a.copy()
        b[::2] = randn(2, 5, dtype=d)
        a[0, 0] = np.nan
        out += [([a, b], {}), ([a, randn(5, dtype=d)], {})]
    out += [([ints(-3, 3, 4, 5), ints(-3, 3, 5)], {}),
            ([ints(-3, 3, 6, dtype=np.int32), ints(-3, 3, 6, dtype=np.int32)], {}),
            ([bools(4, 5), bools(4, 5)], {})]
    out += [([edges(d), edges(d)[::-1].copy()], {}) for d in SMALL_INTS]
    return out


def _reduce_cases(name):
    out = []
    x3 = randn(2, 3, 4)
    for axes in [(0,), (1,), (2,), (0, 1), (1, 2), (0, 2), (0, 1, 2)]:
        out.append(([x3], {"axes": axes}))
    out += [([randn(3000, dtype=np.float64)], {"axes": (0,)}),
            ([randn(37, 129)], {"axes": (1,)}), ([randn(129, 37)], {"axes": (0,)}),
            ([randn(5, 1, 7)], {"axes": (1,)}), ([randn()], {"axes": ()}),
            ([ints(-9, 9, 3, 4, dtype=np.int32)], {"axes": (1,)}),
            ([ints(-9, 9, 3, 4)], {"axes": (0, 1)})]
    out += [([edges(d).reshape(4, 6)], {"axes": (1,)}) for d in SMALL_INTS]
    if name != "reduce_sum":
        # reduce_sum's NumPy impl sums bools with dtype=bool (a logical or)
        # although its result dtype is int64; the cpu backend counts.
        out.append(([bools(3, 4)], {"axes": (0,)}))
    x = randn(3, 4)
    x[1, 2] = np.nan
    out.append(([x], {"axes": (1,)}))
    if name == "reduce_sum":
        out.append(([randn(0, 3)], {"axes": (0,)}))
    return out


def _arg_cases():
    x = randn(3, 4, 5)
    y = randn(4, 6)
    y[2, 3] = np.nan
    z = ints(0, 3, 5, 7)
    return [([x], {"axis": 0}), ([x], {"axis": 1}), ([x], {"axis": 2}), ([y], {"axis": 1}),
            ([y], {"axis": 0}), ([z], {"axis": 1}), ([randn(17)], {"axis": 0}),
            ([randn()], {"axis": 0}), ([bools(3, 4)], {"axis": 1})] + [
        ([edges(d).reshape(4, 6)], {"axis": 1}) for d in SMALL_INTS]


def _argsort_cases():
    y = randn(4, 6)
    y[2, 3] = y[1, 0] = y[1, 4] = np.nan
    y[0, 1] = y[0, 4] = y[0, 2]  # ties keep their order
    out = []
    for desc in (False, True):
        out += [([randn(3, 4, 5)], {"axis": 1, "descending": desc}),
                ([y], {"axis": 1, "descending": desc}),
                ([ints(0, 3, 5, 7)], {"axis": 1, "descending": desc}),
                ([bools(3, 4)], {"axis": 0, "descending": desc}),
                ([randn(17, dtype=np.float64)], {"axis": 0, "descending": desc}),
                ([edges(np.uint8).reshape(4, 6)], {"axis": 1, "descending": desc})]
    return out + [([randn()], {"axis": 0, "descending": False})]


def _cast_cases():
    out = []
    src = {np.float32: randn(3, 4) * 5, np.float64: randn(3, 4, dtype=np.float64) * 5,
           np.int32: ints(-9, 9, 3, 4, dtype=np.int32), np.int64: ints(-9, 9, 3, 4),
           np.bool_: bools(3, 4), np.int8: edges(np.int8), np.int16: edges(np.int16),
           np.uint8: edges(np.uint8), np.uint64: np.array([0, 2**63 + 2**11 + 1, 2**64 - 1, 5],
                                                           np.uint64)}
    for s, x in src.items():
        for t in (dt.float32, dt.float64, dt.int32, dt.int64, dt.bool_, dt.float16,
                  dt.bfloat16, dt.int8, dt.int16, dt.uint8):
            out.append(([x], {"dtype": t}))
    # floats to narrow ints wrap through int64, as PyTorch's casts do
    wide = np.array([300.7, -1.5, 255.9, -128.0, 40000.5, -0.5, 127.9], np.float32)
    out += [([wide], {"dtype": t}) for t in (dt.int8, dt.int16, dt.uint8)]
    out.append(([np.array([2.5, -2.5, 0.5, 1e10, -0.0], np.float32)], {"dtype": dt.int64}))
    return out


def _cases(name):
    if name in ("exp", "sin", "cos", "tanh", "logistic", "erf", "expm1"):
        return _unary_cases()
    if name == "log1p":   # Kahan's formula near 0 and at -1, beyond it (NaN) and at infinity
        special = np.array([1e-8, -1e-8, -0.0, 0.0, -1.0, -2.0, np.inf, np.nan, 3e-4, 1e30],
                           np.float32)
        return _unary_cases(positive=True) + [([special], {}), ([special.astype(np.float64)], {})]
    if name in ("log", "sqrt", "rsqrt"):
        return _unary_cases(positive=True)
    if name in ("neg", "abs", "sign", "stop_gradient"):
        out = _unary_cases() + [([ints(-5, 5, 3, 4)], {}),
                                ([ints(-5, 5, 7, dtype=np.int32)], {})] + [
            ([edges(d)], {}) for d in SMALL_INTS]
        return out + ([([bools(5)], {})] if name == "abs" else [])
    if name == "logical_not":
        return [([bools(3, 4)], {}), ([randn(5)], {}), ([ints(-1, 2, 6)], {})]
    if name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
        return _binary_cases(name)
    if name == "fmod":     # floats (C's fmod): signs, zeros, infinities, huge quotients
        special = (np.array([-7.5, 7.5, -0.0, 0.0, 1e10, np.inf, 3.0, np.nan, 5.0, 6.66]),
                   np.array([2.0, -2.0, 1.0, -1.0, 3.0, 2.0, 0.0, 1.0, np.inf, 1.3]))
        return [([a, b], {}) for d in F for a, b in (
            (randn(3, 4, dtype=d) * 10, randn(4, dtype=d) + 3),
            (randn(1000, dtype=d) * 50, randn(1000, dtype=d) + 5),
            (special[0].astype(d), special[1].astype(d)))]
    if name in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"):
        return _cmp_cases()
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):   # two's complement, big products
        big = ints(-3, 3, 4, 5) * 2654435761
        return [([big, ints(-(1 << 40), 1 << 40, 5)], {}),
                ([ints(-100, 100, 6, dtype=np.int32), ints(-100, 100, 6, dtype=np.int32)], {})] + \
            [([edges(d), edges(d)[::-1].copy()], {}) for d in SMALL_INTS]
    if name == "where":
        return [([bools(3, 4), randn(3, 4), randn(4)], {}),
                ([bools(4), randn(3, 1, dtype=np.float64), randn(dtype=np.float64)], {}),
                ([bools(2, 3), ints(0, 9, 2, 3), ints(0, 9, 3)], {})]
    if name == "check":     # conditions that hold (test_runtime_checks.py fails them)
        return [([randn(3, 4), np.ones(4, bool)], {"message": "m"}),
                ([ints(0, 9, 5), np.ones((2, 1), bool)], {"message": "m"}),
                ([bools(3), np.ones((), bool)], {"message": "m"})]
    if name == "cast":
        return _cast_cases()
    if name in ("reduce_sum", "reduce_max", "reduce_min"):
        return _reduce_cases(name)
    if name in ("argmax", "argmin"):
        return _arg_cases()
    if name == "argsort":
        return _argsort_cases()
    if name == "reshape":
        return [([randn(3, 4)], {"shape": (4, 3)}), ([randn(2, 3, 4)], {"shape": (6, 1, 4)}),
                ([randn(5)], {"shape": (5, 1)})]
    if name == "transpose":
        return [([randn(3, 4)], {"perm": (1, 0)}), ([randn(2, 3, 4)], {"perm": (2, 0, 1)}),
                ([randn(2, 3, 4, dtype=np.float64)], {"perm": (1, 0, 2)}),
                ([ints(0, 9, 3, 4)], {"perm": (1, 0)}), ([bools(3, 5)], {"perm": (1, 0)})]
    if name == "broadcast_to":
        return [([randn(3, 1)], {"shape": (2, 3, 4)}), ([randn()], {"shape": (5,)}),
                ([ints(0, 9, 4)], {"shape": (3, 4)}), ([randn(3, 4)], {"shape": (3, 4)})]
    if name == "slice":
        x = randn(5, 6)
        return [([x], {"starts": (1, 0), "stops": (4, 6), "steps": (1, 2)}),
                ([x], {"starts": (0, 5), "stops": (5, 6), "steps": (2, 1)}),
                ([randn(4, 3, 2, dtype=np.float64)], {"starts": (1, 1, 0), "stops": (4, 3, 2),
                                                      "steps": (2, 1, 1)}),
                ([x], {"starts": (2, 2), "stops": (2, 2), "steps": (1, 1)})]
    if name == "pad":
        return [([randn(2, 3)], {"low": (1, 0), "high": (0, 2), "interior": (0, 1),
                                 "value": 0.0}),
                ([randn(3)], {"low": (2,), "high": (1,), "interior": (2,), "value": -1.5}),
                ([ints(0, 9, 2, 2)], {"low": (0, 1), "high": (1, 0), "interior": (0, 0),
                                      "value": 7}),
                ([randn(2, 2)], {"low": (0, 0), "high": (0, 0), "interior": (0, 0),
                                 "value": 0.0})]
    if name == "concatenate":
        return [([randn(2, 3), randn(1, 3)], {"axis": 0}),
                ([randn(2, 3), randn(2, 1), randn(2, 4)], {"axis": 1}),
                ([ints(0, 5, 3), ints(0, 5, 2)], {"axis": 0})]
    if name == "take":
        return [([randn(5, 3), np.array([[0, 4], [-1, 2]])], {"axis": 0}),
                ([randn(2, 5, 3), np.array([1, 1, -5], np.int32)], {"axis": 1}),
                ([randn(4, 6, dtype=np.float64), np.array(3)], {"axis": 1}),
                ([ints(0, 9, 4, 2), np.array([3, 0, 3])], {"axis": 0})]
    if name == "gather":
        return [([randn(3, 4), ints(-4, 4, 3, 6)], {"axis": 1}),
                ([randn(3, 4), ints(0, 3, 5, 4)], {"axis": 0}),
                ([randn(2, 3, 4), ints(0, 3, 2, 2, 4, dtype=np.int32)], {"axis": 1})]
    if name == "index_add":
        return [([randn(5, 3), np.array([0, 4, 0, -1]), randn(4, 3)], {"axis": 0}),
                ([randn(2, 4), np.array([[1, 1], [3, 0]]), randn(2, 2, 2)], {"axis": 1}),
                ([ints(0, 9, 3), np.array([2, 2]), ints(0, 9, 2)], {"axis": 0})]
    if name in ("scatter_max", "scatter_min", "scatter_mul"):
        return [([randn(3, 4), ints(-4, 4, 3, 6), randn(3, 6)], {"axis": 1}),
                ([ints(-9, 9, 3, 4), ints(0, 3, 5, 4), ints(-9, 9, 5, 4)], {"axis": 0})]
    if name == "scatter_add":
        return [([randn(3, 4), ints(-4, 4, 3, 6), randn(3, 6)], {"axis": 1}),
                ([randn(3, 4), ints(0, 3, 5, 4), randn(5, 4)], {"axis": 0})]
    if name == "matmul":
        out = []
        for d in F:
            out += [([randn(3, 4, dtype=d), randn(4, 5, dtype=d)], {}),
                    ([randn(2, 3, 4, dtype=d), randn(4, 5, dtype=d)], {}),
                    ([randn(2, 1, 3, 4, dtype=d), randn(3, 4, 2, dtype=d)], {}),
                    ([randn(1, 7, dtype=d), randn(7, 1, dtype=d)], {}),
                    ([randn(33, 70, dtype=d), randn(70, 45, dtype=d)], {}),
                    # large enough for the packed GEMM, with edge tiles
                    ([randn(70, 65, dtype=d), randn(65, 50, dtype=d)], {}),
                    ([randn(2, 1, 50, 60, dtype=d), randn(3, 60, 70, dtype=d)], {}),
                    # one B for every batch: a single [6 * 20, 60] product
                    ([randn(2, 3, 20, 60, dtype=d), randn(60, 70, dtype=d)], {}),
                    ([randn(3, 20, 60, dtype=d), randn(1, 60, 70, dtype=d)], {}),
                    # few rows: B read in place (full panels and a 13-wide edge)
                    ([randn(20, 48, dtype=d), randn(48, 77, dtype=d)], {}),
                    ([randn(2, 11, 40, dtype=d), randn(2, 40, 45, dtype=d)], {})]
        out.append(([ints(-3, 3, 3, 4), ints(-3, 3, 4, 2)], {}))
        return out
    if name == "full":
        return [([], {"value": 1.5, "shape": (2, 3), "dtype": dt.float32}),
                ([], {"value": 7, "shape": (4,), "dtype": dt.int64}),
                ([], {"value": True, "shape": (2, 2), "dtype": dt.bool_}),
                ([], {"value": -2.0, "shape": (), "dtype": dt.float64}),
                ([], {"value": 0.0, "shape": (3000,), "dtype": dt.float32})]
    if name == "iota":
        return [([], {"shape": (3, 4), "dtype": dt.float32, "axis": 0}),
                ([], {"shape": (3, 4), "dtype": dt.int64, "axis": 1}),
                ([], {"shape": (5,), "dtype": dt.int32, "axis": 0}),
                ([], {"shape": (2, 1, 3), "dtype": dt.float64, "axis": 2})]
    if name == "random_uniform":
        st = np.array([42, 7], np.int64)
        return [([st], {"shape": (5, 7), "dtype": dt.float32}),
                ([np.array([-3, 2 ** 40], np.int64)], {"shape": (1000,),
                                                        "dtype": dt.float64}),
                ([st], {"shape": (), "dtype": dt.float32})]
    if name in ("rnn_scan", "rnn_scan_grad"):
        return _rnn_cases(name)
    world = __import__("mpi4py.MPI").MPI.COMM_WORLD.py2f()  # one process here
    if name == "all_reduce":
        return [([randn(3, 4, dtype=d)], {"reduce_op": op, "comm": world})
                for d in F for op in (0, 1)] + \
            [([ints(-9, 9, 7, dtype=np.int32)], {"reduce_op": 0, "comm": world}),
             ([randn(dtype=np.float32)], {"reduce_op": 1, "comm": world})]
    if name == "broadcast":
        return [([ints(-9, 9, 2, 5)], {"src": 0, "comm": world}),
                ([randn(0, 3)], {"src": 0, "comm": world})]
    if name == "all_gather":
        return [([randn(2, 3, dtype=np.float64)], {"size": 1, "comm": world})]
    return []


def _rnn_cases(name):
    """Every mode, both directions and dtypes, GRU with and without b_hh,
    one batch row, a hidden size that is not a multiple of the vectors."""
    out = []
    for d in F:
        for mode, gates, rev, (T, N, H) in (("LSTM", 4, 0, (4, 3, 5)), ("LSTM", 4, 1, (3, 1, 9)),
                                             ("GRU", 3, 1, (4, 2, 5)), ("GRU", 3, 0, (2, 3, 4)),
                                             ("RNN_TANH", 1, 0, (5, 2, 3)),
                                             ("RNN_RELU", 1, 1, (3, 2, 6)),
                                             # sizes for the unpacked short GEMM
                                             ("LSTM", 4, 1, (3, 4, 32)),
                                             ("GRU", 3, 0, (2, 5, 40))):
            G = gates * H
            w = randn(H, G, dtype=d) * np.asarray(0.5, d)
            if name == "rnn_scan":
                xs = [randn(T, N, G, dtype=d), w, randn(N, H, dtype=d)]
                if mode == "LSTM":
                    xs.append(randn(N, H, dtype=d))
                if mode == "GRU" and not rev:
                    xs.append(randn(G, dtype=d))
            else:
                W = {"LSTM": 6, "GRU": 5}.get(mode, 1) * H
                xs = [randn(T + 1, N, W, dtype=d), uniform(0.05, 0.95, T + 1, N, W, dtype=d), w,
                      randn(N, H, dtype=d)] + ([randn(N, H, dtype=d)] if mode == "LSTM" else [])
            out.append((xs, {"mode": mode, "reverse": rev}))
    return out


def _module(name, cases):
    prim = PRIMITIVES[name]
    types = []
    for arrays, _ in cases:
        types += [(a.shape, dt.from_numpy_dtype(a.dtype)) for a in arrays]
    fn = ir.new_function("f", types)
    args = iter(fn.body.block.args)
    results = []
    for k, (arrays, params) in enumerate(cases):
        operands = [next(args) for _ in arrays]
        out = prim.abstract_eval(*[ir_aval(v) for v in operands], **params)
        op = ir.make_op(name, operands, params, (out.shape, out.dtype),
                        loc=("user_model.py", 100 + k, 5))
        fn.body.block.add_op(op)
        results.append(op.results[0])
    ir.set_returns(fn, results)
    m = ir.new_module([fn])
    m.verify()
    return m


def ir_aval(v):
    from tracec.ops import Aval
    return Aval(ir.shape_of(v.type), ir.dtype_of(v.type))


def assert_close(ref, got, name, what=""):
    assert got.dtype == ref.dtype, (name, what, got.dtype, ref.dtype)
    assert got.shape == ref.shape, (name, what, got.shape, ref.shape)
    if ref.dtype.kind == "f":
        d = ref.dtype
        reduce = name in ("reduce_sum", "matmul", "rnn_scan", "rnn_scan_grad")
        rtol = (1e-5 if d == np.float32 else 1e-12) * (20 if reduce else 1)
        atol = (1e-6 if d == np.float32 else 1e-14) * (100 if reduce else 1)
        if d == np.float16 or what == "bf16":
            rtol, atol = 1e-3, 1e-3
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{name} {what}")
    else:
        np.testing.assert_array_equal(got, ref, err_msg=f"{name} {what}")


def test_every_primitive_has_cases():
    missing = [n for n in PRIMITIVES if not _cases(n)]
    assert not missing, f"no cpu test cases for {missing}"


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_matches_interp(name):
    cases = _cases(name)
    assert cases, f"no cases for {name}"
    m = _module(name, cases)
    arrays = [a for arrs, _ in cases for a in arrs]
    want = interp.compile_module(m)(arrays)
    exe = cpu.compile_module(m, asm=False)
    got = exe(arrays)
    assert len(got) == len(want)
    for k, (w, g) in enumerate(zip(want, got)):
        params = cases[k][1]
        label = "bf16" if params.get("dtype") is dt.bfloat16 else f"case {k} {params}"
        assert_close(w, g, name, label)
