"""tracec/ir sits at the bottom: it imports only xDSL, NumPy, the standard
library, ``tracec.dtypes``, ``tracec.symbolic`` (sizes) and itself (never ``tracec.ops`` or above)."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import tracec.ir

IR_DIR = pathlib.Path(tracec.ir.__file__).parent
ALLOWED_TRACEC = ("tracec.dtypes", "tracec.symbolic", "tracec.ir")


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module == "tracec":
                yield from (f"tracec.{a.name}" for a in node.names)
            elif node.module:
                yield node.module


def test_ir_imports_only_allowed_modules():
    std = set(sys.stdlib_module_names)
    for path in sorted(IR_DIR.glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "tracec":
                assert name.startswith(ALLOWED_TRACEC), f"{path.name} imports {name}"
            else:
                assert top in std or top in ("xdsl", "numpy"), f"{path.name} imports {name}"


def test_importing_ir_does_not_load_the_primitives():
    # tracec/__init__.py loads the whole front end; stand in an empty package
    # so that only what tracec.ir itself pulls in gets imported.
    code = f"""
import sys, types
pkg = types.ModuleType("tracec")
pkg.__path__ = [{str(IR_DIR.parent)!r}]
sys.modules["tracec"] = pkg
import tracec.ir
bad = [m for m in sys.modules if m.startswith("tracec.")
       and not m.startswith(("tracec.ir", "tracec.dtypes", "tracec.symbolic"))]
assert not bad, bad
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_files_stay_small():
    for path in IR_DIR.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 600, path.name
