"""Public model programs, small configurations (``tests/programs/models10``):
masked autoencoders, diffusion transformers, set-prediction detection losses
and mobile classifiers.  facebookresearch/mae's MaskedAutoencoderViT
(random_masking's argsort / gather with ids_restore, 2-D sin-cos position
embedding from numpy, patchify / unpatchify einsums, norm_pix_loss) with its
train_one_epoch (per-iteration half-cycle cosine lr, gradient accumulation,
NativeScalerWithGradNormCount over a CUDA GradScaler that disables itself on
CPU) and its linear probing (a BatchNorm1d head, frozen features, the LARS
optimizer subclass with its own step, compiled with the lr changed before each
call); facebookresearch/DiT (sinusoidal timestep embedding, label dropout for
classifier-free guidance, adaLN-Zero blocks and their zero init, unpatchify,
forward_with_cfg, EMA) with a linear-beta q_sample and the epsilon MSE;
facebookresearch/detr's SetCriterion and HungarianMatcher (torch.cdist,
generalized_box_iou, linear_sum_assignment on the .cpu() cost blocks,
_get_src_permutation_idx, aux losses, PostProcess) and its model (NestedTensor
padding masks, PositionEmbeddingSine, FrozenBatchNorm2d loading a BatchNorm2d
state dict, IntermediateLayerGetter, the post- and pre-norm transformer on
nn.MultiheadAttention with key_padding_mask); torchvision's
MobileNetV3-small as published (InvertedResidualConfig, _make_divisible,
SqueezeExcitation with Hardsigmoid, Hardswish, torch._C._log_api_usage_once)
trained with the reference recipe's RMSprop / StepLR and SGD nesterov.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict, so under torch that line
is eager against eager and under tracec it is ``tracec.compile`` against
eager).  Weights and data come from numpy, so the two runs compute the same
numbers: the outputs must have the same lines (numbers masked, spaces
dropped) and every number must agree to a float32 tolerance, except on lines
marked ``[rng]``.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models10"

CASES = ["mae.py", "mae_linprobe.py", "dit.py", "detr_criterion.py", "detr_model.py", "mobilenetv3.py"]
# Programs whose compiled step tracec.compile runs eagerly, and says so:
# DETR's HungarianMatcher hands the cost matrix to numpy (.cpu() then
# linear_sum_assignment) inside the step, and the matching it returns decides
# which predictions the losses index (torch.compile breaks its graph there).
EAGER_FALLBACK = {"detr_criterion.py"}
# Their compiled training steps take ~9-10 s to compile from a cold cache on
# one CPU (MobileNetV3's even on the three-block network it compiles; DETR's
# backbone, transformer and heads with the AdamW step); 2-3 s warm.
SLOW = {"mobilenetv3.py", "detr_model.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [
    pytest.param(c, id=c[:-3], marks=[pytest.mark.slow] if c in SLOW else []) for c in CASES])
def test_models10_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
