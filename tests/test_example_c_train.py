"""examples/c_train, run as its README says: ``make`` builds the training
step and inference libraries, writes the digits data, compiles train.c and
runs it; the loss falls and the test accuracy is that of a trained MLP."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from aot_helpers import CC, ROOT

EXAMPLE = os.path.join(ROOT, "examples", "c_train")


@pytest.mark.skipif(CC is None or shutil.which("make") is None, reason="needs cc and make")
def test_c_train_example_via_make(tmp_path):
    work = tmp_path / "c_train"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("build", "data"))
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(["make", "-C", str(work), f"PYTHON={sys.executable}",
                        f"TRACEC={sys.executable} -m tracec.cli", "EPOCHS=5"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"^epoch \d+ loss ([0-9.]+)$", r.stdout, re.M)]
    assert len(losses) == 5, r.stdout
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.5 * losses[0]
    acc = float(re.search(r"^test accuracy ([0-9.]+)", r.stdout, re.M).group(1))
    assert acc > 0.85, r.stdout
