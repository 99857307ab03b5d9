"""Ops the cpu backend's builder makes from shared attributes (``Op.create``)
are the ops xDSL's constructors make: the same operands, result types and
properties (in the same order), so the lowered module, its printed form and
its LLVM IR do not depend on which way an op was built."""
import io

import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import i32, i64
from xdsl.printer import Printer

from tracec.backends.cpu.builder import PTR, ModuleBuilder


def _printed(op) -> str:
    out = io.StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


@pytest.mark.parametrize("ret", [None, i32])
@pytest.mark.parametrize("n_args", [0, 1, 3])
def test_call_is_what_xdsls_constructor_makes(ret, n_args):
    fb = ModuleBuilder("t_").function("caller", [PTR, i64, i64], None)
    args = fb.args[:n_args]
    made = fb.call("tracec_kernel_7", args, ret)
    ours = fb.block.last_op
    theirs = llvm.CallOp("tracec_kernel_7", *args, return_type=ret)
    assert (made is None) == (ret is None)
    _same(ours, theirs)


def _same(ours, theirs):
    assert list(ours.properties.items()) == list(theirs.properties.items())
    assert ours.attributes == theirs.attributes
    assert list(ours.operands) == list(theirs.operands)
    assert list(ours.successors) == list(theirs.successors)
    assert list(ours.result_types) == list(theirs.result_types)
    assert _printed(ours) == _printed(theirs)


@pytest.mark.parametrize("n_args", [0, 2])
def test_branches_are_what_xdsls_constructors_make(n_args):
    fb = ModuleBuilder("t_").function("f", [PTR, i64, i64], None)
    args = fb.args[1:1 + n_args]
    dest = fb.new_block([i64] * n_args)
    fb.br(dest, *args)
    _same(fb.block.last_op, llvm.BrOp(dest, *args))
    other = fb.new_block([i64])
    cond = fb.icmp("slt", fb.args[1], fb.args[2])
    for targs, fargs in ((args, fb.args[1:2]), ((), fb.args[2:3])):
        t = fb.new_block([i64] * len(targs))
        fb.cond_br(cond, t, other, targs, fargs)
        _same(fb.block.last_op, llvm.CondBrOp(cond, t, list(targs), other, list(fargs)))
