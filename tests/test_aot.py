"""``tracec build``: a training step as a shared library, driven from C
with no Python, matches eager training."""
import os
import re
import runpy
import shutil
import subprocess
import textwrap

import numpy as np
import pytest
from program_runner import tracec_cli

USER = textwrap.dedent("""
    import tracec
    from tracec import nn
    import tracec.nn.functional as F

    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = tracec.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
""")

C_MAIN = textwrap.dedent("""
    #include <stdio.h>
    #include <stdlib.h>
    #include "libstep.h"

    static float w0[16*12], b0[16], w1[4*16], b1[4];
    static float m0[16*12], mb0[16], m1[4*16], mb1[4];
    static float g0[16*12], gb0[16], g1[4*16], gb1[4];
    static float x[8*12]; static int64_t y[8];
    static double lr = 0.1;

    int main(int argc, char **argv) {
        FILE *f = fopen(argv[1], "rb");
        if (!f) return 2;
        if (fread(w0, 4, 16*12, f) != 16*12 || fread(b0, 4, 16, f) != 16 ||
            fread(w1, 4, 4*16, f) != 4*16 || fread(b1, 4, 4, f) != 4 ||
            fread(x, 4, 8*12, f) != 8*12 || fread(y, 8, 8, f) != 8) return 3;
        fclose(f);
        for (int step = 0; step < 10; step++) {
            float loss;
            if (step == 5) lr = 0.03;   /* a learning-rate schedule, from C */
            int rc = train_step(x, y, w0, b0, w1, b1, m0, &lr, mb0, m1, mb1, &loss,
                                g0, gb0, g1, gb1);
            if (rc) { fprintf(stderr, "%s\\n", train_step_error_message(rc)); return 4; }
            printf("%.9g\\n", loss);
        }
        printf("%.9g %.9g\\n", w0[0], b1[3]);
        return 0;
    }
""")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="needs a C compiler")
def test_built_training_step_runs_from_c_and_matches_eager(tmp_path):
    user = tmp_path / "step.py"
    user.write_text(USER)
    r = tracec_cli(["build", f"{user}:train_step", "--arg", "x=f32[8,12]", "--arg",
                    "y=i64[8]", "-o", str(tmp_path / "out" / "libstep.so")], timeout=300)
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "out" / "libstep.h").read_text()
    decls = re.sub(r"\s+", " ", re.sub(r"/\*.*?\*/", " ", header, flags=re.S))
    assert "int train_step( const float *x, const int64_t *y, float *model_0_weight," in decls
    assert "state (read and written in place)" in header
    assert "double *opt_lr_group0" in header and "learning rate" in header

    # Initial weights and a batch, from the same script run eagerly here.
    import tracec
    ns = runpy.run_path(str(user))
    model, opt, step = ns["model"], ns["opt"], ns["train_step"]
    tracec.manual_seed(1)
    x = tracec.randn(8, 12)
    y = tracec.randint(0, 4, (8,))
    blob = b"".join(p.detach().numpy().astype(np.float32).tobytes() for p in model.parameters())
    blob += x.numpy().tobytes() + y.numpy().astype(np.int64).tobytes()
    (tmp_path / "init.bin").write_bytes(blob)
    (tmp_path / "main.c").write_text(C_MAIN)
    cc = shutil.which("cc") or shutil.which("gcc")
    out = tmp_path / "out"
    subprocess.run([cc, "-O2", "-o", str(tmp_path / "main"), str(tmp_path / "main.c"),
                    f"-I{out}", f"-L{out}", "-lstep", f"-Wl,-rpath,{out}"], check=True)
    run = subprocess.run([str(tmp_path / "main"), str(tmp_path / "init.bin")],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ.get("PATH", "")})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split()
    c_losses = [float(v) for v in lines[:10]]
    eager = []
    for i in range(10):
        if i == 5:
            opt.param_groups[0]["lr"] = 0.03
        eager.append(step(x, y).item())
    np.testing.assert_allclose(c_losses, eager, rtol=1e-4, atol=1e-5)
    w = list(model.parameters())
    np.testing.assert_allclose([float(lines[10]), float(lines[11])],
                               [w[0].detach().numpy().flat[0], w[3].detach().numpy()[3]],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="needs a C compiler")
