"""A pytest plugin for sweeps (not part of the suite): every module the
``cuda-emulated`` backend compiles is also made into PTX for sm_90 and
assembled by ``ptxas``; what fails (a ``LoweringError`` for something the
GPU cannot run, a ptxas error) is appended to ``$PTX_FAIL_LOG`` (default
/tmp/ptx_fail.log) with the test's id, and the test goes on.  With the
emulated launch checking the numbers, this finds what would break on a
GPU without one (docs/cuda.md):

    TRACEC_BACKEND=cuda-emulated PYTHONPATH=scripts \
        python -m pytest -p ptx_sweep_plugin -n 2 tests/compile tests/test_public_programs*.py
"""
from __future__ import annotations

import os
import subprocess
import tempfile

#: the running test's id (a sweep runs one test at a time per process)
CURRENT = [None]


def pytest_runtest_setup(item):
    CURRENT[0] = item.nodeid


def pytest_configure(config):
    from tracec.backends.cuda import build, emulated
    orig = emulated.compile_emulated

    def wrapped(module, *args, **kwargs):
        exe = orig(module, *args, **kwargs)
        try:
            code = build.ptx(exe.lowered, "sm_90")
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "m.ptx")
                with open(path, "w") as f:
                    f.write(code.ptx)
                r = subprocess.run(["ptxas", "-arch=sm_90", path, "-o",
                                    os.path.join(d, "m.cubin")], capture_output=True, text=True)
                if r.returncode:
                    raise RuntimeError("ptxas: " + r.stderr[:500])
        except Exception as e:  # noqa: BLE001 - recorded; the sweep goes on
            with open(os.environ.get("PTX_FAIL_LOG", "/tmp/ptx_fail.log"), "a") as f:
                f.write(f"{CURRENT[0]}\t{type(e).__name__}: {str(e)[:400]!r}\n")
        return exe
    emulated.compile_emulated = wrapped
