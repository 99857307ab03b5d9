"""Issue 15 item 2: ``fn.profile`` and ``TRACEC_PROFILE=1`` time every kernel
of a compiled step (a sanity check of the numbers, not a timing test)."""
import os
import subprocess
import sys

import tracec
from tracec.passes.fusion import count_kernels
from inspect_programs import batch, chain_mm, mlp_step

HERE = os.path.dirname(os.path.abspath(__file__))


def test_profile_of_matmul_then_fused_chain_has_two_kernels(capsys):
    x, w, b = tracec.randn(16, 32), tracec.randn(32, 64), tracec.randn(64)
    f = tracec.compile(chain_mm, backend="cpu")
    prof = f.profile(x, w, b, repeat=3)
    assert sorted(r["kernel"] for r in prof) == ["fused add+lt+where+le+mul", "matmul"]
    mm = next(r for r in prof if r["kernel"] == "matmul")
    assert mm["flops"] == 2 * 16 * 32 * 64 and mm["calls"] == 3
    assert mm["bytes"] == 4 * (16 * 32 + 32 * 64 + 16 * 64)
    assert all(r["lines"] == [f"inspect_programs.py:{chain_mm.__code__.co_firstlineno + 2}"]
               for r in prof)
    out = capsys.readouterr().out
    assert "matmul" in out and "GB/s" in out and "share" in out
    # The compiled function still computes what eager code does.
    assert (f(x, w, b) - chain_mm(x, w, b)).abs().max().item() < 1e-4


def test_mlp_step_profile_adds_up_to_the_step_time():
    step, model, opt = mlp_step("sgd", sizes=(784, 512, 512, 10))
    f = tracec.compile(step, backend="cpu")
    x, y = batch(32, 784)
    prof = f.profile(x, y, repeat=10, echo=False)
    kernels = count_kernels(f._last.optimized())
    assert sum(1 for r in prof if r["kernel"].startswith("fused")) == kernels
    assert sum(1 for r in prof if r["kernel"] == "matmul") == 8   # 3 forward, 3 weight and 2 input grads
    assert prof == sorted(prof, key=lambda r: -r["total_s"])
    assert 0 < prof.kernels_s <= prof.profiled_s and prof.step_s > 0
    # Each profiled call's kernel times add up to its measured time within a
    # factor of 2 (the rest: Python mapping arguments, the entry's own work).
    # Per call, because a shared machine's load changes from call to call.
    ratios = sorted(k / w for w, k in prof.per_call)
    assert len(ratios) == 10 and all(r <= 1 for r in ratios)
    assert ratios[len(ratios) // 2] > 0.5, prof.per_call
    assert 0 < sum(r["share"] for r in prof) <= 1


def test_tracec_profile_env_prints_the_table_at_exit(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import sys; sys.path.insert(0, %r)\n"
        "import tracec\n"
        "from inspect_programs import chain\n"
        "f = tracec.compile(chain, backend='cpu')\n"
        "x, b = tracec.randn(64, 32), tracec.randn(32)\n"
        "for _ in range(4):\n"
        "    f(x, b)\n" % HERE)
    env = dict(os.environ, TRACEC_PROFILE="1")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "chain: 1 kernels" in r.stdout and "fused add+lt+where+le+mul" in r.stdout
