"""The recorded torch outputs the public-program tests replay
(``torch_recordings``) are current and are what torch prints."""
import json
import subprocess
import sys

import pytest

import torch_recordings
from test_public_programs_tutorials2 import DRIVER, ENV, assert_output_matches
from torch_recordings import PROGRAMS

RECORDINGS = sorted(torch_recordings.STORE.rglob("*.out"))


def test_there_are_recordings():
    # the program tests replay ~100 of them; none would mean every test runs torch
    assert len(RECORDINGS) >= 90, len(RECORDINGS)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_recording_is_current(path):
    """Its key, recomputed from the program's files as they are now and the
    installed torch, equals the stored one: a program edited without
    re-recording would otherwise quietly run torch live in its test."""
    head, body = torch_recordings.read(path)
    assert head["torch"] == torch_recordings.torch_version(), (
        f"{path.name} was recorded with torch {head['torch']}: run scripts/record-torch-outputs.sh")
    assert torch_recordings.recompute(head) == head["key"], (
        f"{path.name} is stale ({json.dumps(head['files'])} changed): "
        "run scripts/record-torch-outputs.sh")
    assert body.strip(), path


#: the recordings replayed against a live torch run (two groups, recorded by
#: different fixtures: ``both`` in test_public_programs_breadth, DRIVER in
#: test_public_programs_tutorials2)
LIVE = [("breadth", "micrograd_vs_torch.py"), ("tutorials2", "parametrizations.py")]


def test_recordings_equal_a_live_torch_run(tmp_path):
    """Two recordings replayed against torch run now, on this machine: the
    same lines, every number within the program tests' tolerance.  Both
    programs run in one torch process (``DRIVER``: each in its own working
    folder, from its first line as ``__main__``): importing torch is half
    of such a run's CPU."""
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path)] +
                       [str(PROGRAMS / group / script) for group, script in LIVE],
                       env={**ENV, "TORCH_COMPILE_DISABLE": "1"}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    for group, script in LIVE:
        err = tmp_path / (script + ".err")
        assert not err.exists(), f"{group}/{script} failed under torch:\n{err.read_text()[-4000:]}"
        _, body = torch_recordings.read(torch_recordings.STORE / group / f"{script[:-3]}.out")
        assert_output_matches(body, (tmp_path / (script + ".out")).read_text(), strict=True)


def test_replay_only_while_the_program_is_unchanged(tmp_path, monkeypatch):
    """Recorded, replayed without running torch, and run again (with a
    warning) once the program or its arguments change."""
    monkeypatch.setattr(torch_recordings, "ROOT", tmp_path)
    monkeypatch.setattr(torch_recordings, "STORE", tmp_path / "rec")
    prog, helper = tmp_path / "main.py", tmp_path / "model.py"
    prog.write_text("import model\nprint(model.X)\n")
    helper.write_text("X = 1\n")
    files = torch_recordings.program_files(prog)
    assert files == [prog, helper]
    runs = []

    def run():
        runs.append(1)
        return f"out {len(runs)}\n"

    monkeypatch.setattr(torch_recordings, "RECORD", True)
    assert torch_recordings.torch_output("g/main", files, ["--n", 2], "env", run) == "out 1\n"
    monkeypatch.setattr(torch_recordings, "RECORD", False)
    assert torch_recordings.torch_output("g/main", files, ["--n", 2], "env", run) == "out 1\n"
    assert len(runs) == 1
    with pytest.warns(UserWarning, match="is missing"):
        torch_recordings.torch_output("g/main", files, ["--n", 3], "env", run)
    helper.write_text("X = 2\n")
    with pytest.warns(UserWarning, match="is stale"):
        assert torch_recordings.torch_output("g/main", files, ["--n", 2], "env", run) == "out 3\n"
    head, _ = torch_recordings.read(next((tmp_path / "rec" / "g").glob("main-*.out")))
    assert torch_recordings.recompute(head) != head["key"]
