"""A training loop leaning on PyTorch's edges (``tests/programs/probese``):
label-smoothed cross-entropy's graph, overlapping writes refused or
allowed, second backwards allowed or refused, ``.cuda()`` without CUDA,
run under ``tracec run`` against torch 2.13's recorded output."""
import pathlib

import pytest

from library_programs import check_library_program

PROGS = pathlib.Path(__file__).resolve().parent / "programs" / "probese"


@pytest.mark.parametrize("script", ["training_edges.py"])
def test_probese_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, (), tmp_path)
