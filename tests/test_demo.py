"""``tracec demo`` end to end, as a user runs it."""
import os
import re

import pytest
from program_runner import tracec_cli


@pytest.mark.slow
def test_demo_trains_to_95_percent_and_dumps_ir(tmp_path):
    env = {**os.environ, "TRACEC_CACHE_DIR": str(tmp_path / "cache")}
    r = tracec_cli(["demo", "--dump-dir", str(tmp_path / "ir")], env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    accs = [float(a) for a in re.findall(r"test accuracy\s+([\d.]+)%", out)]
    assert len(accs) == 2 and min(accs) >= 95.0, out
    assert re.search(r"eager:.*steps/s", out) and re.search(r"compiled:.*steps/s", out)
    assert "first call" in out
    diff = float(re.search(r"max abs difference ([\d.e+-]+)", out).group(1))
    assert diff < 1e-4, out
    assert str(tmp_path / "ir") in out
    files = os.listdir(tmp_path / "ir")
    assert any(f.endswith(".optimized.mlir") for f in files), files
