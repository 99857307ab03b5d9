"""Real published time-series packages run unmodified on tracec
(``tests/programs/tslibs``):

- pytorch-forecasting (on the ``lightning`` package): a TimeSeriesDataSet
  on a synthetic pandas panel (group normalizer, label encoders, known and
  unknown reals), TemporalFusionTransformer.from_dataset fitted one epoch by
  a lightning Trainer, raw predictions and ``interpret_output``,
  a checkpoint reloaded with load_from_checkpoint, NBeats, N-HiTS,
  DeepAR (normal, negative-binomial and low-rank multivariate normal
  losses, sampled quantiles), RecurrentNetwork, TiDE and TimeXer
  (``forecasting_tft.py``);
- tsai (on fastai): the README's TSClassifier (InceptionTimePlus) fitted,
  exported, reloaded with load_learner and predicting with get_X_preds;
  get_ts_dls with ts_learner over InceptionTime, TST, LSTM and LSTM_FCN; a
  TSRegressor (TSTPlus), a TSForecaster on SlidingWindow / TimeSplitter
  windows, and 28 more of its architectures (ResNet, XceptionTime, TCN,
  mWDN, XCM, gMLP, PatchTST, TSPerceiver, ConvTranPlus, ...) forward and
  backward (``tsai_quickstart.py``).

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions)."""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "tslibs"

FORECASTING = ("pytorch-forecasting", "lightning", "pytorch-lightning", "pandas", "scikit-base")
TSAI = ("tsai", "fastai", "fastcore", "fasttransform", "imbalanced-learn", "scikit-learn", "pandas")

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "forecasting_tft.py": FORECASTING,
    "tsai_quickstart.py": TSAI,
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_tslibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
