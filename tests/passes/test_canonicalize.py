"""``tracec-canonicalize``: one FileCheck case per rule (IR text in, run the
pass and DCE, printed IR checked), plus the rules' boundaries."""
from __future__ import annotations

import numpy as np
import pytest
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

import tracec.ir as ir
from passes_helpers import filecheck, run, assert_same
from tracec.passes.pipeline import run_passes
from tracec.passes.simplify import FOLD_LIMIT, CanonicalizePass

F4 = "tensor<4xf32>"


def _fn(args: str, results: str, body: str, returns: str, name: str = "f") -> str:
    return (f"func.func @{name}({args}) -> ({results}) {{\n{body}\n"
            f"  func.return {returns} : {results}\n}}\n")


def canonicalize(text: str):
    module = ir.parse_module(text)
    run_passes([CanonicalizePass(), DeadCodeElimination()], module, verify=True)
    return module


# (name, function text, FileCheck directives)
CASES = [
    ("mul_add_sub_div_identities",
     _fn(f"%x: {F4}", ", ".join([F4] * 6), """
  %one = tracec.constant dense<1.0> : tensor<f32>
  %zero = tracec.constant dense<0.0> : tensor<f32>
  %a = tracec.mul %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = tracec.mul %one, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tracec.add %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %d = tracec.add %zero, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %e = tracec.sub %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %g = tracec.div %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>""",
         "%a, %b, %c, %d, %e, %g"),
     """
CHECK:      func.func @f(%x: tensor<4xf32>)
CHECK-NEXT:   func.return %x, %x, %x, %x, %x, %x : tensor<4xf32>
"""),
    ("identity_with_a_full_shaped_ones_constant",
     _fn(f"%x: {F4}", F4, """
  %ones = tracec.constant dense<[1.0, 1.0, 1.0, 1.0]> : tensor<4xf32>
  %a = tracec.mul %ones, %x : tensor<4xf32>""", "%a"),
     """
CHECK:      func.return %x : tensor<4xf32>
"""),
    ("identity_that_widens_becomes_a_broadcast",
     _fn(f"%x: {F4}", "tensor<2x4xf32>", """
  %ones = tracec.constant dense<1.0> : tensor<2x4xf32>
  %a = tracec.mul %x, %ones : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>""", "%a"),
     """
CHECK:      [[B:%.+]] = tracec.broadcast_to %x shape [2, 4] : tensor<4xf32> -> tensor<2x4xf32>
CHECK-NEXT: func.return [[B]]
"""),
    ("non_identities_stay",
     _fn(f"%x: {F4}, %i: tensor<4xi64>", f"{F4}, {F4}, tensor<4xi64>", """
  %one = tracec.constant dense<1.0> : tensor<f32>
  %zero = tracec.constant dense<0.0> : tensor<f32>
  %ione = tracec.constant dense<1> : tensor<i64>
  %a = tracec.sub %zero, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %b = tracec.div %one, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tracec.div %i, %ione : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>""", "%a, %b, %c"),
     """
CHECK: tracec.sub %zero, %x
CHECK: tracec.div %one, %x
CHECK: tracec.div %i, %ione
"""),
    ("neg_neg",
     _fn(f"%x: {F4}", f"{F4}, {F4}", """
  %a = tracec.neg %x : tensor<4xf32>
  %b = tracec.neg %a : tensor<4xf32>""", "%b, %a"),
     """
CHECK:      [[A:%.+]] = tracec.neg %x
CHECK-NEXT: func.return %x, [[A]]
"""),
    ("transpose_of_transpose_composes",
     _fn("%m: tensor<2x3x4xf32>", "tensor<4x3x2xf32>, tensor<2x3x4xf32>", """
  %t1 = tracec.transpose %m perm [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %t2 = tracec.transpose %t1 perm [2, 0, 1] : tensor<3x2x4xf32> -> tensor<4x3x2xf32>
  %u = tracec.transpose %t1 perm [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>""",
         "%t2, %u"),
     """
CHECK:      [[T:%.+]] = tracec.transpose %m perm [2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
CHECK-NEXT: func.return [[T]], %m
"""),
    ("identity_transpose",
     _fn("%m: tensor<2x3xf32>", "tensor<2x3xf32>", """
  %t = tracec.transpose %m perm [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>""", "%t"),
     "CHECK: func.return %m\n"),
    ("reshape_of_reshape_and_same_shape",
     _fn("%m: tensor<2x6xf32>", "tensor<3x4xf32>, tensor<2x6xf32>", """
  %r1 = tracec.reshape %m shape [12] : tensor<2x6xf32> -> tensor<12xf32>
  %r2 = tracec.reshape %r1 shape [3, 4] : tensor<12xf32> -> tensor<3x4xf32>
  %r3 = tracec.reshape %m shape [2, 6] : tensor<2x6xf32> -> tensor<2x6xf32>""", "%r2, %r3"),
     """
CHECK:      [[R:%.+]] = tracec.reshape %m shape [3, 4] : tensor<2x6xf32> -> tensor<3x4xf32>
CHECK-NEXT: func.return [[R]], %m
"""),
    ("broadcasts",
     _fn(f"%x: {F4}", f"tensor<3x2x4xf32>, {F4}", """
  %b1 = tracec.broadcast_to %x shape [2, 4] : tensor<4xf32> -> tensor<2x4xf32>
  %b2 = tracec.broadcast_to %b1 shape [3, 2, 4] : tensor<2x4xf32> -> tensor<3x2x4xf32>
  %b3 = tracec.broadcast_to %x shape [4] : tensor<4xf32> -> tensor<4xf32>""", "%b2, %b3"),
     """
CHECK:      [[B:%.+]] = tracec.broadcast_to %x shape [3, 2, 4] : tensor<4xf32> -> tensor<3x2x4xf32>
CHECK-NEXT: func.return [[B]], %x
"""),
    ("cast_to_the_same_dtype",
     _fn(f"%x: {F4}", f"{F4}, tensor<4xf64>", """
  %a = tracec.cast %x dtype f32 : tensor<4xf32> -> tensor<4xf32>
  %b = tracec.cast %x dtype f64 : tensor<4xf32> -> tensor<4xf64>""", "%a, %b"),
     """
CHECK:      [[B:%.+]] = tracec.cast %x dtype f64
CHECK-NEXT: func.return %x, [[B]]
"""),
    ("constant_folding_uses_the_primitive",
     _fn("", "tensor<3xf32>, tensor<f32>, tensor<2x1xf32>", """
  %k = tracec.constant dense<[0.0, 1.0, 2.0]> : tensor<3xf32>
  %e = tracec.exp %k : tensor<3xf32>
  %s = tracec.reduce_sum %k axes [0] : tensor<3xf32> -> tensor<f32>
  %io = tracec.iota shape [2, 1] dtype f32 axis 0 : tensor<2x1xf32>""", "%e, %s, %io"),
     """
CHECK:      [[E:%.+]] = tracec.constant dense<[1.000000e+00, 2.71828198, 7.38905573]> : tensor<3xf32>
CHECK-NEXT: [[S:%.+]] = tracec.constant dense<3.000000e+00> : tensor<f32>
CHECK-NEXT: [[I:%.+]] = tracec.constant dense<{{\\[\\[}}0.000000e+00], [1.000000e+00]]> : tensor<2x1xf32>
CHECK-NEXT: func.return [[E]], [[S]], [[I]]
"""),
    ("no_folding_of_large_results",
     _fn("", "tensor<2000xf32>", """
  %io = tracec.iota shape [2000] dtype f32 axis 0 : tensor<2000xf32>
  %a = tracec.add %io, %io : tensor<2000xf32>""", "%a"),
     """
CHECK:      tracec.iota
CHECK-NEXT: tracec.add
"""),
    ("where_with_a_known_condition",
     _fn(f"%x: {F4}, %y: {F4}, %s: tensor<f32>", f"{F4}, {F4}, {F4}", """
  %t = tracec.constant dense<true> : tensor<i1>
  %f = tracec.constant dense<false> : tensor<4xi1>
  %a = tracec.where %t, %x, %y : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = tracec.where %f, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tracec.where %t, %s, %y : (tensor<i1>, tensor<f32>, tensor<4xf32>) -> tensor<4xf32>""",
         "%a, %b, %c"),
     """
CHECK:      [[C:%.+]] = tracec.broadcast_to %s shape [4] : tensor<f32> -> tensor<4xf32>
CHECK-NEXT: func.return %x, %y, [[C]]
"""),
    ("full_becomes_a_splat",
     _fn(f"%x: {F4}", f"tensor<f32>, tensor<3x4xf32>, {F4}", """
  %a = tracec.full value 2.5 shape [] dtype f32 : tensor<f32>
  %b = tracec.full value 0.0 shape [3, 4] dtype f32 : tensor<3x4xf32>
  %c = tracec.full value 1.0 shape [4] dtype f32 : tensor<4xf32>
  %d = tracec.mul %x, %c : tensor<4xf32>""", "%a, %b, %d"),
     """
CHECK:      [[A:%.+]] = tracec.constant dense<2.500000e+00> : tensor<f32>
CHECK-NEXT: [[Z:%.+]] = tracec.constant dense<0.000000e+00> : tensor<f32>
CHECK-NEXT: [[B:%.+]] = tracec.broadcast_to [[Z]] shape [3, 4]
CHECK-NEXT: func.return [[A]], [[B]], %x
"""),
    ("splat_constants_and_their_arithmetic",
     _fn("", "tensor<40x40xf32>", """
  %a = tracec.constant dense<2.0> : tensor<40x40xf32>
  %b = tracec.constant dense<3.0> : tensor<40x40xf32>
  %c = tracec.mul %a, %b : tensor<40x40xf32>""", "%c"),
     """
CHECK:      [[C:%.+]] = tracec.constant dense<6.000000e+00> : tensor<f32>
CHECK-NEXT: [[B:%.+]] = tracec.broadcast_to [[C]] shape [40, 40] : tensor<f32> -> tensor<40x40xf32>
CHECK-NEXT: func.return [[B]]
"""),
    ("broadcast_operands_are_absorbed",
     _fn("%x: tensor<3x4xf32>, %b: tensor<4xf32>", "tensor<3x4xf32>, tensor<3x4xf32>", """
  %bb = tracec.broadcast_to %b shape [3, 4] : tensor<4xf32> -> tensor<3x4xf32>
  %a = tracec.add %x, %bb : tensor<3x4xf32>
  %n = tracec.neg %bb : tensor<3x4xf32>""", "%a, %n"),
     """
CHECK:      [[BB:%.+]] = tracec.broadcast_to %b shape [3, 4]
CHECK-NEXT: [[A:%.+]] = tracec.add %x, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
CHECK-NEXT: [[N:%.+]] = tracec.neg [[BB]]
CHECK-NEXT: func.return [[A]], [[N]]
"""),
    ("reductions_over_nothing",
     _fn(f"%x: {F4}, %s: tensor<f32>", f"{F4}, tensor<f32>", """
  %a = tracec.reduce_sum %x axes [] : tensor<4xf32> -> tensor<4xf32>
  %b = tracec.reduce_max %s axes [0] : tensor<f32> -> tensor<f32>""", "%a, %b"),
     "CHECK: func.return %x, %s\n"),
    ("reshape_of_a_bias_add_moves_onto_the_product",
     _fn("%x: tensor<5x3x10xf32>, %b: tensor<10xf32>, %c: tensor<1x1x10xf32>",
         "tensor<15x10xf32>, tensor<15x10xf32>", """
  %y = tracec.add %x, %b : (tensor<5x3x10xf32>, tensor<10xf32>) -> tensor<5x3x10xf32>
  %r = tracec.reshape %y shape [15, 10] : tensor<5x3x10xf32> -> tensor<15x10xf32>
  %z = tracec.mul %x, %c : (tensor<5x3x10xf32>, tensor<1x1x10xf32>) -> tensor<5x3x10xf32>
  %s = tracec.reshape %z shape [15, 10] : tensor<5x3x10xf32> -> tensor<15x10xf32>""",
         "%r, %s"),
     """
CHECK:      %[[X:.*]] = tracec.reshape %x shape [15, 10]
CHECK-NEXT: %[[R:.*]] = tracec.add %[[X]], %b : (tensor<15x10xf32>, tensor<10xf32>)
CHECK:      %[[C:.*]] = tracec.reshape %c shape [10]
CHECK:      tracec.mul %{{.*}}, %[[C]] : (tensor<15x10xf32>, tensor<10xf32>)
"""),
    ("reshape_kept_where_an_operand_varies_along_regrouped_dims",
     _fn("%x: tensor<5x3x10xf32>, %b: tensor<3x1xf32>, %d: tensor<5x3x10xf32>",
         "tensor<15x10xf32>, tensor<15x10xf32>", """
  %y = tracec.add %x, %b : (tensor<5x3x10xf32>, tensor<3x1xf32>) -> tensor<5x3x10xf32>
  %r = tracec.reshape %y shape [15, 10] : tensor<5x3x10xf32> -> tensor<15x10xf32>
  %z = tracec.mul %x, %d : (tensor<5x3x10xf32>, tensor<5x3x10xf32>) -> tensor<5x3x10xf32>
  %s = tracec.reshape %z shape [15, 10] : tensor<5x3x10xf32> -> tensor<15x10xf32>""",
         "%r, %s"),
     """
CHECK:      tracec.add %x, %b : (tensor<5x3x10xf32>, tensor<3x1xf32>)
CHECK:      tracec.mul %x, %d : tensor<5x3x10xf32>
"""),
    ("reduce_over_regrouped_leading_dims_reads_the_source",
     _fn("%y: tensor<15x10xf32>", "tensor<10xf32>, tensor<10xf32>, tensor<3xf32>", """
  %r = tracec.reshape %y shape [5, 3, 10] : tensor<15x10xf32> -> tensor<5x3x10xf32>
  %s = tracec.reduce_sum %r axes [0, 1] : tensor<5x3x10xf32> -> tensor<10xf32>
  %m = tracec.reduce_max %r axes [0, 1] : tensor<5x3x10xf32> -> tensor<10xf32>
  %n = tracec.reduce_sum %r axes [0, 2] : tensor<5x3x10xf32> -> tensor<3xf32>""",
         "%s, %m, %n"),
     """
CHECK-DAG:  tracec.reduce_sum %y axes [0] : tensor<15x10xf32> -> tensor<10xf32>
CHECK-DAG:  tracec.reduce_max %y axes [0] : tensor<15x10xf32> -> tensor<10xf32>
CHECK-DAG:  tracec.reduce_sum %{{.*}} axes [0, 2] : tensor<5x3x10xf32> -> tensor<3xf32>
"""),
    ("kernel_bodies_are_left_alone",
     _fn(f"%x: {F4}", F4, """
  %k = tracec.kernel %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %one = tracec.constant dense<1.0> : tensor<f32>
    %m = tracec.mul %a, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    tracec.yield %m : tensor<4xf32>
  }""", "%k"),
     """
CHECK: tracec.mul %a, %one
CHECK: tracec.yield
"""),
]


