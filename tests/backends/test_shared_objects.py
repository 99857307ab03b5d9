"""Cached code loaded as shared libraries (backends/cpu/shared_objects.py):
a process that finds its code in the disk cache loads the libraries the
system's C compiler linked from that code, without llvmlite, and computes
exactly what the JIT-linked code computed."""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("cc") is None,
                                reason="shared libraries are built with cc on Linux")

# Everything a loaded library must get right: GEMM routines (a library the
# module's code calls), the worker pool, the checked fast call (calls 3+),
# half-precision conversions (compiler builtins), a run-time index error
# with its message, and a symbolic module serving two sizes.
SCRIPT = r"""
import json, sys
import numpy as np
import tracec
import tracec.nn.functional as F
from tracec.backends.cpu import shared_objects

rng = np.random.default_rng(0)
tracec.manual_seed(0)
model = tracec.nn.Sequential(tracec.nn.Linear(96, 80), tracec.nn.ReLU(), tracec.nn.Linear(80, 10))
opt = tracec.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = tracec.from_numpy(rng.standard_normal((40, 96), dtype=np.float32))
y = tracec.from_numpy(rng.integers(0, 10, 40).astype(np.int64))

@tracec.compile
def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

out = {"losses": [step(x, y).item() for _ in range(4)],
       "weights": [float(p.detach().double().sum().item()) for p in model.parameters()]}

half = tracec.compile(lambda a: (a.half() * 3.1).float() + 1)
a = tracec.from_numpy(rng.standard_normal(37, dtype=np.float32))
out["half"] = [half(a).numpy().tolist() for _ in range(3)][-1]

gather = tracec.compile(lambda t, i: t.gather(0, i) * 2)
t = tracec.arange(6.0)
out["gather"] = [gather(t, tracec.tensor([5, 1, 0])).tolist() for _ in range(3)][-1]
try:
    gather(t, tracec.tensor([2, 9, 0]))
    out["error"] = None
except RuntimeError as e:
    out["error"] = str(e).splitlines()[0]

sym = tracec.compile(lambda m: (m * 2).sum(0) + m.mean(), dynamic=True)
out["sym"] = [sym(tracec.ones(n, 3) * n).tolist() for n in (3, 5, 3, 7)]
out["compiles"] = step.cache_info().compiles + sym.cache_info().compiles
shared_objects.wait()
out["llvmlite"] = "llvmlite.binding" in sys.modules
print("RESULT " + json.dumps(out))
"""


def run(cache, **env):
    env = {**os.environ, "TRACEC_CACHE_DIR": str(cache), "TRACEC_SHARED_OBJECTS": "1", **env}
    env.pop("TRACEC_NO_CACHE", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[7:])


def libraries(cache):
    return sorted(str(p) for p in cache.rglob("*.so"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache = tmp_path_factory.mktemp("so-cache")
    cold = run(cache)
    built = libraries(cache)
    warm = run(cache)
    return cache, cold, built, warm


def test_a_warm_process_loads_libraries_without_llvm_and_matches_the_jit(runs):
    cache, cold, built, warm = runs
    assert cold["llvmlite"] and cold["compiles"] > 0
    # The step's module, the GEMM library, the worker pool, the checked
    # call and the small functions' modules each got a library.
    assert len(built) >= 6, built
    assert not warm["llvmlite"], "a warm start linked with llvmlite"
    assert warm["compiles"] == 0
    for k in ("losses", "weights", "half", "gather", "error", "sym"):
        assert warm[k] == cold[k], k          # the same machine code: bit for bit
    assert "out of range" in cold["error"] or "out of bounds" in cold["error"], cold["error"]


def test_the_shared_library_results_equal_eager(runs):
    import numpy as np
    import tracec
    _, _, _, warm = runs
    for n, got in zip((3, 5, 3, 7), warm["sym"]):
        m = tracec.ones(n, 3) * n
        np.testing.assert_allclose(got, ((m * 2).sum(0) + m.mean()).tolist(), rtol=1e-6)
    assert warm["gather"] == [10.0, 2.0, 0.0]


def test_a_broken_library_is_removed_and_the_jit_takes_over(runs, tmp_path):
    cache, cold, built, _ = runs
    broken = tmp_path / "cache"
    shutil.copytree(cache, broken)
    for p in broken.rglob("*.so"):
        p.write_bytes(b"not a library")
    again = run(broken)
    assert again["llvmlite"]                      # linked by the JIT
    for k in ("losses", "weights", "half", "gather", "error", "sym"):
        assert again[k] == cold[k], k
    assert all(b"not a library" not in p.read_bytes() for p in broken.rglob("*.so"))
    assert len(libraries(broken)) >= len(built)   # and linked again


def test_switched_off_the_jit_loads_everything(runs):
    cache, cold, _, _ = runs
    off = run(cache, TRACEC_SHARED_OBJECTS="0")
    assert off["llvmlite"]
    for k in ("losses", "weights", "half", "gather", "error", "sym"):
        assert off[k] == cold[k], k


def test_clearing_the_cache_removes_the_libraries(runs, tmp_path):
    from tracec.backends.cache import DiskCache
    cache, _, _, _ = runs
    copy = tmp_path / "c"
    shutil.copytree(cache, copy)
    assert libraries(copy)
    DiskCache(str(copy)).clear()
    assert not libraries(copy / "v1")


def test_a_folder_that_may_not_hold_code_switches_libraries_off(tmp_path, monkeypatch):
    """A cache on a noexec mount: the first failed load marks the folder, and
    no library is built or loaded there again until the cache is cleared."""
    from tracec.backends.cache import DiskCache
    from tracec.backends.cpu import shared_objects as so
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEC_SHARED_OBJECTS", "1")
    blob, names = b"object bytes", ["entry"]
    path = so._path(so._key(blob, names))
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"\x7fELF")

    def refuse(*a, **k):
        raise OSError(f"{path}: failed to map segment from shared object")
    monkeypatch.setattr(so, "SharedLibrary", refuse)
    assert so.enabled()
    assert so.load(blob, names) is None
    assert not so.enabled() and not os.path.exists(path)
    so.schedule(blob, names, [blob])          # nothing queued while switched off
    assert not so._queue
    DiskCache().clear()
    assert so.enabled()
