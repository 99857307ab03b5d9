"""``tracec build``: the initial state embedded in the library
(``init_state``, ``--weights``), the argument table walked from C and
C++, and the files' modes."""
import ctypes
import os
import runpy
import stat
import subprocess

import numpy as np
import pytest

import tracec
from aot_helpers import (CC, DRIVER, USER, compile_c, losses, needs_cc, parse_table,
                         run_driver, tracec_build)

pytestmark = needs_cc

ROLE = {"input": 1, "output": 2, "parameter": 3, "buffer": 4, "optimizer_state": 5,
        "hyperparameter": 6, "rng_state": 7, "state": 8, "gradient": 9}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("aot_state")
    (d / "step.py").write_text(USER)
    r = tracec_build(d / "step.py", "train_step", d / "out" / "libstep.so",
                     "--arg", "x=f32[8,12]", "--arg", "y=i64[8]", umask=0o022)
    assert r.returncode == 0, r.stderr
    exe = compile_c(DRIVER, d / "drive", d / "out")
    return d, exe


def fresh_script(d):
    """The user script run anew here: the model as Python starts it."""
    return runpy.run_path(str(d / "step.py"))


def batch(d):
    gen = tracec.Generator().manual_seed(3)
    x = tracec.randn(8, 12, generator=gen)
    y = tracec.randint(0, 4, (8,), generator=gen)
    (d / "inputs.bin").write_bytes(x.numpy().tobytes() + y.numpy().astype(np.int64).tobytes())
    return x, y


def read_state(path, rows):
    raw = (path).read_bytes()
    out, pos = {}, 0
    for r in rows:
        if r["state_index"] < 0:
            continue
        n = r["numel"] * r["itemsize"]
        dtype = {"float32": np.float32, "float64": np.float64, "int64": np.int64}[r["dtype"]]
        out[r["source"]] = np.frombuffer(raw[pos:pos + n], dtype).reshape(r["shape"])
        pos += n
    assert pos == len(raw)
    return out


def test_table_walked_from_c_init_state_and_training_match_python(built):
    d, exe = built
    x, y = batch(d)
    run = run_driver(exe, d / "state.bin", d / "inputs.bin", 6)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = parse_table(run.stdout)
    by = {r["source"]: r for r in rows}
    ns = fresh_script(d)
    model, opt, step = ns["model"], ns["opt"], ns["train_step"]
    # The table: every parameter and buffer, with its shape, dtype and role.
    for name, p in model.named_parameters():
        r = by[f"model.{name}"]
        assert (r["shape"], r["dtype"], r["role"], r["access"]) == \
            (tuple(p.shape), "float32", ROLE["parameter"], 3)
        assert by[f"model.{name}.grad"]["role"] == ROLE["gradient"]
        assert by[f"model.{name}.grad"]["state_index"] == -1    # written, not state
        assert by[f"opt.exp_avg.model.{name}"]["role"] == ROLE["optimizer_state"]
    assert by["model.1.num_batches_tracked"]["dtype"] == "int64"
    assert by["model.1.running_var"]["role"] == ROLE["buffer"]
    assert by["opt.lr.group0"]["role"] == ROLE["hyperparameter"]
    assert (by["x"]["role"], by["x"]["access"], by["x"]["shape"]) == (ROLE["input"], 1, (8, 12))
    assert (by["out"]["role"], by["out"]["access"], by["out"]["rank"]) == (ROLE["output"], 2, 0)
    assert all(r["fixed"] for r in rows)          # no named sizes yet
    state_rows = [r for r in rows if r["state_index"] >= 0]
    assert [r["state_index"] for r in state_rows] == list(range(len(state_rows)))
    # init_state wrote the model as the script starts it, fresh optimizer state.
    state = read_state(d / "state.bin", rows)
    for name, t in model.state_dict().items():
        np.testing.assert_array_equal(state[f"model.{name}"], t.numpy())
    for src, v in state.items():
        if src.startswith("opt.") and not src.startswith("opt.lr"):
            assert not v.any(), src
    assert state["opt.lr.group0"] == 0.01
    # The C-driven steps from there are Python's eager steps.
    eager = [step(x, y).item() for _ in range(6)]
    np.testing.assert_allclose(losses(run.stdout), eager, rtol=1e-4, atol=1e-5)


