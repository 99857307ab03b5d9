"""Public generative, segmentation, self-supervised and offline-RL programs,
small configurations (``tests/programs/models20``):
eriklindernoren/PyTorch-GAN's wgan_gp.py and wgan.py and caogang/wgan-gp's
gan_toy.py (the gradient penalty through autograd.grad(create_graph=True,
grad_outputs=ones) at interpolates, the n_critic loop, Adam(betas=(0.5,
0.9)), RMSprop with the critic's weights clipped by p.data.clamp_,
backward(mone) / backward(one), p.requires_grad toggled around the critic,
gan_cifar.py's convolutional critic whose input gradient is viewed as
gradients.view(N, -1), compiled too);
lucidrains/rectified-flow-pytorch and facebookresearch/flow_matching's
standalone example (a time-conditioned conv net with the sinusoidal
embedding and scale-shift, the logit-normal times, the pseudo-Huber loss
through einops.reduce, Euler sampling under torch.no_grad, the Flow MLP's
midpoint step, EMA through AveragedModel(get_ema_multi_avg_fn) and lerp_,
MeanFlow trained through torch.func.jvp of the model);
milesial/Pytorch-UNet (DoubleConv / Down / Up with bilinear upsampling or
ConvTranspose2d and the F.pad to the skip's size, dice_coeff /
multiclass_dice_coeff / dice_loss, RMSprop(foreach=True),
ReduceLROnPlateau('max'), disabled autocast and GradScaler, one_hot
masks permuted, evaluate under inference_mode, the checkpoint with
'mask_values', predict's interpolate and threshold); facebookresearch/dino
(a tiny ViT with interpolate_pos_encoding's fractional bicubic resize for
the local crops, MultiCropWrapper's unique_consecutive / cumsum grouping
and torch.empty(0) concatenation, DINOHead with the weight-normed last
layer, DINOLoss with its center buffer replaced by the EMA, the numpy
cosine schedules written into AdamW's two parameter groups, clip_gradients,
cancel_gradients_last_layer, the teacher EMA through .data, the checkpoint
whose Namespace the default weights_only load refuses);
kzl/decision-transformer (the GPT-2 of transformers 4.5 written out: Conv1D
through addmm, the uint8 causal buffer, the extended attention mask,
gelu_new, layer_past caching; the (R, s, a) token interleaving by stack /
permute / reshape, get_action's left padding, get_batch's numpy sampling
and float64 masks, the boolean-masked action loss, LambdaLR warmup, and
evaluate_episode_rtg's histories grown by torch.cat under no_grad).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models20"

CASES = ["wgan_gp.py", "rectified_flow.py", "pytorch_unet.py", "dino.py", "decision_transformer.py"]
# the training step selects the unpadded actions by a boolean mask (a shape
# that depends on the data): tracec.compile runs it eagerly, as it says
EAGER_FALLBACK = {"decision_transformer.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models20_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
