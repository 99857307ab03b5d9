"""The published ``timm`` package (pinned in the ``test`` extra), its own
unmodified code run on tracec (``tests/programs/timmlib``): programs written
as a user of timm writes them -- tiny models from configs (no downloads),
forward, loss, backward and optimizer steps -- whose output under
``tracec run`` must equal torch 2.13's.

- ``models.py``: architectures from timm's zoo at their smallest variants
  (ResNet, MobileNetV3, RegNet, ConvNeXt, DenseNet, ViT, DeiT distilled,
  Swin, LeViT, CoAtNet, MaxViT, MambaOut, NFNet, ByobNet, relative-position
  ViT; config kwargs shrink them): a training-mode forward, cross entropy,
  backward, gradient norm, an SGD step and an eval-mode forward.
- ``train.py``: timm's training utilities as its train.py wires them:
  ``create_optimizer_v2`` (sgd with nesterov, adamw, lamb, lars, adabelief,
  rmsproptf, lion, adan, nadamw, adafactorbv, lookahead; layer-wise decay),
  ``create_scheduler_v2`` (cosine with warmup, step, multistep, plateau,
  tanh, poly) and ``CosineLRScheduler.step_update``, the label-smoothing /
  soft-target / binary cross entropies, ``Mixup`` with CutMix,
  ``ModelEmaV2`` / ``ModelEmaV3`` (``torch._foreach_lerp_``), ``accuracy``
  and ``AverageMeter``.

timm imports torchvision; under torch that is the real torchvision, whose
compiled ops this environment lacks, so the reference runs through
``vision_oracle.torch_command`` (as tests/test_public_programs_models38.py).
- ``api.py``: the model API around a network: ``list_models`` /
  ``is_model``, ``pretrained_cfg`` / ``default_cfg`` and
  ``resolve_data_config``, ``forward_features`` / ``forward_head``,
  ``reset_classifier``, ``features_only=True`` feature maps (hooks,
  ``forward_intermediates`` and torch.fx through torchvision's
  ``create_feature_extractor``), ``timm.layers`` pieces and initializers,
  ``DropPath`` / ``drop_path_rate``, ``set_grad_checkpointing``,
  ``dispatch_clip_grad`` (norm, AGC), ``get_state_dict`` through
  ``torch.save`` / ``torch.load``.

The references are recorded (tests/torch_recordings.py); a test skips when
timm is not installed.
"""
import importlib.util
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program
from vision_oracle import recorded_torch_output

# Skipped where a library is missing, without importing it here: an import in
# the test process would cost every worker its import time, and some patch
# the real torch they import (Pyro re-registers torch.distributions' biject_to).
_MISSING = [m for m in ('timm',) if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING}")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "timmlib"
CASES = ["models.py", "train.py", "api.py"]
EXTRA = "TORCH_COMPILE_DISABLE=1 OMP_NUM_THREADS=1 timm==1.0.31 vision_oracle.torch_command"


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_timmlib_program_matches_torch(script, tmp_path):
    path = PROGS / script
    ref = recorded_torch_output(path, tmp_path, {**ENV, "TORCH_COMPILE_DISABLE": "1"}, EXTRA)
    check_program(path, ref, tmp_path, False)