def test_library_exports_only_its_api_and_a_failed_call_changes_no_state(tmp_path):
    """Only the step, its error messages, init_state, the argument table and
    the CPU check are exported (the kernels and the worker pool are
    private); a call with an out-of-range
    label fails with a message and leaves parameters and momentum as they
    were, though updates are computed in place."""
    import ctypes
    user = tmp_path / "step.py"
    user.write_text(USER)
    lib_path = tmp_path / "out" / "libstep.so"
    r = tracec_cli(["build", f"{user}:train_step", "--arg", "x=f32[8,12]", "--arg",
                    "y=i64[8]", "-o", str(lib_path)], timeout=300)
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(lib_path))
    assert lib.train_step and lib.train_step_error_message
    if shutil.which("nm"):
        from tracec.aot.cgen import exported
        syms = subprocess.run(["nm", "-D", "--defined-only", str(lib_path)],
                              capture_output=True, text=True).stdout.split()[2::3]
        assert sorted(syms) == sorted(exported("train_step"))
    with pytest.raises(AttributeError):
        lib.tracec_pool_for
    rng = np.random.default_rng(0)
    shapes = [(16, 12), (16,), (4, 16), (4,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    moms = [np.zeros(s, np.float32) for s in shapes]
    grads = [np.zeros(s, np.float32) for s in shapes]
    x = rng.standard_normal((8, 12)).astype(np.float32)
    lr = np.array(0.1)
    loss = np.zeros((), np.float32)

    def call(y):
        p = [a.ctypes.data_as(ctypes.c_void_p) for a in
             [x, y, *params, moms[0], lr, *moms[1:], loss, *grads]]
        return lib.train_step(*p)
    assert call(np.arange(8, dtype=np.int64) % 4) == 0
    before = [a.copy() for a in params + moms]
    bad = np.array([0, 1, 2, 3, 9, 0, 1, 2], np.int64)
    rc = call(bad)
    assert rc > 0
    lib.train_step_error_message.restype = ctypes.c_char_p
    msg = lib.train_step_error_message(rc)
    assert b"is out of bounds" in msg and b"step.py" in msg, msg
    for a, b in zip(params + moms, before):
        np.testing.assert_array_equal(a, b)
    assert call(np.arange(8, dtype=np.int64) % 4) == 0
    assert not np.array_equal(params[0], before[0])


USER_MODES = textwrap.dedent("""
    import tracec
    from tracec import nn
    import tracec.nn.functional as F

    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(16, 4))
    opt = tracec.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def predict(x):
        model.eval()
        with tracec.no_grad():
            return model(x).softmax(-1)
""")


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="needs a C compiler")
@pytest.mark.usefixtures("counter_rng")
def test_a_step_that_calls_train_or_eval_builds_and_matches_eager(tmp_path):
    """``model.train()`` / ``model.eval()`` inside the function set the
    ``training`` flags to constants, which the library has no use for
    (the trace ran in the mode they set): the build refused them as a
    Python side effect ("sets the module attribute training")."""
    from aot_helpers import DRIVER, compile_c, losses, run_driver, tracec_build
    user = tmp_path / "modes.py"
    user.write_text(USER_MODES)
    out = tmp_path / "out"
    # (dropout: the build's process, like this one, draws eagerly from the
    # compiled stream, so the library's masks are the eager run's)
    counter = {"TRACEC_TORCH_RNG": "0"}
    r = tracec_build(user, "train_step", out / "libstep.so", "--arg", "x=f32[8,12]",
                     "--arg", "y=i64[8]", env=counter)
    assert r.returncode == 0, r.stderr
    r = tracec_build(user, "predict", out / "libpred.so", "--arg", "x=f32[8,12]", env=counter)
    assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    y = rng.integers(0, 4, 8).astype(np.int64)
    (tmp_path / "in.bin").write_bytes(x.tobytes() + y.tobytes())
    exe = compile_c(DRIVER, tmp_path / "drv", str(out))
    run = run_driver(exe, tmp_path / "state.bin", tmp_path / "in.bin", 3)
    assert run.returncode == 0, run.stdout + run.stderr
    import tracec
    ns = runpy.run_path(str(user))
    eager = [ns["train_step"](tracec.tensor(x), tracec.tensor(y)).item() for _ in range(3)]
    np.testing.assert_allclose(losses(run.stdout), eager, rtol=1e-4, atol=1e-6)