def test_header_compiles_as_cpp_and_init_state_takes_the_state_in_order(built):
    d, _ = built
    cxx = subprocess.run(["sh", "-c", "command -v c++ || command -v g++"],
                         capture_output=True, text=True).stdout.strip()
    if not cxx:
        pytest.skip("needs a C++ compiler")
    src = r"""
        #include <cstdio>
        #include <vector>
        #include "libstep.h"
        #include "libstep.h"   // twice: guarded
        int main() {
            std::vector<std::vector<char>> mem(TRAIN_STEP_NUM_ARGS);
            void *argv[TRAIN_STEP_NUM_ARGS];
            for (int i = 0; i < train_step_num_args; i++) {
                mem[i].resize(train_step_args[i].numel * train_step_args[i].itemsize + 1);
                argv[i] = mem[i].data();
            }
            int rc = train_step_init_state_argv(argv);
            // The positional form writes the same values.
            float w0[16 * 12];
            double lr = 0;
            rc |= train_step_init_state(w0, @STATE@);
            std::printf("%d %d %g %s %s\n", rc, w0[5] == ((float *)argv[2])[5], lr,
                        train_step_args[14].source, train_step_target);
            return rc;
        }
    """
    # State 0 is model.0.weight, 2 num_batches_tracked (int64), 12 the
    # learning rate; the step's arguments 0 and 1 are x and y.
    args = ["(float *)argv[3]", "(int64_t *)argv[4]"] + \
        [f"(float *)argv[{i}]" if i != 14 else "&lr" for i in range(5, 30)]
    src = src.replace("@STATE@", ", ".join(args))
    exe = compile_c(src, d / "cpp_main", d / "out", name="main.cpp", compiler=cxx)
    run = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    rc, same, lr, name, target = run.stdout.split()[:5]
    assert (rc, same, float(lr), name) == ("0", "1", 0.01, "opt.lr.group0")
    assert target == "native:"


