"""Shared builders for the tracec/ir tests: a hand-built module with every
kind of op, and one sample application of every primitive."""
from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import tracec.ir as ir
from tracec import dtypes as dt

F32, F64, I64, BOOL = dt.float32, dt.float64, dt.int64, dt.bool_
USER = "user_file.py"

# primitive -> (operand (shape, dtype) list, params).  Every primitive must
# appear here; the registry test fails otherwise.
PRIMITIVE_SAMPLES: dict[str, tuple[list, dict]] = {}


def _sample(names: str, avals, params=None):
    for n in names.split():
        PRIMITIVE_SAMPLES[n] = (list(avals), dict(params or {}))


_sample("exp expm1 log log1p sqrt rsqrt sin cos tanh logistic erf neg abs sign stop_gradient", [((4, 8), F32)])
_sample("logical_not", [((3,), BOOL)])
_sample("add sub mul div pow maximum minimum fmod", [((4, 8), F32), ((8,), F32)])
_sample("eq ne lt le gt ge", [((4, 1), F64), ((1, 5), F64)])
_sample("logical_and logical_or", [((3,), BOOL), ((3,), BOOL)])
_sample("bitwise_and bitwise_or bitwise_xor", [((4, 8), I64), ((8,), I64)])
_sample("where", [((4, 1), BOOL), ((4, 8), F32), ((), F32)])
_sample("check", [((4, 8), F32), ((8,), BOOL)], {"message": "x must be \"finite\""})
_sample("cast", [((4,), F32)], {"dtype": dt.float16})
_sample("reduce_sum reduce_max reduce_min", [((2, 3, 4), F32)], {"axes": (0, 2)})
_sample("argmax argmin", [((2, 3), F32)], {"axis": 1})
_sample("argsort", [((2, 3), F32)], {"axis": 1, "descending": True})
_sample("reshape", [((2, 3, 4), F32)], {"shape": (6, 4)})
_sample("transpose", [((2, 3, 4), F32)], {"perm": (2, 0, 1)})
_sample("broadcast_to", [((3, 1), F32)], {"shape": (2, 3, 5)})
_sample("slice", [((4, 8), F32)], {"starts": (0, 2), "stops": (4, 8), "steps": (1, 2)})
_sample("pad", [((4, 3), F32)], {"low": (1, 0), "high": (0, 2), "interior": (0, 1),
                                 "value": -1.5})
_sample("concatenate", [((2, 3), F32), ((4, 3), F32), ((1, 3), F32)], {"axis": 0})
_sample("take", [((5, 3), F32), ((2, 4), I64)], {"axis": 0})
_sample("gather", [((5, 3), F32), ((5, 2), I64)], {"axis": 1})
_sample("index_add", [((5, 3), F32), ((4,), I64), ((4, 3), F32)], {"axis": 0})
_sample("scatter_add", [((5, 3), F32), ((5, 2), I64), ((5, 2), F32)], {"axis": 1})
for _n in ("scatter_max", "scatter_min", "scatter_mul"):
    _sample(_n, [((5, 3), F32), ((5, 2), I64), ((5, 2), F32)], {"axis": 1})
_sample("matmul", [((2, 4, 8), F32), ((8, 3), F32)])
_sample("full", [], {"value": 2.5, "shape": (4, 3), "dtype": F32})
_sample("iota", [], {"shape": (4, 3), "dtype": I64, "axis": 1})
_sample("random_uniform", [((2,), I64)], {"shape": (3, 2), "dtype": F32})
# One LSTM direction (T=3, N=2, H=4) and its backward.
_sample("rnn_scan", [((3, 2, 16), F32), ((4, 16), F32), ((2, 4), F32), ((2, 4), F32)],
        {"mode": "LSTM", "reverse": 1})
_sample("rnn_scan_grad", [((4, 2, 24), F64), ((4, 2, 24), F64), ((4, 16), F64), ((2, 4), F64),
                          ((2, 4), F64)], {"mode": "LSTM", "reverse": 0})
