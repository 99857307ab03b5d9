"""Test-wide settings: the IR verifier runs after each pass stage (TRACEC_CHECKS=1;
2 verifies after every pass), and compiled code is cached in a throwaway
folder, never the user's cache."""
import compileall
import importlib.util
import os
import pathlib
import sys
import tempfile

import pytest

# NumPy's OpenBLAS and torch's OpenMP on one thread (set before anything
# imports numpy or torch): the suite runs one xdist worker per core, and a
# second thread per worker only oversubscribes the cores; the threads then
# spin and wait on each other.  The small products of eager tracec (numpy
# matmul) ran 3-5x slower (test_public_programs_exact's LBFGS test: 4.9 s,
# 1.0 s on one thread) and torch oracles ~3x (test_vision_models' resnet18
# step: 6.5 s, 2.3 s).  Processes the tests start inherit both (the program
# tests set OMP_NUM_THREADS=1 for theirs already).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRACEC_CHECKS", "1")  # (the IR verified after each stage; 2: after each pass)
os.environ.setdefault("TRACEC_CACHE_DIR", tempfile.mkdtemp(prefix="tracec-test-cache-"))
# No shared libraries linked from compiled code (a cc per compile, for a
# later process's quick start): tests/backends/test_shared_objects.py
# switches them on where it checks them.
os.environ.setdefault("TRACEC_SHARED_OBJECTS", "0")

# Where the environment sets PYTHONDONTWRITEBYTECODE (this project's dev
# machines do), every process the tests start (the programs run as scripts,
# the CLI, fresh-process checks) and every xdist worker compiled all of
# tracec from source: ~0.5 s each, and test_cli.py alone took 20 s instead
# of 12.  The bytecode is written once here (a no-op when it is current;
# py_compile writes atomically, so concurrent workers are safe).
if sys.dont_write_bytecode:
    _spec = importlib.util.find_spec("tracec")
    for _where in _spec.submodule_search_locations or ():
        compileall.compile_dir(_where, quiet=2)

# pytest caches the assert-rewritten test modules only where bytecode may
# be written; with PYTHONDONTWRITEBYTECODE each xdist worker rewrote all
# ~260 test modules on every run (collection: 17 s of CPU per worker, 6 s
# from the cache).  Written atomically by pytest (safe between workers).
sys.dont_write_bytecode = False


def pytest_configure(config):
    """The second xdist worker rewrites the test modules in reverse order
    before collecting, while the first collects (and caches) them in order:
    each module is rewritten once in a fresh checkout, not once per worker.
    Uses pytest's own rewriter (pinned pytest; skipped if its internals
    move: only the speed-up is lost)."""
    if os.environ.get("PYTEST_XDIST_WORKER") != "gw1":
        return
    try:
        from _pytest.assertion import rewrite
        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):
        return
    here = pathlib.Path(__file__).resolve().parent
    files = sorted(p for p in here.rglob("test_*.py") if "programs" not in p.parts)
    for fn in reversed(files):
        pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(fn, pyc) is not None:
            break       # reached what the first worker already cached
        if not rewrite.try_makedirs(pyc.parent):
            return
        source_stat, co = rewrite._rewrite_test(fn, config)
        rewrite._write_pyc(state, co, source_stat, pyc)


# ``import torchvision`` (the test oracle, when installed) works in-process
import vision_oracle  # noqa: E402

vision_oracle.stub()


@pytest.fixture(autouse=True)
def _torch_distribution_validation_stays_on():
    """``torch.compile`` (even building an OptimizedModule) turns off
    ``torch.distributions``' argument validation for the whole process in
    PyTorch 2.13; tests that compare validation errors with torch would then
    fail in whichever xdist worker ran such a test first.  Restored after
    every test (real torch only, where it is loaded)."""
    yield
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributions", None) if torch is not None else None
    if dist is not None and getattr(torch, "__name__", "") == "torch" and \
            "site-packages" in (getattr(torch, "__file__", "") or ""):
        if dist.Distribution._validate_args is False:
            dist.Distribution.set_default_validate_args(True)


#: Test modules of long tests (public programs compiled cold, torchvision-
#: sized models), run first: xdist's workers then end on short tests instead
#: of one worker finishing a 30 s program while the other idles (a 1-2
#: minute tail on two cores).  Whole modules move, in their own order, so
#: module-scoped fixtures (a module's torch reference runs) are set up once.
_LONG_MODULES = ("test_public_programs", "test_vision_models")
#: Modules of the longest in-process tests (a CI run's ``--durations``:
#: 10-25 s each on a loaded 2-core machine), after those: whole modules
#: again, so the order within each stays as written (test_cuda's ptxas
#: check runs last in its module).
_LONG_IN_PROCESS = {"test_coldstart_gemm_library.py", "test_cuda.py", "test_layers.py",
                    "test_shared_objects.py", "test_example_c_train.py", "test_gather_sink.py",
                    "test_cache_warm_start.py", "test_dynamic_shapes.py", "test_models21_gaps.py",
                    "test_aot_state.py"}


def pytest_collection_modifyitems(session, config, items):
    def first(item):
        name = os.path.basename(item.nodeid.split("::")[0])
        return 0 if name.startswith(_LONG_MODULES) else 1 if name in _LONG_IN_PROCESS else 2
    items.sort(key=first)     # stable: every module keeps its tests' order


@pytest.fixture
def counter_rng():
    """Eager draws from the counter-based stream compiled code draws from
    (``torch_rng.counter_draws``) for a test that checks a compiled step
    with random ops against the same step run eagerly, bit for bit: by
    default eager draws follow PyTorch's Mersenne Twister
    (tests/test_torch_rng.py) and, as with ``torch.compile``, a compiled
    dropout mask is not the eager one."""
    from tracec import torch_rng
    with torch_rng.counter_draws():
        yield


def pytest_collection_finish(session):
    """Every object alive once the tests are collected (torch, tracec, the
    test modules: millions) moves to the collector's permanent generation
    (``gc.freeze``): a worker's full collections, which the IR building of
    each compile triggers, then walk only what the tests made since, not
    the whole interpreter (measured on test_symbolic_ops_more.py and
    test_rnn_scan.py, one core: 8.4 s of collections in 60 s, 6.1 s frozen)."""
    import gc
    if os.environ.get("TRACEC_TEST_GC_FREEZE", "1") != "0":
        gc.collect()
        gc.freeze()

