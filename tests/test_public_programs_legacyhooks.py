"""Older public code's gradient hooks (``tests/programs/legacyhooks``): a
small Grad-CAM in the style of the popular implementations (a forward hook
saving a conv layer's activations, the deprecated
``Module.register_backward_hook`` or the full one saving its output
gradients, weights = their spatial mean, ReLU of the weighted sum), run
under ``tracec run`` against torch 2.13's recorded output."""
import pathlib

import pytest

from library_programs import check_library_program

PROGS = pathlib.Path(__file__).resolve().parent / "programs" / "legacyhooks"


@pytest.mark.parametrize("script", ["gradcam.py"])
def test_legacyhooks_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, (), tmp_path)
