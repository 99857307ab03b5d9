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
TRACEC_RECORD_TORCH=1 python -m pytest -q -n auto --dist worksteal \
    tests/test_public_programs.py tests/test_public_programs_breadth.py \
    tests/test_public_programs_tutorials.py tests/test_public_programs_tutorials2.py \
    tests/test_public_programs_models3.py tests/test_public_programs_models4.py \
    tests/test_public_programs_models5.py tests/test_public_programs_models6.py \
    tests/test_public_programs_models7.py tests/test_public_programs_models8.py \
    tests/test_public_programs_models12.py tests/test_public_programs_models13.py \
    tests/test_public_programs_models9.py tests/test_public_programs_models10.py \
    tests/test_public_programs_models11.py tests/test_public_programs_models14.py \
    tests/test_public_programs_models15.py tests/test_public_programs_models16.py \
    tests/test_public_programs_models17.py tests/test_public_programs_models18.py \
    tests/test_public_programs_models19.py "$@"
