"""fastai (with fastcore, fasttransform, fastprogress, fastdownload) runs
unmodified on tracec (``tests/programs/fastlibs``):

- ``fastai_vision.py``: the vision quickstart on generated PNGs:
  ``ImageDataLoaders.from_name_func``, ``vision_learner(resnet18,
  pretrained=False, metrics=error_rate)``, ``fit_one_cycle``, the
  recorder's losses and learning rates, ``predict``, ``get_preds``,
  ``validate``, ``save`` / ``load`` and ``export`` (cloudpickle) /
  ``load_learner``; a WGAN (``GANLearner.wgan``, ``basic_generator`` /
  ``basic_critic``, noise batches from a ``DataBlock``);
- ``fastai_applications.py``: fastai's other applications and its
  mid-level API: the tabular quickstart
  (``TabularDataLoaders.from_df`` with Categorify / FillMissing /
  Normalize, ``tabular_learner``, ``get_preds``, ``predict``, ``test_dl``,
  ``export`` / ``load_learner``); the mid-level ``Learner`` over a plain
  model with fastai's SGD / ranger / Adam, a custom ``Callback``,
  ``MixUp``, ``SaveModelCallback``, ``EarlyStoppingCallback``,
  ``fit_flat_cos``, ``fit_sgdr``, ``lr_find``, ``freeze`` / ``unfreeze``
  over a splitter with discriminative lrs, ``GradientAccumulation``,
  ``GradientClip``, ``CSVLogger``, ``ReduceLROnPlateau``, F1 / ROC AUC
  metrics, ``Learner.summary``, ``to_fp16`` (disabled on a CPU);
  fastai's nine optimizers stepped by hand; a ``DataBlock`` of images (read
  by two workers, which fastai shards batches over) with
  ``aug_transforms`` (random affine / lighting batches) and a small CNN of
  fastai's layers trained on it with ``CutMix``, label smoothing,
  ``ActivationStats``, ``tta``, ``ClassificationInterpretation``,
  ``hook_outputs``, focal loss and channels-last training, and a plain
  PyTorch loop over those DataLoaders (TensorImage batches through torch
  modules, ``preds == TensorCategory``);
  collaborative filtering (``CollabDataLoaders``, ``collab_learner`` dot
  product and neural); an AWD-LSTM language model trained from scratch
  (``language_model_learner``, ``Perplexity``, ``predict`` sampling words,
  ``save_encoder``) and a text classifier on its encoder
  (``text_classifier_learner``, ``load_encoder``, ``freeze_to``);
  ``TensorBase`` /
  ``TensorImage`` / ``TensorMask`` types and metadata kept through torch
  functions, ``cast``, ``retain_type``, a saved ``TensorImage``.

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
    "fastai_applications.py": FASTAI,
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_fastlibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
