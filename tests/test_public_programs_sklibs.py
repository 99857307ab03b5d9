"""Real published packages run unmodified on tracec: scikit-learn-style
training wrappers and metric-learning / tabular libraries that public
PyTorch programs import (``tests/programs/sklibs``):

- skorch: NeuralNetClassifier / NeuralNetRegressor on sklearn's
  make_classification / make_regression (fit, predict_proba, score,
  history), in a Pipeline after a StandardScaler, GridSearchCV with cv=2,
  callbacks (EpochScoring, EarlyStopping, LRScheduler, Checkpoint /
  LoadInitState into the working folder), save_params / load_params and
  pickling; NeuralNetBinaryClassifier, several inputs in a SliceDict with
  a predefined validation split, GradientNormClipping / BatchScoring /
  WarmRestartLR / CyclicLR / Freezer / Initializer / TrainEndCheckpoint,
  partial_fit, sklearn's clone and cross_val_score, a GRU classifier, a
  plain NeuralNet, compile=True (tracec compiles the module and the
  criterion; the reference runs eagerly), skorch's ExactGPRegressor on
  GPyTorch (fit, predict with std, confidence_region, sample)
  (``skorch_quickstart.py``);
- pytorch-metric-learning: an embedding net trained with a
  TripletMarginMiner / TripletMarginLoss (CosineSimilarity,
  ThresholdReducer) on batches an MPerClassSampler draws, scored by
  AccuracyCalculator with a torch k-NN (no faiss); five miners, five
  distances, nineteen losses / reducer combinations forward and backward,
  eight losses with their own parameters (ArcFace, CosFace, ProxyAnchor,
  SoftTriple, ...) trained by their own optimizer, SelfSupervisedLoss,
  CrossBatchMemory and regularizers, then every other loss (Histogram,
  PNP, SmoothAP, VICReg, LargeMarginSoftmax, SphereFace, ...), miner
  (DistanceWeighted draws with torch.multinomial) and regularizer, and the
  library's TrainWithClassifier trainer and GlobalEmbeddingSpaceTester
  (``metric_learning.py``);
- pytorch-tabnet: TabNetClassifier (a categorical column embedded,
  sparsemax masks, StepLR) and TabNetRegressor (entmax, two targets) fitted
  two epochs with eval sets and metrics, predict / predict_proba, explain,
  feature_importances_, save_model / load_model (a zip in the working
  folder), TabNetMultiTaskClassifier, TabNetPretrainer whose weights start
  a classifier, class weights (a WeightedRandomSampler), SMOTE
  augmentations, grouped features, a custom metric and loss, warm_start
  (``tabnet_quickstart.py``);
- torchensemble: the README's VotingClassifier (set_criterion /
  set_optimizer / set_scheduler, fit with a test loader, evaluate,
  predict, the checkpoint saved into the working folder, which
  ``io.load`` reads once the pickled criterion is allowed with
  ``torch.serialization.safe_globals``), Fusion, Bagging, Gradient
  Boosting, Snapshot, Adversarial Training, Fast Geometric, Soft Gradient
  Boosting and Neural Forest classifiers, five regressors; the library's
  training log is part of the output (``torchensemble_quickstart.py``).

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions).  The programs seed torch, numpy and
Python's ``random``; tracec's draws equal PyTorch's, so shuffling, dropout
and initialisation compare strictly.
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "sklibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "skorch_quickstart.py": ("skorch", "scikit-learn", "gpytorch"),
    "metric_learning.py": ("pytorch-metric-learning",),
    "tabnet_quickstart.py": ("pytorch-tabnet", "scikit-learn"),
    "torchensemble_quickstart.py": ("torchensemble",),
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_sklibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
