"""Public optical-flow, depth, time-series, normalizing-flow and LoRA
programs, small configurations (``tests/programs/models30``):
princeton-vl/RAFT (the all-pairs CorrBlock and its avg_pool2d pyramid,
bilinear_sampler over grid_sample(align_corners=True), coords_grid from
meshgrid / stack(coords[::-1]), InputPadder's replicate padding, the
instance / batch norm BasicEncoders, SepConvGRU, BasicMotionEncoder, the
convex upsampling of F.unfold(8 * flow) with the softmaxed 9-neighbour mask,
the detached iterative refinement, sequence_loss with its bool valid mask
and EPE metrics, AdamW + OneCycleLR, a disabled GradScaler,
clip_grad_norm_, freeze_bn; the update block under torch.compile);
nianticlabs/monodepth2 (ResnetEncoder and the multi-image pose encoder,
DepthDecoder's tuple-keyed OrderedDict of reflection-padded ELU convs,
PoseDecoder, rot_from_axisangle / get_translation_matrix by indexing writes,
BackprojectDepth's requires_grad=False Parameters, Project3D's in-place
division on a permuted view, border grid_sample, SSIM, automasking with
torch.min over the identity and reprojection losses, the edge-aware
smoothness, Adam + StepLR, the depth metrics with median scaling;
compute_reprojection_loss under torch.compile); thuml/Time-Series-Library's
TimesNet (FFT_for_Period's rfft / topk / numpy periods, the 2-D Inception
convs over period-folded series, circular TokenEmbedding, fixed and timeF
embeddings, the Non-stationary normalization, EarlyStopping with
torch.save / torch.load checkpoints, adjust_learning_rate, np.average over
0-d tensors); bayesiains/nflows' rational-quadratic spline couplings
(searchsorted by comparison sums, softmax bin widths, cumsum + F.pad knots,
gather, the inverse's quadratic root, in-place slices of a net's output,
boolean-mask tuple assignment), BatchNorm / ReversePermutation /
CompositeTransform, StandardNormal's float64 log-normalizer, maximum
likelihood with Adam + CosineAnnealingLR, and a torch.where-masked RealNVP
compiled; and microsoft/LoRA's loralib (LoRA Linear / Embedding /
MergedLinear mixins with fan_in_fan_out, .data-based merging in
train(mode), the grouped-conv1d merge and the bool-mask zero_pad,
mark_only_lora_as_trainable / lora_state_dict) fine-tuning its NLG GPT-2
(Conv1D addmm, legacy reduce=False cross-entropy, load_state_dict
(strict=False), past-key decoding).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models30"

CASES = ["raft.py", "monodepth2.py", "timesnet.py", "spline_flows.py", "lora.py"]
# FFT_for_Period turns the top frequencies into numpy periods that size the
# reshapes in Python (torch.compile breaks the graph there too)
EAGER_FALLBACK = {"timesnet.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models30_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
