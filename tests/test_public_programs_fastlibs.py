"""fastai (with fastcore, fasttransform, fastprogress, fastdownload) runs
unmodified on tracec (``tests/programs/fastlibs``):

- ``fastai_vision.py``: the vision quickstart on generated PNGs:
  ``ImageDataLoaders.from_name_func``, ``vision_learner(resnet18,
  pretrained=False, metrics=error_rate)``, ``fit_one_cycle``, the
  recorder's losses and learning rates, ``predict``, ``get_preds``,
  ``validate``, ``save`` / ``load`` and ``export`` (cloudpickle) /
  ``load_learner``.

Each program runs under ``tracec run`` (fastai's own ``import torch`` is
tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions).  fastai's progress bars and tables are
switched off (they print timings); the programs print the recorder's
values themselves.  ``set_seed`` seeds torch, NumPy and ``random``, and
tracec's draws equal PyTorch's, so shuffles, augmentations and dropout
compare strictly.
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "fastlibs"

FASTAI = ("fastai", "fastcore", "fasttransform", "fastprogress", "pandas", "timm")

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "fastai_vision.py": FASTAI,
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_fastlibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
