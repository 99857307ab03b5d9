"""Issue 15 item 4: ``tracec explain FILE.py:FUNC --arg ...``."""
import os

import tracec
from tracec.explain import explain
from inspect_programs import batch, mlp_step
from program_runner import tracec_cli

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "inspect_programs.py")


def _cli(*args):
    r = tracec_cli(["explain", *args], timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_explain_a_fused_chain_lists_its_one_kernel():
    out = _cli(PROGRAM + ":chain_mm", "--arg", "x=f32[4,8]", "--arg", "w=f32[8,16]",
               "--arg", "b=f32[16]")
    assert "== kernels: 1 fused kernels ==" in out
    assert "kernel 1: fused add+lt+where+le+mul -> f32[4,16]" in out
    assert "== not fused: 1 ops outside kernels ==" in out
    assert "matmul -> f32[4,16]" in out and "why: a GEMM" in out
    assert "argument x is float32[4, 8]" in out
    # traffic: x, w, the matmul's result, b and the chain's result, once each
    total = 4 * (4 * 8 + 8 * 16 + 4 * 16) + 4 * (4 * 16 + 16 + 4 * 16)
    assert f"({total} B in all)" in out or f"({total / 1e3:.2f} KB in all)" in out


def test_explain_the_mlp_step_names_its_traces_guards_and_kernels():
    step, model, opt = mlp_step("sgd")
    d = explain(step, batch(), echo=None)
    f = tracec.compile(step, backend="interp")
    # (SGD makes its momentum buffer before the first trace: one trace)
    assert d["traces"] == 1 and d["reasons"] == ["first call"]
    assert any(g.startswith("state opt.state[model.0.weight].momentum_buffer is")
               for g, _ in d["guards"])
    assert any("closure variable 'model'" in g for g, _ in d["guards"])
    from tracec.passes.fusion import count_kernels
    f(*batch()), f(*batch())
    assert len(d["kernels"]) == count_kernels(f._last.optimized())
    assert {o["op"] for o in d["not_fused"]} >= {"matmul", "reshape"}
    assert d["read"] > 0 and d["written"] > 0
