"""The program tests' forked runner (``program_runner.run_cli``) gives what
a fresh ``python -m tracec.cli`` gives."""
import os
import pathlib
import subprocess
import sys

import pytest

from program_runner import run_cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

PROG = """
import os, sys, torch
print(sys.argv[1:], os.getcwd() == os.path.realpath(sys.argv[1]), os.environ.get("TRACEC_CACHE_DIR"))
print(torch.__name__, torch.ones(2).sum().item(), __name__, sys.path[0] == os.path.dirname(__file__))
print("to stderr", file=sys.stderr)
print(sys.stdin.read() == "")
raise SystemExit(int(sys.argv[2]))
"""


@pytest.mark.parametrize("code", ["0", "3"])
def test_forked_run_equals_a_fresh_interpreter(tmp_path, code):
    prog = tmp_path / "prog.py"
    prog.write_text(PROG)
    env = {**ENV, "TRACEC_CACHE_DIR": str(tmp_path / "cache")}
    args = ["run", str(prog), str(tmp_path), code]
    want = subprocess.run([sys.executable, "-m", "tracec.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    got = run_cli(args, tmp_path, env, timeout=120)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout,
                                                        want.stderr)
    assert got.returncode == int(code) and "to stderr" in got.stderr
    assert str(tmp_path / "cache") in got.stdout and "True" in got.stdout


def test_a_script_that_raises_prints_its_traceback(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text("x = 1\nraise ValueError('boom')\n")
    got = run_cli(["run", str(prog)], tmp_path, ENV, timeout=120)
    assert got.returncode == 1 and "ValueError: boom" in got.stderr and "bad.py" in got.stderr


def test_timeout_kills_the_program(tmp_path):
    prog = tmp_path / "slow.py"
    prog.write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli(["run", str(prog)], tmp_path, ENV, timeout=2)
    prog.write_text("print('next')\n")     # the runner still works after a timeout
    assert run_cli(["run", str(prog)], tmp_path, ENV, timeout=60).stdout == "next\n"


def test_one_zygote_serves_every_test_of_a_worker():
    """pytest's PYTEST_CURRENT_TEST (a different value in every test) is no
    part of a zygote's key: commands whose environments differ only there
    fork from the same zygote (a zygote per test cost each one its imports),
    and each command still sees its own value."""
    from program_runner import python_c
    code = "import os; print(os.getppid(), os.environ['PYTEST_CURRENT_TEST'])"
    outs = [python_c(code, env={**ENV, "PYTEST_CURRENT_TEST": name}, timeout=120)
            for name in ("a.py::one (call)", "b.py::two (call)")]
    assert all(r.returncode == 0 for r in outs), [r.stderr for r in outs]
    (zygote1, test1), (zygote2, test2) = (r.stdout.split(" ", 1) for r in outs)
    assert zygote1 == zygote2 != str(os.getpid())
    assert (test1.strip(), test2.strip()) == ("a.py::one (call)", "b.py::two (call)")


def test_compile_switches_share_the_zygote_and_reach_the_command():
    """TRACEC_COMPILE_JOBS / TRACEC_GEMM_LIBRARY / TRACEC_NO_CACHE (read by
    tracec at each compile) are no part of a zygote's key either: the
    commands fork from one zygote, each sees its own values, and a compile
    in it follows them (one job where it says 1)."""
    from program_runner import python_c
    code = ("import os; from tracec.backends.cpu import codegen\n"
            "print(os.getppid(), codegen.compile_jobs(), os.environ.get('TRACEC_GEMM_LIBRARY'),"
            " os.environ.get('TRACEC_NO_CACHE'))")
    outs = [python_c(code, env={**ENV, **extra}, timeout=120)
            for extra in ({"TRACEC_COMPILE_JOBS": "1"},
                          {"TRACEC_COMPILE_JOBS": "3", "TRACEC_GEMM_LIBRARY": "0",
                           "TRACEC_NO_CACHE": "1"})]
    assert all(r.returncode == 0 for r in outs), [r.stderr for r in outs]
    (z1, *one), (z2, *two) = (r.stdout.split() for r in outs)
    assert z1 == z2 != str(os.getpid())
    assert (one, two) == (["1", "None", "None"], ["3", "0", "1"])


def test_a_commands_cpu_time_is_counted():
    """The CPU seconds of a forked command (not this process's child, so
    not in its rusage) add up in ``program_runner._CHILD_CPU``."""
    import program_runner
    before = program_runner._CHILD_CPU
    r = program_runner.python_c("import time\nt = time.process_time()\n"
                                "while time.process_time() - t < 0.3: pass", env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 0.3 <= program_runner._CHILD_CPU - before < 30