def test_rules(tmp_path):
    # One module, one FileCheck run: a function per case, as xDSL's lit tests
    # do (CHECK-LABEL starts each case; a FileCheck process costs ~0.3 s).
    text = "".join(t.replace("func.func @f(", f"func.func @{n}(", 1) for n, t, _ in CASES)
    checks = "".join(f"CHECK-LABEL: func.func @{n}(\n" + c.replace("CHECK:      func.func @f(", "CHECK-SAME: ")
                     for n, t, c in CASES)
    filecheck(ir.print_module(canonicalize(text), debuginfo=False), checks, tmp_path)


def test_a_wrong_expectation_fails(tmp_path):
    with pytest.raises(AssertionError):
        filecheck(ir.print_module(canonicalize(CASES[0][1]), debuginfo=False),
                  "CHECK: tracec.mul\n", tmp_path)


@pytest.mark.parametrize("name,text,checks", CASES, ids=[c[0] for c in CASES])
def test_rule_keeps_semantics(name, text, checks):
    module = ir.parse_module(text)
    before = module.clone()
    run_passes([CanonicalizePass(), DeadCodeElimination()], module, verify=True)
    fn = next(op for op in module.walk() if op.name == "func.func")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(ir.shape_of(a.type)).astype(ir.dtype_of(a.type).np)
            for a in fn.body.block.args]
    assert_same(run(module, args), run(before, args), ir.print_module(module))


