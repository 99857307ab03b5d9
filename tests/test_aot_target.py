"""``tracec build --target``: code for a portable x86-64 level, recorded in
the library, checked against the CPU before any generated code runs."""
import platform
import shutil
import subprocess

import numpy as np
import pytest

from aot_helpers import (DRIVER, USER, compile_c, losses, needs_cc, run_driver,
                         tracec_build)

pytestmark = [needs_cc, pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                           reason="x86-64 levels")]

ARGS = ("--arg", "x=f32[8,12]", "--arg", "y=i64[8]")


def host_has(flag):
    with open("/proc/cpuinfo") as f:
        return flag in f.read().split()


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("aot_target")
    (d / "step.py").write_text(USER)
    rng = np.random.default_rng(0)
    (d / "inputs.bin").write_bytes(rng.standard_normal((8, 12)).astype(np.float32).tobytes() +
                                   (np.arange(8) % 4).astype(np.int64).tobytes())
    return d


def build_and_compile(d, name, *extra, env=None):
    out = d / name
    r = tracec_build(d / "step.py", "train_step", out / "libstep.so", *ARGS, *extra, env=env)
    assert r.returncode == 0, r.stderr
    return out, compile_c(DRIVER, out / "drive", out)


def test_codegen_targets_a_level_only_inside_targeting():
    from tracec.aot import TARGET_NAMES
    from tracec.backends.cpu import codegen
    assert set(TARGET_NAMES) == {"native", *codegen.TARGETS}
    host_id = codegen.target_id()
    with codegen.targeting("x86-64-v3"):
        assert codegen.target()[1] == "x86-64-v3"
        assert codegen.has_feature("avx2") and not codegen.has_feature("avx512f")
        assert codegen.vector_bits() == 256
        assert codegen.target_id() != host_id      # the disk cache key differs
    assert codegen.target_id() == host_id
    with pytest.raises(ValueError, match="unknown target"):
        with codegen.targeting("x86-64-v9"):
            pass


def test_x86_64_v3_library_runs_and_matches_native(src):
    if not (host_has("avx2") and host_has("fma")):
        pytest.skip("this CPU is not x86-64-v3")
    native, nexe = build_and_compile(src, "native")
    v3, v3exe = build_and_compile(src, "v3", "--target", "x86-64-v3")
    assert "Built for: x86-64-v3: x86-64-v3 (" in (v3 / "libstep.h").read_text()
    runs = [run_driver(e, o / "state.bin", src / "inputs.bin", 5) for e, o in
            ((nexe, native), (v3exe, v3))]
    for r in runs:
        assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_allclose(losses(runs[1].stdout), losses(runs[0].stdout), rtol=1e-4)
    if shutil.which("objdump"):
        # The level decides the instruction set: AVX2 (ymm), no AVX-512 (zmm).
        asm = subprocess.run(["objdump", "-d", str(v3 / "libstep.so")], capture_output=True,
                             text=True).stdout
        assert "ymm" in asm and "zmm" not in asm


def test_a_cpu_without_the_targets_features_is_refused_not_sigill(src):
    """Simulated with the test hook: a library built with
    TRACEC_AOT_TEST_HOOKS=1 treats $TRACEC_TEST_CPU_LACKS's features as
    missing (a library built without it never reads that variable)."""
    hooked, hexe = build_and_compile(src, "hooked", "--target", "x86-64-v2",
                                     env={"TRACEC_AOT_TEST_HOOKS": "1"})
    r = run_driver(hexe, hooked / "s.bin", src / "inputs.bin", 2,
                   env={"TRACEC_TEST_CPU_LACKS": "sse4.2,popcnt"})
    assert r.returncode == 4, r.stdout + r.stderr          # an error code, not a signal
    assert "error -2 this library was built for x86-64-v2 (tracec build --target); " \
           "this CPU lacks sse4.2, popcnt" in r.stdout
    r = run_driver(hexe, hooked / "s.bin", src / "inputs.bin", 2)
    assert r.returncode == 0 and len(losses(r.stdout)) == 2, r.stdout + r.stderr
    plain, pexe = build_and_compile(src, "plain", "--target", "x86-64-v2")
    r = run_driver(pexe, plain / "s.bin", src / "inputs.bin", 2,
                   env={"TRACEC_TEST_CPU_LACKS": "sse4.2,popcnt"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TRACEC_TEST_CPU_LACKS" not in (plain / "libstep.so").read_bytes().decode("latin-1")


@pytest.mark.skipif(host_has("avx512f"), reason="this CPU has AVX-512: nothing to refuse")
def test_a_real_cpu_without_avx512_refuses_an_x86_64_v4_library(src):
    v4, exe = build_and_compile(src, "v4", "--target", "x86-64-v4")
    r = run_driver(exe, v4 / "s.bin", src / "inputs.bin", 1)
    assert r.returncode == 4 and "this CPU lacks avx512f" in r.stdout, r.stdout + r.stderr


def test_unknown_target_is_a_one_line_error(src):
    r = tracec_build(src / "step.py", "train_step", src / "x" / "libstep.so", *ARGS,
                     "--target", "pentium4")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "pentium4" in errors[0] and "x86-64-v3" in errors[0]
