"""Public diffusion, flow and neural-field programs, small configurations
(``tests/programs/models32``): CompVis/stable-diffusion's latent-diffusion
UNet (timestep_embedding, TimestepEmbedSequential dispatching by
isinstance, ResBlocks with use_scale_shift_norm's chunked embedding,
zero_module, GroupNorm32 computing in float32, SpatialTransformers with
einops rearrange / repeat and einsum cross-attention, GEGLU, nearest
Upsample and strided Downsample, the skip concatenation), its DDPM
(register_schedule's numpy buffers, q_sample through extract_into_tensor's
gather, eps and v objectives, the learned logvar), LitEma's dot-less shadow
buffers and 0-d decay arithmetic, a ClassEmbedder cond stage and
DDIMSampler's classifier-free guidance; NVIDIA/waveglow (the
@torch.jit.script fused_add_tanh_sigmoid_multiply with its IntTensor
channel count, Invertible1x1Conv's QR init, logdet and cached inverse, WN
with weight_norm convs and dilations 2 ** i, unfold-squeezed audio and
upsampled spectrograms, early outputs, the affine coupling, WaveGlowLoss,
infer, remove_weightnorm, a pickled-model checkpoint); and
yashbhalgat/HashNeRF-pytorch (the int64 xor spatial hash, voxel vertices,
the multiresolution HashEmbedder with trilinear interpolation, SHEncoder,
NeRFSmall, raw2outputs with the Categorical sparsity loss, the total
variation loss, RAdam parameter groups and the decay written into them);
and lucidrains/electra-pytorch (prob_mask_like, mask_with_tokens' reduce,
get_mask_subset_with_prob's topk / scatter_, the hidden-layer hook,
nonzero-indexed generator logits and replaced-token detection, the
transposed cross_entropy with ignore_index, tied embeddings); and
facebookresearch/deit's distillation (the distilled ViT's cls + dist
tokens and eval-mode average, DistillationLoss soft / hard with kl_div's
log_target, RASampler, timm's smoothing / soft-target losses and topk
accuracy, MAE-style layer-wise lr groups with a warm-up cosine by
fractional epoch, clip_grad_norm_, a no_grad CNN teacher).

Each runs under ``tracec run`` and, as the reference, under torch 2.13
with ``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps
against the same steps run eagerly, and print the verdict); weights and
data come from numpy, and lines marked ``[rng]`` are not compared
numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models32"

CASES = ["ldm_unet.py", "waveglow.py", "hashnerf.py", "electra.py", "deit_distill.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models32_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