def test_folding_matches_the_interpreter_bit_for_bit():
    text = _fn("", "tensor<5xf32>, tensor<5xf32>", """
  %k = tracec.constant dense<[0.1, 1.7, -2.2, 3.5, 0.001]> : tensor<5xf32>
  %t = tracec.tanh %k : tensor<5xf32>
  %e = tracec.erf %t : tensor<5xf32>
  %l = tracec.logistic %k : tensor<5xf32>""", "%e, %l")
    folded = canonicalize(text)
    assert not [op for op in folded.walk() if ir.primitive_name(op)]
    for a, b in zip(run(folded, []), run(ir.parse_module(text), [])):
        assert a.tobytes() == b.tobytes()


def test_a_failing_fold_is_left_for_run_time():
    # an index out of range: the run-time bounds check reports it, not the fold
    text = _fn("", "tensor<1xf32>", """
  %a = tracec.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %i = tracec.constant dense<[5]> : tensor<1xi64>
  %p = tracec.take %a, %i axis 0 : (tensor<2xf32>, tensor<1xi64>) -> tensor<1xf32>""", "%p")
    module = canonicalize(text)
    assert any(ir.primitive_name(op) == "take" for op in module.walk())


def test_integer_pow_of_a_negative_exponent_folds_as_torch_truncates():
    text = _fn("", "tensor<3xi64>", """
  %a = tracec.constant dense<[2, 1, -1]> : tensor<3xi64>
  %b = tracec.constant dense<-1> : tensor<i64>
  %p = tracec.pow %a, %b : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>""", "%p")
    module = canonicalize(text)
    assert not [op for op in module.walk() if ir.primitive_name(op) == "pow"]
    assert run(module, [])[0].tolist() == [0, 1, -1]


