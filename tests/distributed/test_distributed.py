"""tracec.distributed across processes: ``mpiexec -n 2`` runs
``worker.py`` (oversubscribed on small machines) with a timeout; each case
asserts on every rank.  Skipped only where mpi4py or mpiexec is missing."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py", reason="tracec.distributed needs mpi4py (extra 'distributed')")

WORKER = pathlib.Path(__file__).with_name("worker.py")
ROOT = WORKER.parent.parent.parent
MPIEXEC = shutil.which("mpiexec") or shutil.which("mpiexec", path=os.path.dirname(sys.executable))
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    # Open MPI refuses root without these; MPICH ignores them.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def run(*cases, n=2, timeout=240):
    cmd = ([MPIEXEC, "-n", str(n)] if n else []) + [sys.executable, str(WORKER), *cases]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(),
                          cwd=ROOT)


def _ok(p, cases, n):
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    for c in cases:
        for r in range(max(n, 1)):
            assert f"rank {r}/{max(n, 1)}: {c} ok" in out, out[-4000:]


@needs_mpiexec
def test_two_ranks_collectives_ddp_sampler():
    """Collectives' values (eager and compiled), DDP with SGD and Adam
    (eager and compiled: after 5 steps every rank's parameters equal one
    process trained on the concatenated batch), no_sync, and the sampler's
    disjoint, covering shards -- one launch."""
    cases = ["collectives", "ddp", "no_sync", "sampler", "comm_runtime", "syncbn", "rooted"]
    _ok(run(*cases), cases, 2)


def test_world_of_one_without_a_launcher():
    cases = ["collectives", "ddp", "no_sync", "sampler", "comm_runtime", "syncbn", "rooted"]
    _ok(run(*cases, n=0), cases, 0)


@needs_mpiexec
def test_exception_on_one_rank_aborts_the_job_with_its_message():
    p = run("fault_exception", timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "[rank 1] ValueError: boom on rank 1" in out, out[-3000:]
    assert "aborting all 2 ranks because rank 1 raised ValueError" in out, out[-3000:]


@needs_mpiexec
def test_mismatched_shapes_are_reported_not_summed():
    p = run("fault_shape", timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "shapes or dtypes differ across ranks (rank 0: float32[3], rank 1: float32[4])" \
        in out, out[-3000:]


@needs_mpiexec
def test_mismatched_shapes_in_compiled_code_are_reported():
    """Rank 1 retraces for a new shape while rank 0 runs native code: the
    two type checks (eager and native) meet and both ranks fail."""
    p = run("fault_shape_compiled", timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "rank 0: float32[4], rank 1: float32[5]" in out or \
        "the ranks passed different shapes or dtypes" in out, out[-3000:]
    assert "worker.py" in out


def test_without_mpi4py_the_error_names_the_extra():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import tracec, tracec.distributed as dist\n"
            "assert not dist.is_available()\n"
            "try:\n    dist.init_process_group('mpi')\n"
            "except ImportError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=_env(), cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "pip install 'tracec[distributed]'" in p.stdout, p.stdout


def test_import_tracec_does_not_start_mpi():
    code = "import sys, tracec, tracec.distributed; print('mpi4py.MPI' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=_env(), cwd=ROOT)
    assert p.stdout.strip() == "False", p.stdout + p.stderr
