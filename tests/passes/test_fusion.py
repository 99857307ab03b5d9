"""``tracec-fuse`` and the whole optimizing pipeline: kernel counts on known
programs, the kernel invariant, placement, results against the unoptimized
IR and eager, and printing round trips."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
import tracec.ir as ir
from passes_helpers import (assert_same, bias_relu_scale, count_kernels, filecheck, function,
                            make_mlp_step, mlp_params, optimize, run, softmax_by_hand, traced)
from tracec.passes.fusion import FusePass, check_kernel
from tracec.passes.pipeline import run_passes

RNG = np.random.default_rng(0)


def _data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _optimized_and_checked(fn, *arrays):
    """Trace ``fn`` on tensors of ``arrays``; check that the optimized module
    computes what the unoptimized one and eager do; return it."""
    module = traced(fn, *[tracec.tensor(a) for a in arrays])
    before = module.clone()
    optimize(module)
    text = ir.print_module(module, debuginfo=False)
    eager = fn(*[tracec.tensor(a) for a in arrays])
    eager = [t.numpy() for t in (eager if isinstance(eager, tuple) else (eager,))]
    assert_same(run(module, arrays), run(before, arrays), text)
    assert_same(run(module, arrays), eager, text)
    return module, text


def test_bias_relu_scale_is_one_kernel(tmp_path):
    module, text = _optimized_and_checked(bias_relu_scale, _data(4, 8), _data(8))
    assert count_kernels(module) == 1, text
    filecheck(text, """
CHECK:      func.func
CHECK-NEXT:   [[K:%.+]] = tracec.kernel %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
CHECK-NEXT:   ^bb0([[X:%.+]]: tensor<4x8xf32>, [[B:%.+]]: tensor<8xf32>):
CHECK-NEXT:     [[S:%.+]] = tracec.add [[X]], [[B]]
CHECK-NEXT:     [[Z:%.+]] = tracec.constant dense<0.000000e+00> : tensor<f32>
CHECK-NEXT:     [[L:%.+]] = tracec.lt [[S]], [[Z]]
CHECK-NEXT:     [[N:%.+]] = tracec.where [[L]], [[Z]], [[S]]
CHECK-NEXT:     [[C:%.+]] = tracec.le [[S]], [[Z]]
CHECK-NEXT:     [[R:%.+]] = tracec.where [[C]], [[N]], [[S]]
CHECK-NEXT:     [[TWO:%.+]] = tracec.constant dense<2.000000e+00> : tensor<f32>
CHECK-NEXT:     [[M:%.+]] = tracec.mul [[R]], [[TWO]]
CHECK-NEXT:     tracec.yield [[M]] : tensor<4x8xf32>
CHECK-NEXT:   }
CHECK-NEXT:   func.return [[K]]
""", tmp_path)


def test_softmax_by_hand_is_three_kernels():
    module, text = _optimized_and_checked(softmax_by_hand, _data(5, 7))
    # max | sub, exp, sum (exp also yielded) | div
    assert count_kernels(module) == 3, text


def test_library_softmax_is_at_most_three_kernels():
    module, text = _optimized_and_checked(lambda x: (x * 3.0).softmax(-1), _data(5, 7))
    assert 1 <= count_kernels(module) <= 3, text


def test_mlp_training_step_fuses_its_elementwise_tails():
    params = mlp_params()
    module = traced(make_mlp_step(params), tracec.tensor(_data(32, 8)),
                    tracec.tensor(_data(32, 4)))
    before = module.clone()
    optimize(module)
    text = ir.print_module(module, debuginfo=False)
    # Forward: bias+relu | bias+sub+square+sum | mean's scale.
    # Backward: loss grad (+ its column sum) | relu mask (+ column sum).
    # Updates: one `p - lr * g` per parameter.
    assert count_kernels(module) == 9, text
    prims = {ir.primitive_name(op) for op in function(module).body.block.ops}
    assert prims <= {"matmul", "transpose", None}, text
    arrays = [_data(*ir.shape_of(a.type)) for a in function(module).body.block.args]
    assert_same(run(module, arrays), run(before, arrays), text)


def test_compiled_mlp_training_matches_eager():
    eager_params, compiled_params = mlp_params(seed=1), mlp_params(seed=1)
    eager_step = make_mlp_step(eager_params)
    step = tracec.compile(make_mlp_step(compiled_params), backend="interp")
    for _ in range(3):
        x, y = _data(32, 8), _data(32, 4)
        want = eager_step(tracec.tensor(x), tracec.tensor(y))
        got = step(tracec.tensor(x), tracec.tensor(y))
        assert np.allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(compiled_params, eager_params):
        assert np.allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert step.cache_info().hits == 2
    optimized = ir.parse_module(step.ir("optimized"))
    assert count_kernels(optimized) == 9, step.ir("optimized")


@pytest.mark.parametrize("fn,shapes", [
    (bias_relu_scale, [(4, 8), (8,)]),
    (softmax_by_hand, [(5, 7)]),
])
def test_optimized_module_round_trips(fn, shapes):
    module, _ = _optimized_and_checked(fn, *[_data(*s) for s in shapes])
    for debuginfo in (True, False):
        again = ir.parse_module(ir.print_module(module, debuginfo=debuginfo))
        assert again.is_structurally_equivalent(module)


def test_mlp_module_round_trips_with_locations():
    module = traced(make_mlp_step(mlp_params()), tracec.tensor(_data(32, 8)),
                    tracec.tensor(_data(32, 4)))
    optimize(module)
    text = ir.print_module(module)
    again = ir.parse_module(text)
    assert again.is_structurally_equivalent(module)
    assert ir.print_module(again) == text
    kernel = next(op for op in again.walk() if isinstance(op, ir.KernelOp))
    assert ir.loc_tuple(kernel) is not None and ir.loc_tuple(kernel)[0].endswith(".py")


# --- the invariant and placement, on hand-written IR ----------------------------------

def _fuse(text):
    module = ir.parse_module(text)
    before = module.clone()
    optimize(module)
    fn = function(module)
    arrays = [RNG.standard_normal(ir.shape_of(a.type)).astype(ir.dtype_of(a.type).np)
              for a in fn.body.block.args]
    out = ir.print_module(module, debuginfo=False)
    assert_same(run(module, arrays), run(before, arrays), out)
    return module, out


PLACEMENT = """
func.func @f(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %a = tracec.exp %x : tensor<4x4xf32>
  %m = tracec.matmul %a, %w : tensor<4x4xf32>
  %c = tracec.add %a, %m : tensor<4x4xf32>
  %bb = tracec.broadcast_to %b shape [4, 4] : tensor<4xf32> -> tensor<4x4xf32>
  %n = tracec.neg %bb : tensor<4x4xf32>
  %d = tracec.mul %c, %n : tensor<4x4xf32>
  %s = tracec.reduce_sum %d axes [1] : tensor<4x4xf32> -> tensor<4xf32>
  %t = tracec.tanh %s : tensor<4xf32>
  %m2 = tracec.matmul %d, %w : tensor<4x4xf32>
  func.return %m2, %t : tensor<4x4xf32>, tensor<4xf32>
}
"""


def test_placement_yields_and_broadcasts(tmp_path):
    module, text = _fuse(PLACEMENT)
    # exp feeds a matmul *before* the root, so it cannot join the later
    # group; the reduction ends its group; tanh after it is its own kernel.
    filecheck(text, """