def test_fold_limit_is_the_documented_bound():
    assert FOLD_LIMIT == 1024
    n = FOLD_LIMIT
    text = _fn("", f"tensor<{n}xf32>", f"""
  %io = tracec.iota shape [{n}] dtype f32 axis 0 : tensor<{n}xf32>
  %a = tracec.add %io, %io : tensor<{n}xf32>""", "%a")
    module = canonicalize(text)
    assert [op.name for op in module.walk()][-2:] == ["tracec.constant", "func.return"]


def test_verifier_checks_full_result_types():
    bad = _fn("%x: tensor<2x3xf32>", "tensor<3xf32>", """
  %s = tracec.reduce_sum %x axes [1] : tensor<2x3xf32> -> tensor<3xf32>""", "%s")
    with pytest.raises(Exception, match=r"result type should be f32\[2\]"):
        ir.parse_module(bad)


def test_transpose_of_single_use_matmul_moves_onto_operands():
    import numpy as np
    import tracec
    a, b = tracec.randn(3, 4), tracec.randn(4, 5)
    f = tracec.compile(lambda a, b: (a.t().t() @ b).t() * 2, backend="interp")
    f(a, b)
    out = f(a, b)
    text = f.ir("optimized")
    # b^T @ a^T: the transposes now apply to the operands, not the product.
    assert "tensor<3x5xf32> -> tensor<5x3xf32>" not in text, text
    np.testing.assert_allclose(out.numpy(), (a.numpy() @ b.numpy()).T * 2, rtol=1e-5)
