"""Programs launched as real ones are: ``python -m package`` (``tracec run
-m``) and ``torchrun`` (``tracec run -m torch.distributed.run``, ``tracec
torchrun``; tracec/distributed/run.py).  ``tracec run -m`` said "no such
file: -m", and tracec had no torch.distributed.run: DDP programs written for
torchrun could not start.

``tests/programs/launch``: ``toytrain`` (a package: argparse, relative
imports, ``__main__.py``) and pytorch/examples' ddp-tutorial-series
``multigpu_torchrun.py`` (CPU/gloo: Trainer, DistributedSampler, DDP,
snapshot save and load) launched with 2 processes; both print what they
print under torch 2.13 (recorded; the ranks' lines compared sorted, as
their order between ranks is not fixed).  The launcher's environment,
failure summary, restarts and refusals are checked with ``--no-python``
workers (no imports: fast)."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

import torch_recordings
from program_runner import run_cli
from test_public_programs_tutorials2 import ENV, assert_output_matches

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "launch"
PKG = PROGS / "toytrain"
DDP = PROGS / "multigpu_torchrun.py"
PKG_ARGS = ["--steps", "4", "--lr", "0.05"]
DDP_ARGS = ["2", "1", "--batch_size", "16"]
NO_OMP = {k: v for k, v in ENV.items() if k != "OMP_NUM_THREADS"}


def _torch_output(cmd, cwd, name, files, args, extra):
    """torch's stdout for ``python *cmd`` in ``cwd`` (recorded, see torch_recordings)."""
    def run():
        r = subprocess.run([sys.executable, *map(str, cmd)], cwd=cwd, env=ENV,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "torch failed:\n" + r.stderr[-4000:]
        return r.stdout
    return torch_recordings.torch_output(name, files, args, extra, run)


def _tracec(args, cwd, env=ENV):
    return run_cli(args, cwd, env, timeout=300)


def test_python_m_package_prints_what_torch_prints(tmp_path):
    shutil.copytree(PKG, tmp_path / "toytrain", ignore=shutil.ignore_patterns("__pycache__"))
    ref = _torch_output(["-m", "toytrain", *PKG_ARGS], tmp_path, "launch/toytrain",
                        sorted(PKG.glob("*.py")), PKG_ARGS, "python -m toytrain OMP_NUM_THREADS=1")
    r = _tracec(["run", "-m", "toytrain", *PKG_ARGS], tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    assert_output_matches(r.stdout, ref, strict=True)
    assert "argv0=toytrain/__main__.py" in r.stdout and "path0 is cwd: True" in r.stdout


def test_torchrun_ddp_tutorial_prints_what_torch_prints(tmp_path):
    extra = "python -m torch.distributed.run --nproc_per_node=2 OMP_NUM_THREADS=1"
    ref = _torch_output(["-m", "torch.distributed.run", "--nproc_per_node=2", DDP, *DDP_ARGS],
                        tmp_path, "launch/multigpu_torchrun", torch_recordings.program_files(DDP),
                        DDP_ARGS, extra)
    work = tmp_path / "tracec"
    work.mkdir()
    r = _tracec(["run", "-m", "torch.distributed.run", "--nproc_per_node=2", DDP, *DDP_ARGS],
                work)
    assert r.returncode == 0, r.stderr[-4000:]
    # the ranks write whole lines, in an order between ranks that varies
    assert_output_matches("\n".join(sorted(r.stdout.splitlines())),
                          "\n".join(sorted(ref.splitlines())), strict=True)
    assert "[GPU1] Resuming training from snapshot at Epoch 1" in r.stdout


_PRINT_ENV = ("import json, os, sys; keys = sys.argv[1].split(','); "
              "sys.stdout.write(json.dumps({k: os.environ.get(k) for k in keys}) + '\\n')")
KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
        "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
        "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
        "OMP_NUM_THREADS"]


def _worker_envs(launcher_args, tmp_path, env=ENV):
    r = _tracec(["torchrun", *launcher_args, "--no-python", sys.executable, "-c", _PRINT_ENV,
                 ",".join(KEYS)], tmp_path, env)
    assert r.returncode == 0, r.stderr[-4000:]
    return sorted((json.loads(ln) for ln in r.stdout.splitlines()), key=lambda e: e["RANK"]), r


def test_torchrun_gives_each_worker_torchruns_environment(tmp_path):
    envs, r = _worker_envs(["--nproc_per_node=2"], tmp_path, NO_OMP)
    port = envs[0]["MASTER_PORT"]
    assert port != "29500" and envs[0]["TORCHELASTIC_RUN_ID"] != "none"
    for rank, e in enumerate(envs):
        assert e == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                     "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
                     "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": "2", "ROLE_NAME": "default",
                     "MASTER_ADDR": socket.getfqdn(), "MASTER_PORT": port,
                     "TORCHELASTIC_RUN_ID": envs[0]["TORCHELASTIC_RUN_ID"],
                     "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                     "OMP_NUM_THREADS": "1"}, e
    assert "Setting OMP_NUM_THREADS environment variable for each process to be 1" in r.stderr
    # a static rendezvous at --master-addr:--master-port, as given
    envs, r = _worker_envs(["--nproc-per-node", "1", "--master_port=29511"], tmp_path)
    assert [(e["MASTER_ADDR"], e["MASTER_PORT"], e["TORCHELASTIC_RUN_ID"]) for e in envs] == \
        [("127.0.0.1", "29511", "none")]
    assert "OMP_NUM_THREADS" not in r.stderr
    # c10d: the workers' master is a free port whatever the endpoint (torch 2.13)
    envs, r = _worker_envs(["--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29400"], tmp_path)
    assert envs[0]["MASTER_PORT"] != "29400" and envs[0]["TORCHELASTIC_RUN_ID"] == "none"


def test_torchrun_failure_summary_restarts_and_single_node(tmp_path):
    fail = ("import os, sys; rank = os.environ['RANK']; "
            "sys.exit(3 if rank == '1' and os.environ['TORCHELASTIC_RESTART_COUNT'] < sys.argv[1] "
            "else 0)")
    r = _tracec(["run", "-m", "torch.distributed.run", "--nproc_per_node=2", "--no-python",
                 sys.executable, "-c", fail, "9"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "ChildFailedError: \n====" in r.stderr, r.stderr
    summary = r.stderr[r.stderr.index("ChildFailedError"):]
    assert "FAILED\n" in summary and "Root Cause (first observed failure):\n[0]:" in summary
    assert "  rank      : 1 (local_rank: 1)\n  exitcode  : 3 (pid: " in summary, summary
    # --max-restarts: the group starts again, TORCHELASTIC_RESTART_COUNT 1
    r = _tracec(["torchrun", "--nproc_per_node=2", "--max-restarts=1", "--no-python",
                 sys.executable, "-c", fail, "1"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Worker group FAILED. 1/1 attempts left; will restart worker group" in r.stderr
    r = _tracec(["torchrun", "--nnodes=2", "--no-python", "true"], tmp_path)
    assert r.returncode == 1 and "single node (--nnodes=1)" in r.stderr, r.stderr


def test_run_m_is_python_m(tmp_path):
    pkg = tmp_path / "pk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("def f():\n    raise KeyError('bad')\n")
    (pkg / "__main__.py").write_text(
        "import sys\nfrom .util import f\nif sys.argv[1] == 'exit':\n    sys.exit(4)\nf()\n")
    for args in (["exit"], ["raise"]):
        want = subprocess.run([sys.executable, "-m", "pk", *args], cwd=tmp_path, env=ENV,
                              capture_output=True, text=True)
        got = _tracec(["run", "-m", "pk", *args], tmp_path)
        assert (got.returncode, got.stderr) == (want.returncode, want.stderr)
    assert "<frozen runpy>" in got.stderr and "KeyError: 'bad'" in got.stderr
    got = _tracec(["run", "-m", "nosuch"], tmp_path)
    assert got.returncode == 1 and got.stderr.endswith("No module named nosuch\n"), got.stderr
    # options after a SCRIPT are the script's
    (tmp_path / "a.py").write_text("import sys\nprint(sys.argv)\n")
    got = _tracec(["run", "a.py", "-m", "x", "--help"], tmp_path)
    assert got.stdout == "['a.py', '-m', 'x', '--help']\n", got
    assert os.path.isfile(DDP)


def test_local_ranks_filter_and_torchrun_started_by_the_program(tmp_path):
    # --local-ranks-filter: only rank 1's output reaches the console
    envs, _ = _worker_envs(["--nproc_per_node=2", "--local-ranks-filter=1"], tmp_path)
    assert [e["RANK"] for e in envs] == ["1"]
    # a program that runs `python -m torch.distributed.run` itself: the
    # child python finds tracec as torch (children_import_tracec), so the
    # launcher is tracec's (torch's sets TORCHELASTIC_ERROR_FILE)
    (tmp_path / "outer.py").write_text(
        "import subprocess, sys\n"
        f"code = {_PRINT_ENV!r}\n"
        "r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=2',\n"
        "                    '--no-python', sys.executable, '-c', code, 'RANK,TORCHELASTIC_ERROR_FILE'],\n"
        "                   capture_output=True, text=True)\n"
        "print(r.returncode, sorted(r.stdout.splitlines()))\n")
    got = _tracec(["run", "outer.py"], tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout == ("0 ['{\"RANK\": \"0\", \"TORCHELASTIC_ERROR_FILE\": null}', "
                          "'{\"RANK\": \"1\", \"TORCHELASTIC_ERROR_FILE\": null}']\n"), got.stdout


def test_deprecated_launch_passes_local_rank_and_record_reraises(tmp_path):
    (tmp_path / "lr.py").write_text("import os, sys\n"
                                    "sys.stdout.write(f'{sys.argv[1:]} {os.environ[\"LOCAL_RANK\"]}\\n')\n")
    r = _tracec(["run", "-m", "torch.distributed.launch", "--nproc_per_node=2", "lr.py", "x"],
                tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["['--local-rank=0', 'x'] 0", "['--local-rank=1', 'x'] 1"]
    assert "FutureWarning: The module torch.distributed.launch is deprecated" in r.stderr
    r = _tracec(["run", "-m", "torch.distributed.launch", "--use-env", "--no-python", "true"],
                tmp_path)
    assert r.returncode == 0, r.stderr

    from tracec.distributed.elastic.multiprocessing.errors import record

    @record
    def main(x):
        if x:
            raise KeyError(x)
        return "ok"
    assert main(0) == "ok" and main.__name__ == "main"
    with pytest.raises(KeyError, match="5"):
        main(5)