# Collectives over this process's MPI_COMM_WORLD (a world of one in tests).
WORLD = __import__("mpi4py.MPI").MPI.COMM_WORLD.py2f()
_sample("all_reduce", [((4, 3), F32)], {"reduce_op": 0, "comm": WORLD})
_sample("broadcast", [((5,), I64)], {"src": 0, "comm": WORLD})
_sample("all_gather", [((2, 3), F64)], {"size": 1, "comm": WORLD})


def loc(line: int, col: int = 4):
    return (USER, line, col)


def hand_module() -> ModuleOp:
    """``step(x, b, rng)`` using add, reduce_sum, matmul, constant, slice,
    full (no operands), a kernel with a region, and a backward op."""
    fn = ir.new_function("step", [((4, 8), F32), ((8,), F32), ((2,), I64)],
                         ["x", "b", "rng"], loc=loc(1, 0))
    block = fn.body.block
    x, b, rng = block.args

    def emit(op):
        block.add_op(op)
        return op.results[0] if len(op.results) == 1 else op.results

    h = emit(ir.make_op("add", [x, b], {}, ((4, 8), F32), loc(10)))
    h2 = emit(ir.make_op("mul", [h, h], {}, ((4, 8), F32), loc(11)))
    w = emit(ir.constant(np.arange(16, dtype=np.float32).reshape(8, 2) / 4, loc=loc(12)))
    mm = emit(ir.make_op("matmul", [h2, w], {}, ((4, 2), F32), loc(13)))
    sl = emit(ir.make_op("slice", [h], {"starts": (0, 2), "stops": (4, 8), "steps": (1, 2)},
                         ((4, 3), F32), loc(14)))
    one = emit(ir.make_op("full", [], {"value": 1.0, "shape": (4, 3), "dtype": F32},
                          ((4, 3), F32), loc(15)))
    noise = emit(ir.make_op("random_uniform", [rng], {"shape": (4, 3), "dtype": F32},
                            ((4, 3), F32), loc(16)))
    kern = ir.KernelOp([sl, one, noise], [ir.tensor_type((4,), F32)], loc=loc(17, 8))
    ka, kb, kc = kern.block.args
    t1 = ir.make_op("sub", [ka, kb], {}, ((4, 3), F32), loc(17, 8))
    t2 = ir.make_op("mul", [t1, kc], {}, ((4, 3), F32), loc(17, 8))
    t3 = ir.make_op("reduce_sum", [t2], {"axes": (1,)}, ((4,), F32), loc(17, 8))
    for op in (t1, t2, t3):
        kern.block.add_op(op)
    kern.block.add_op(ir.YieldOp([t3.results[0]], loc=loc(17, 8)))
    k = emit(kern)
    loss = emit(ir.make_op("reduce_sum", [mm], {"axes": (0, 1)}, ((), F32), loc(18)))
    grads = emit(ir.BackwardOp(loss, [x, b], loc=loc(19)))
    ir.set_returns(fn, [loss, k, *grads], loc=loc(20))
    return ir.new_module([fn])


def all_primitives_module() -> ModuleOp:
    """One function applying every primitive once to fresh arguments."""
    import tracec.ops as tops  # tests may import the layer above ir

    arg_avals, uses = [], []
    for name, (avals, params) in PRIMITIVE_SAMPLES.items():
        uses.append((name, len(arg_avals), len(avals), params))
        arg_avals += avals
    fn = ir.new_function("all", arg_avals)
    args = fn.body.block.args
    outs = []
    for i, (name, start, n, params) in enumerate(uses):
        aval = tops.PRIMITIVES[name].abstract_eval(
            *[tops.Aval(*a) for a in arg_avals[start:start + n]], **params)
        op = ir.make_op(name, args[start:start + n], params, (aval.shape, aval.dtype),
                        loc(100 + i))
        fn.body.block.add_op(op)
        outs.append(op.results[0])
    ir.set_returns(fn, outs)
    return ir.new_module([fn])
