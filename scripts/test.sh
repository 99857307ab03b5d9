#!/usr/bin/env bash
# The project's test command: the same on a fresh machine, for a developer and
# for CI (.ci/run calls this). Creates ./.venv (or $VENV) if missing, installs
# the package with its test extra, and runs the whole suite. Extra arguments go
# to pytest, e.g. `scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q -e ".[test]"
# the test-nodeps extra (libraries whose own pins the test extra excludes)
python scripts/install_nodeps.py

set +e
python -m pytest -q -n auto --dist worksteal "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "scripts/test.sh: pytest collected no tests; treating as a failure" >&2
fi
exit "$rc"