CHECK:      [[A:%.+]] = tracec.kernel %x
CHECK:        tracec.exp
CHECK:      [[M:%.+]] = tracec.matmul [[A]], %w
CHECK-NEXT: [[D:%.+]], [[S:%.+]] = tracec.kernel [[A]], [[M]], %b : {{.*}} -> (tensor<4x4xf32>, tensor<4xf32>)
CHECK-NEXT: ^bb0([[I0:%.+]]: tensor<4x4xf32>, [[I1:%.+]]: tensor<4x4xf32>, [[I2:%.+]]: tensor<4xf32>):
CHECK-NEXT:   [[C:%.+]] = tracec.add [[I0]], [[I1]]
CHECK-NEXT:   [[BB:%.+]] = tracec.broadcast_to [[I2]] shape [4, 4]
CHECK-NEXT:   [[N:%.+]] = tracec.neg [[BB]]
CHECK-NEXT:   [[DD:%.+]] = tracec.mul [[C]], [[N]]
CHECK-NEXT:   [[SS:%.+]] = tracec.reduce_sum [[DD]] axes [1]
CHECK-NEXT:   tracec.yield [[DD]], [[SS]] : tensor<4x4xf32>, tensor<4xf32>
CHECK-NEXT: }
CHECK-NEXT: [[T:%.+]] = tracec.kernel [[S]]
CHECK:        tracec.tanh
CHECK:      tracec.matmul [[D]], %w
""", tmp_path)
    assert count_kernels(module) == 3


def test_fusing_again_changes_nothing():
    module, text = _fuse(PLACEMENT)
    run_passes([FusePass()], module, verify=True)
    assert ir.print_module(module, debuginfo=False) == text


def test_small_operands_used_only_inside_are_recomputed_and_big_constants_are_inputs():
    _, text = _fuse("""
