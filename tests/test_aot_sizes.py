"""``tracec build --arg x=f32[B,784] --arg y=i64[B]`` (API.md §5, issue 10
item 6): one library serves every batch size; each named size is an
``int64_t`` argument, checked before anything runs."""
import importlib.util
import os
import re
import subprocess
import textwrap

import numpy as np
import pytest

from aot_helpers import compile_c, needs_cc, tracec_build

pytestmark = needs_cc

USER = textwrap.dedent("""
    import tracec
    from tracec import nn
    import tracec.nn.functional as F

    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 16), nn.ReLU(), nn.Linear(16, 10))
    opt = tracec.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def scaled(x):
        if x.shape[0] > 8:
            return x * 2, x.sum(1)
        return x * 3, x.sum(1)
""")

# Walks train_step_args: allocates the state once (init_state), then for
# each batch in argv[1] (int64 B, then x, then y) sizes the inputs from the
# table's named dimensions and calls train_step_argv with B.
DRIVER = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include "libstep.h"

    static int64_t numel(const tracec_arg *a, int64_t B) {
        int64_t n = 1;
        for (int d = 0; d < a->rank; d++) {
            if (a->shape[d] >= 0) n *= a->shape[d];
            else if (a->dim_names && strcmp(a->dim_names[d], "B") == 0) n *= B;
            else return -1;
        }
        return n;
    }

    int main(int argc, char **argv) {
        void *buf[TRAIN_STEP_NUM_ARGS] = {0};
        int64_t n[TRAIN_STEP_NUM_ARGS];
        if (argc < 2 || TRAIN_STEP_NUM_SIZES != 1 || strcmp(train_step_size_names[0], "B"))
            return 1;
        for (int i = 0; i < train_step_num_args; i++) {
            const tracec_arg *a = &train_step_args[i];
            if (a->state_index >= 0) buf[i] = malloc(a->numel * a->itemsize);
            if ((a->numel < 0) != (a->dim_names != 0)) return 2;
        }
        if (train_step_init_state_argv(buf)) return 3;
        FILE *f = fopen(argv[1], "rb");
        int64_t B;
        while (fread(&B, sizeof B, 1, f) == 1) {
            int loss = -1;
            for (int i = 0; i < train_step_num_args; i++) {
                const tracec_arg *a = &train_step_args[i];
                if (a->state_index >= 0) continue;
                n[i] = numel(a, B);
                free(buf[i]);
                buf[i] = malloc(n[i] * a->itemsize + 1);
                if (a->role == TRACEC_ROLE_INPUT &&
                    fread(buf[i], a->itemsize, n[i], f) != (size_t)n[i]) return 4;
                if (a->role == TRACEC_ROLE_OUTPUT && loss < 0) loss = i;
            }
            int rc = train_step_argv(buf, &B);
            if (rc) printf("error %d %s\n", rc, train_step_error_message(rc));
            else printf("loss %.9g\n", *(float *)buf[loss]);
        }
        fclose(f);
        return 0;
    }
""")


def _load_user(path):
    spec = importlib.util.spec_from_file_location(f"_user_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("sizes")
    src = d / "model.py"
    src.write_text(USER)
    r = tracec_build(src, "train_step", d / "libstep.so", "--arg", "x=f32[B,784]",
                     "--arg", "y=i64[B]")
    assert r.returncode == 0, r.stderr
    return d, r.stdout


def test_header_documents_the_named_size(built):
    d, out = built
    header = (d / "libstep.h").read_text()
    assert re.search(r"model_2_bias_grad,\s+/\*[^\n]*\*/\n    int64_t B\s+/\* a named size \*/\);",
                     header)
    assert "x: float32[B, 784], input" in header
    assert "B: int64_t, a named size" in header
    assert " - the size B must be at least 1" in header
    assert "calls\n * with these sizes 1 run code traced at 1: B." in header
    assert "B == 10" not in header      # no guard from a shape comparison
    assert "#define TRAIN_STEP_NUM_SIZES 1" in header
    assert "const int64_t sizes[TRAIN_STEP_NUM_SIZES]" in header
    assert "B: int64_t, a named size" in out


def test_c_program_at_two_batch_sizes_matches_python(built):
    import tracec
    d, _ = built
    exe = compile_c(DRIVER, d / "drive", d)
    rng = np.random.default_rng(0)
    batches = [(n, rng.standard_normal((n, 784)).astype(np.float32),
                rng.integers(0, 10, n).astype(np.int64)) for n in (5, 37, 5, 1, 12, 0, 1)]
    with open(d / "batches.bin", "wb") as f:
        for n, x, y in batches:
            f.write(np.int64(n).tobytes() + x.tobytes() + y.tobytes())
    r = subprocess.run([exe, str(d / "batches.bin")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 7, r.stdout
    # B=0 breaks a check: an error code and a message, the state untouched.
    # B=1 runs the code path traced at B=1.
    assert lines[5].startswith("error -4 the size B must be at least 1 (called with B=0)"), \
        lines[5]
    user = _load_user(d / "model.py")        # the same initial state, eagerly
    want = [user.train_step(tracec.tensor(x), tracec.tensor(y)).item()
            for n, x, y in batches if n > 0]
    got = [float(line.split()[1]) for line in lines if line.startswith("loss ")]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


SQUEEZE = textwrap.dedent("""
    import tracec

    def squeezed(x):
        # A size of 1 changes what this computes (squeeze drops it), so the
        # library needs code traced at 1 for each such size.
        return tracec.softmax(x.squeeze() * 2, -1), x.sum(0)
