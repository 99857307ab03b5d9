"""Real published time-series packages run unmodified on tracec
(``tests/programs/tslibs``):

- pytorch-forecasting (on the ``lightning`` package): a TimeSeriesDataSet
  on a synthetic pandas panel (group normalizer, label encoders, known and
  unknown reals), TemporalFusionTransformer.from_dataset fitted one epoch by
  a lightning Trainer, raw predictions and ``interpret_output``, NBeats and
  DeepAR (a distribution loss, sampled quantiles) (``forecasting_tft.py``);

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions)."""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "tslibs"

FORECASTING = ("pytorch-forecasting", "lightning", "pytorch-lightning", "pandas", "scikit-base")

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "forecasting_tft.py": FORECASTING,
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_tslibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
