"""Test-wide settings: the IR verifier runs between passes (DESIGN.md), and
compiled code is cached in a throwaway folder, never the user's cache."""
import compileall
import importlib.util
import os
import sys
import tempfile

os.environ["TRACEC_CHECKS"] = "1"
os.environ.setdefault("TRACEC_CACHE_DIR", tempfile.mkdtemp(prefix="tracec-test-cache-"))

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

# ``import torchvision`` (the test oracle, when installed) works in-process
import vision_oracle  # noqa: E402

vision_oracle.stub()