""")


def test_named_sizes_of_one_run_code_traced_at_one(tmp_path):
    import tracec
    src = tmp_path / "model.py"
    src.write_text(SQUEEZE)
    r = tracec_build(src, "squeezed", tmp_path / "libsq.so", "--arg", "x=f32[B,T]",
                     "--size", "B=3", "--size", "T=4")
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "libsq.h").read_text()
    assert "run code traced at 1: B and T; B; T." in header, header
    drive = textwrap.dedent(r"""
        #include <stdio.h>
        #include "libsq.h"
        int main(void) {
            float x[64], o[64], s[64];
            for (int i = 0; i < 64; i++) x[i] = (float)((i * 7) % 11) / 5.0f;
            long shapes[6][2] = {{3, 4}, {1, 4}, {3, 1}, {1, 1}, {5, 2}, {0, 3}};
            for (int k = 0; k < 6; k++) {
                long B = shapes[k][0], T = shapes[k][1];
                int rc = squeezed(x, o, s, B, T);
                if (rc) { printf("error %d %s\n", rc, squeezed_error_message(rc)); continue; }
                for (long i = 0; i < B * T; i++) printf("%.7g ", o[i]);
                printf("|");
                for (long i = 0; i < T; i++) printf(" %.7g", s[i]);
                printf("\n");
            }
            return 0;
        }
    """)
    exe = compile_c(drive, tmp_path / "drive", tmp_path, lib="sq")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    xs = np.array([((i * 7) % 11) / 5.0 for i in range(64)], np.float32)
    user = _load_user(src)
    for (B, T), line in zip([(3, 4), (1, 4), (3, 1), (1, 1), (5, 2)], lines):
        o, s = user.squeezed(tracec.tensor(xs[:B * T].reshape(B, T)))
        got_o, got_s = line.split("|")
        np.testing.assert_allclose([float(v) for v in got_o.split()], o.numpy().ravel(),
                                   rtol=1e-5, err_msg=f"B={B} T={T}")
        np.testing.assert_allclose([float(v) for v in got_s.split()], s.numpy().ravel(),
                                   rtol=1e-5, err_msg=f"B={B} T={T}")
    assert lines[5].startswith("error -4 the size B must be at least 1 (called with B=0, T=3)"), \
        lines[5]


@pytest.mark.parametrize("target", ["native", "x86-64-v2"])
def test_a_size_guard_taken_by_python_is_checked(tmp_path, target):
    src = tmp_path / "model.py"
    src.write_text(USER)
    r = tracec_build(src, "scaled", tmp_path / "libscaled.so", "--arg", "x=f32[N,3]",
                     "--size", "N=10", "--target", target)
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "libscaled.h").read_text()
    assert "N > 8" in header and "out: float32[N, 3], output" in header \
        and "out1: float32[N], output" in header
    drive = textwrap.dedent(r"""
        #include <stdio.h>
        #include "libscaled.h"
        int main(void) {
            float x[12 * 3], o[12 * 3], s[12];
            for (int i = 0; i < 36; i++) x[i] = (float)i;
            for (int n = 12; n >= 7; n -= 5) {
                int rc = scaled(x, o, s, n);
                if (rc) printf("%d error %d %s\n", n, rc, scaled_error_message(rc));
                else printf("%d ok %g %g %g\n", n, o[0], o[3 * n - 1], s[n - 1]);
            }
            return 0;
        }
    """)
    exe = compile_c(drive, tmp_path / "drive", tmp_path, lib="scaled")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ok, bad = r.stdout.splitlines()
    assert ok == "12 ok 0 70 102", ok
    assert bad.startswith("7 error -4 the function was traced with N > 8 (at ") and \
        bad.endswith("(called with N=7)"), bad


def test_a_size_the_function_fixes_is_a_build_error(tmp_path):
    src = tmp_path / "model.py"
    src.write_text(USER + textwrap.dedent("""
        def fixed(x):
            return x.reshape(int(x.shape[0]) * 3)
    """))
    r = tracec_build(src, "fixed", tmp_path / "libfixed.so", "--arg", "x=f32[N,3]")
    assert r.returncode != 0
    assert "the size N (x[0]) cannot be a parameter: the function fixes it to 23" in r.stderr
    assert "Traceback" not in r.stderr


def test_malformed_size_arguments(tmp_path):
    src = tmp_path / "model.py"
    src.write_text(USER)
    r = tracec_build(src, "scaled", tmp_path / "l.so", "--arg", "x=f32[N-1,3]")
    assert r.returncode != 0 and "neither a number nor a name" in r.stderr
    r = tracec_build(src, "scaled", tmp_path / "l.so", "--arg", "x=f32[N,3]", "--size", "M=4")
    assert r.returncode != 0 and "no --arg has a size of that name" in r.stderr
    r = tracec_build(src, "scaled", tmp_path / "l.so", "--arg", "x=f32[N,3]", "--size", "N=1")
    assert r.returncode != 0 and "value >= 2" in r.stderr
    assert os.path.exists(tmp_path / "l.so") is False
