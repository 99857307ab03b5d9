#!/usr/bin/env bash
# Re-records what the public programs print under the pinned torch
# (tests/programs/_torch_recordings/, see tests/torch_recordings.py): runs
# every public-program test with TRACEC_RECORD_TORCH=1, which runs torch
# live and writes each recording. Run it after changing a program under
# tests/programs/ or its test's arguments; commit the recordings it writes.
# Extra arguments go to pytest (e.g. -k mnist to refresh one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck disable=SC1091
[ -x .venv/bin/python ] && . .venv/bin/activate
# Every public-program test file (a new tests/test_public_programs_*.py is
# picked up without editing this list), and the tests that compare a small
# script with torch's run of it (torch_recordings.script_output).
TRACEC_RECORD_TORCH=1 python -m pytest -q -n auto --dist worksteal \
    tests/test_public_programs*.py tests/test_torch_compat_calls.py tests/test_models40_gaps.py \
    tests/test_jit.py tests/test_torch_save_format.py "$@"
