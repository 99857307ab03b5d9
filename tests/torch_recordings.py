"""Recorded outputs of the public programs under the pinned torch.

Every public-program test compares tracec's output with the same program's
output under torch 2.13.  Running torch is most of those tests' time (each
run imports torch, ~2 s, and some programs call ``torch.compile``, ~15 s),
and its output depends only on the program, its arguments, its environment
and torch's version.  So it is recorded once, in
``tests/programs/_torch_recordings/<group>/<name>.out``, and replayed:

- The recording's first line is a JSON header: the inputs of its key (the
  program's files, the arguments, the test's extra inputs such as the
  environment it sets, torch's installed version) and the key, a SHA-256 of
  those inputs and of the files' contents.  A test replays a recording only
  when the key it computes now equals the stored one; otherwise it runs
  torch, as before, and warns that the recording is stale.
- ``TRACEC_RECORD_TORCH=1`` ignores the recordings, runs torch and writes
  them (atomically).  ``scripts/record-torch-outputs.sh`` does that for
  every program test.
- ``tests/test_torch_recordings.py`` checks on every run that no recording
  is stale for its program's current files, and replays two of them against
  a live torch run, so the mechanism itself is tested.

Recordings are never a substitute for torch's numbers: they are what torch
printed for exactly these inputs.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pathlib
import re
import warnings
from typing import Callable, Iterable

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
STORE = PROGRAMS / "_torch_recordings"
RECORD = os.environ.get("TRACEC_RECORD_TORCH") == "1"
_IMPORT = re.compile(r"^\s*(?:from|import)\s+(\w+)", re.M)


def torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def program_files(script: pathlib.Path, extra: Iterable[pathlib.Path] = ()) -> list[pathlib.Path]:
    """``script`` and the sibling modules it imports, transitively (a
    program in its own folder: nanoGPT's train.py imports model.py), plus
    ``extra``; sorted, so the key does not depend on discovery order."""
    seen, todo = set(), [pathlib.Path(script)] + [pathlib.Path(p) for p in extra]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if f.suffix == ".py":
            for name in _IMPORT.findall(f.read_text()):
                sib = f.parent / f"{name}.py"
                if sib.exists():
                    todo.append(sib)
    return sorted(seen)


def _header(files, args, extra) -> dict:
    inputs = {"files": [str(f.relative_to(ROOT)) for f in files],
              "args": [str(a) for a in args], "extra": extra, "torch": torch_version()}
    h = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode())
    for f in files:
        h.update(f.read_bytes())
    return {**inputs, "key": h.hexdigest()}


def recompute(header: dict) -> str:
    """The key for a stored header's inputs with the files as they are now."""
    files = [ROOT / f for f in header["files"]]
    if not all(f.exists() for f in files):
        return "missing files"
    return _header(files, header["args"], header["extra"])["key"]


def read(path: pathlib.Path) -> tuple[dict, str]:
    head, _, body = path.read_text().partition("\n")
    return json.loads(head), body


def _path(name: str, args) -> pathlib.Path:
    # one program run with different arguments: one recording each
    tag = hashlib.sha256(json.dumps([str(a) for a in args]).encode()).hexdigest()[:8]
    return STORE / (f"{name}-{tag}.out" if args else f"{name}.out")


def torch_output(name: str, files: list[pathlib.Path], args, extra: str,
                 run: Callable[[], str]) -> str:
    """torch's stdout for the program: replayed from the recording ``name``
    when its key is current, else from ``run()`` (which runs torch and fails
    the test if torch fails), recorded when ``TRACEC_RECORD_TORCH=1``."""
    header = _header(files, args, extra)
    path = _path(name, args)
    if not RECORD:
        if path.exists():
            stored, body = read(path)
            if stored.get("key") == header["key"]:
                return body
            why = "is stale (its program, the test's inputs or torch changed)"
        else:
            why = "is missing"
        warnings.warn(f"the torch recording {path.relative_to(ROOT)} {why}: running torch; "
                      "record it with scripts/record-torch-outputs.sh", stacklevel=2)
    out = run()
    if RECORD:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(header, sort_keys=True) + "\n" + out)
        os.replace(tmp, path)
    return out


def stored(name: str, files: list[pathlib.Path], args, extra: str) -> str | None:
    """The recording's output when it is current (and recording is off), else None."""
    path = _path(name, args)
    if RECORD or not path.exists():
        return None
    head, body = read(path)
    return body if head.get("key") == _header(files, args, extra)["key"] else None


def script_output(name: str, script: pathlib.Path, args=(), cwd=None, env=None) -> str:
    """The stdout of ``python script *args`` under the real torch, for a
    test's small script written to a temporary folder: replayed from the
    recording ``name`` (``<group>/<name>``), keyed by the script's text and
    torch's version, not by ``args``, ``cwd`` or ``env``, which must not
    change what it prints (they are the test's temporary paths).  A torch run
    is a process importing torch, ~2.5 s of CPU for a few lines of output."""
    import subprocess
    import sys

    def run():
        r = subprocess.run([sys.executable, str(script), *map(str, args)], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "torch failed:\n" + r.stderr[-4000:]
        return r.stdout
    return torch_output(name, [], [], f"python {script.name}\n" + script.read_text(), run)