def load_init_state(lib_path):
    """Call init_state through ctypes: ``{source: array}`` of the state."""
    lib = ctypes.CDLL(str(lib_path))

    class Arg(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("source", ctypes.c_char_p),
                    ("dtype", ctypes.c_char_p), ("itemsize", ctypes.c_int32),
                    ("rank", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("dim_names", ctypes.c_void_p), ("numel", ctypes.c_int64),
                    ("role", ctypes.c_int32), ("access", ctypes.c_int32),
                    ("state_index", ctypes.c_int32)]
    n = ctypes.c_int32.in_dll(lib, "train_step_num_args").value
    table = (Arg * n).in_dll(lib, "train_step_args")
    arrays = [np.zeros(tuple(a.shape[k] for k in range(a.rank)),
                       {b"float32": np.float32, b"float64": np.float64,
                        b"int64": np.int64}[a.dtype]) for a in table]
    ptrs = (ctypes.c_void_p * n)(*[a.ctypes.data for a in arrays])
    assert lib.train_step_init_state_argv(ptrs) == 0
    return {a.source.decode(): arr for a, arr in zip(table, arrays) if a.state_index >= 0}


def test_weights_round_trip_tracec_save_and_safetensors(built, tmp_path):
    d, _ = built
    ns = fresh_script(d)
    model = ns["model"]
    with tracec.no_grad():
        for p in model.parameters():
            p.mul_(-3.0).add_(0.5)
        model[1].running_mean.fill_(0.25)
    sd = model.state_dict()
    tracec.save(sd, str(tmp_path / "ckpt.pt"))
    from safetensors.numpy import save_file
    save_file({f"model.{k}": np.ascontiguousarray(v.numpy()) for k, v in sd.items()},
              str(tmp_path / "ckpt.safetensors"))
    for ckpt in ("ckpt.pt", "ckpt.safetensors"):
        lib = tmp_path / ckpt.replace(".", "_") / "libstep.so"
        r = tracec_build(d / "step.py", "train_step", lib, "--arg", "x=f32[8,12]",
                         "--arg", "y=i64[8]", "--weights", str(tmp_path / ckpt))
        assert r.returncode == 0, r.stderr
        state = load_init_state(lib)
        for k, v in sd.items():
            np.testing.assert_array_equal(state[f"model.{k}"], v.numpy(), err_msg=ckpt)
        assert state["opt.exp_avg_sq.model.0.weight"].sum() == 0


def test_weights_from_a_torch_training_checkpoint(built, tmp_path):
    """PyTorch's tutorial format, written by the real torch.save: the model's
    and the optimizer's state dicts under names of the user's choosing."""
    torch = pytest.importorskip("torch")
    d, _ = built
    ns = fresh_script(d)
    sd = {k: (torch.tensor(7) if k.endswith("num_batches_tracked") else
              torch.from_numpy(np.asarray(v.numpy() * -2.0 + 0.25, np.float32)))
          for k, v in ns["model"].state_dict().items()}
    opt_sd = ns["opt"].state_dict()
    torch.save({"epoch": 3, "model_state_dict": sd, "loss": 0.5,
                "optimizer_state_dict": {"state": {}, "param_groups": [
                    {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
                    for g in opt_sd["param_groups"]]}},
               str(tmp_path / "train.tar"))
    lib = tmp_path / "t" / "libstep.so"
    r = tracec_build(d / "step.py", "train_step", lib, "--arg", "x=f32[8,12]",
                     "--arg", "y=i64[8]", "--weights", str(tmp_path / "train.tar"))
    assert r.returncode == 0, r.stderr
    state = load_init_state(lib)
    for k, v in sd.items():
        np.testing.assert_array_equal(state[f"model.{k}"], v.numpy(), err_msg=k)


def test_weights_that_do_not_fit_give_one_line_errors(built, tmp_path):
    d, _ = built
    tracec.save({"w": tracec.zeros(3)}, str(tmp_path / "other.pt"))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint at all")
    for ckpt, needle in (("other.pt", 'Unexpected key(s) in state_dict: "w"'),
                         ("junk.pt", "--weights"), ("missing.pt", "no such file")):
        r = tracec_build(d / "step.py", "train_step", tmp_path / "o" / "libstep.so",
                         "--arg", "x=f32[8,12]", "--arg", "y=i64[8]",
                         "--weights", str(tmp_path / ckpt))
        assert r.returncode != 0 and needle in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        assert len([l for l in r.stderr.splitlines() if l.startswith("Error")]) == 1


def test_files_get_the_modes_cc_gives_under_the_umask(built, tmp_path):
    d, _ = built
    out = d / "out"
    assert stat.S_IMODE(os.stat(out / "libstep.so").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(out / "libstep.h").st_mode) == 0o644
    r = tracec_build(d / "step.py", "train_step", tmp_path / "libstep.so", "--arg",
                     "x=f32[8,12]", "--arg", "y=i64[8]", umask=0o027)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "libstep.so").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "libstep.h").st_mode) == 0o640
    # What cc itself writes under that umask, for comparison.
    (tmp_path / "t.c").write_text("int f(void) { return 0; }\n")
    subprocess.run(["sh", "-c", f"umask 027 && {CC} -shared -fPIC -o {tmp_path}/libt.so "
                    f"{tmp_path}/t.c"], check=True)
    assert stat.S_IMODE(os.stat(tmp_path / "libt.so").st_mode) == 0o750


def test_a_scheduler_stepped_inside_the_step_is_refused(tmp_path):
    """tracec.compile lifts the scheduler's numbers and writes them back in
    Python (tracec.lifted_state); a C library cannot, so the build says
    so instead of dropping the schedule."""
    (tmp_path / "step.py").write_text(USER.replace(
        "opt.step()", "opt.step()\n    sched.step()").replace(
        "def train_step", "sched = tracec.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)\n\n"
        "def train_step"))
    r = tracec_build(tmp_path / "step.py", "train_step", tmp_path / "libstep.so",
                     "--arg", "x=f32[8,12]", "--arg", "y=i64[8]")
    assert r.returncode != 0
    assert "changes Python numbers at every call (sched.last_epoch" in r.stderr, r.stderr
    assert "adam.param_groups[0]['lr']" in r.stderr
    assert not (tmp_path / "libstep.so").exists()


def test_a_decision_on_tensor_data_is_refused(tmp_path):
    """tracec.compile speculates on it (and runs a mispredicted call
    eagerly); a C library cannot, so the build names the line."""
    (tmp_path / "step.py").write_text(USER.replace(
        "    opt.step()\n", "    if bool(tracec.isfinite(loss)):\n        opt.step()\n"))
    r = tracec_build(tmp_path / "step.py", "train_step", tmp_path / "libstep.so",
                     "--arg", "x=f32[8,12]", "--arg", "y=i64[8]")
    assert r.returncode != 0
    assert "decides in Python on tensor data (bool() or an integer's item() at" in r.stderr
    assert "step.py:" in r.stderr
    assert not (tmp_path / "libstep.so").exists()