func.func @f(%x: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3xf32> {
  %k = tracec.constant dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %e = tracec.exp %b : tensor<4xf32>
  %y = tracec.mul %x, %e : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %z = tracec.add %y, %k : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
  %m = tracec.reduce_max %z axes [1] : tensor<3x4xf32> -> tensor<3xf32>
  func.return %m : tensor<3xf32>
}
""")
    assert text.count("tracec.kernel") == 1, text
    assert "tracec.kernel %b, %x, %k" in text, text  # inputs in order of first use


def test_smaller_values_used_outside_are_not_yielded():
    module, text = _fuse("""
func.func @f(%x: tensor<3x4xf32>, %b: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<4xf32>) {
  %e = tracec.exp %b : tensor<4xf32>
  %y = tracec.mul %x, %e : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  func.return %y, %e : tensor<3x4xf32>, tensor<4xf32>
}
""")
    assert count_kernels(module) == 2, text


def test_a_bool_mask_and_a_reduction_share_a_kernel():
    module, text = _fuse("""
func.func @f(%x: tensor<3x4xf32>) -> tensor<3xi64> {
  %z = tracec.constant dense<0.0> : tensor<f32>
  %g = tracec.gt %x, %z : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xi1>
  %n = tracec.reduce_sum %g axes [1] : tensor<3x4xi1> -> tensor<3xi64>
  func.return %n : tensor<3xi64>
}
""")
    assert count_kernels(module) == 1, text


def test_check_kernel_rejects_a_broadcast_of_a_computed_value():
    module = ir.parse_module("""
func.func @f(%b: tensor<4xf32>) -> tensor<3x4xf32> {
  %k = tracec.kernel %b : (tensor<4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = tracec.exp %a : tensor<4xf32>
    %bb = tracec.broadcast_to %e shape [3, 4] : tensor<4xf32> -> tensor<3x4xf32>
    tracec.yield %bb : tensor<3x4xf32>
  }
  func.return %k : tensor<3x4xf32>
}
""")
    kernel = next(op for op in module.walk() if isinstance(op, ir.KernelOp))
    with pytest.raises(AssertionError, match="broadcast_to only of a kernel input"):
        check_kernel(kernel)


def test_nn_and_optim_mlp_if_available():
    try:
        from tracec import nn
        import tracec.nn.functional as F
        sgd = tracec.optim.SGD
        nn.Linear, nn.ReLU, nn.Sequential, F.mse_loss  # noqa: B018
    except (ImportError, AttributeError) as e:
        pytest.skip(f"tracec.nn / tracec.optim not available: {e}")

    def build():
        tracec.manual_seed(3)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        opt = sgd(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return model, step

    eager_model, eager_step = build()
    model, step = build()
    step = tracec.compile(step, backend="interp")
    for _ in range(3):
        x, y = _data(32, 8), _data(32, 4)
        want = eager_step(tracec.tensor(x), tracec.tensor(y)).item()
        assert np.isclose(step(tracec.tensor(x), tracec.tensor(y)).item(), want, rtol=1e-5)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        assert np.allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert count_kernels(ir.parse_module(step.ir("optimized"))) <= 9, step.ir("optimized")


def _ops(module) -> int:
    return ir.print_module(module, debuginfo=False).count("\n")


def test_a_deep_scalar_dag_is_not_copied_per_path():
    """atan2 of 0-d tensors (a composite of ~100 one-element ops, many read
    twice) became 172,000 ops when each one-element value was copied per
    user, recursively, and its LLVM compile did not end. A program of
    one-element values now fuses whole, without copies."""
    a, b = np.float32(0.3), np.float32(-0.2)
    module, _ = _optimized_and_checked(lambda x, y: tracec.atan2(x, y), a, b)
    assert count_kernels(module) == 1 and _ops(module) < 200
    # read by a larger kernel, the copies stay bounded
    module, _ = _optimized_and_checked(lambda x, y, z: tracec.atan2(x, y) * z, a, b,
                                       _data(3, 4))
    assert _ops(module) < 2000
    f = tracec.compile(lambda x, y: tracec.atan2(x, y))
    for _ in range(2):
        np.testing.assert_allclose(f(tracec.tensor(a), tracec.tensor(b)).item(),
                                   np.arctan2(a, b), rtol=1e-6)


def test_a_scalar_read_by_many_kernels_is_copied_into_each():
    """A learning rate computed once (one element) and read by several
    larger elementwise chains folds into each of their kernels."""
    def step(lr, p1, p2, g1, g2):
        s = (lr * 0.5).neg()
        return p1 + s * g1, p2 + s * g2
    module, text = _optimized_and_checked(step, np.float32(0.1), _data(4), _data(3, 2),
                                          _data(4), _data(3, 2))
    assert count_kernels(module) == 2, text
