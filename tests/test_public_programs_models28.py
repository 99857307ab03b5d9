"""Public attention, detection, speech, recurrent and implicit-network
programs, small configurations (``tests/programs/models28``):
lucidrains/reformer-pytorch (LSH attention: random-rotation hashing by
einsum, argmax over [rotated, -rotated], the sort of bucket * seqlen +
ticker with sort_key_val and argsort, batched_index_select by gather with
an expanded index, chunks looking one back by roll, masked_fill_ with
-finfo.max and the self-attention value, the within-bucket mask and the
duplicate-attention counts (chunked_sum), logsumexp softmax, the outputs
unsorted by scatter; reversible.py's Deterministic with get_rng_state,
torch.cuda._initialized, torch.utils.checkpoint's get_device_states /
set_device_states, fork_rng / set_rng_state, ReversibleBlock.backward_pass recomputing under
enable_grad inside the custom _ReversibleFunction, checked against the
irreversible path, dropout replay included); eriklindernoren/PyTorch-YOLOv3
(a Darknet parsed from a cfg string into an nn.ModuleList of nn.Sequential
with BatchNorm2d(momentum=0.9), route / shortcut / upsample, YOLOLayer's
meshgrid grid and permuted view, build_targets with BoolTensor /
FloatTensor masks, index_put targets and a boolean anchor mask inside an
index, masked MSE / BCE / BCEWithLogits losses, the later utils/loss.py
with CIoU and anchor-ratio targets, non_max_suppression through
torchvision.ops.nms); SeanNaren/deepspeech.pytorch's DeepSpeech2 (MaskConv
over lengths with BoolTensor masks and narrow().fill_, Hardtanh(0, 20,
inplace=True), SequenceWise BatchNorm1d, pack_padded_sequence(
enforce_sorted=False) / pad_packed_sequence around bidirectional LSTMs with
the directions summed, Lookahead's padded depthwise Conv1d, get_seq_lens,
spectrograms by torch.stft with a Hann window and log1p, AudioDataLoader
over DSRandomSampler, _collate_fn's narrow().copy_, CTCLoss(reduction='sum', zero_infinity=True), the greedy
decoder); an xLSTM LM in plain torch (sLSTM with the exponential input gate
and its torch.maximum stabilizer, logsigmoid forget gates and the
normalizer; mLSTM's einsum matrix memory against NX-AI/xlstm's
parallel_stabilized_simple; CausalConv1d by a left F.pad;
GroupNorm(num_groups=heads); block-diagonal einsum projections; AdamW with
clip_grad_norm_); and vsitzmann/siren's explore_siren notebook (SineLayer
and its omega_0-scaled uniform_ init under no_grad, get_mgrid by linspace /
meshgrid(indexing='ij') / stack, coords cloned, detached and requiring
grad, gradient / divergence / laplace by autograd.grad with
create_graph=True, forward_with_activations with retain_grad, the Poisson
fit on gradients: a double backward through sin, compiled too).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_models21 import detection_reference
from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture
from vision_oracle import needs_torchvision

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models28"

CASES = ["reformer.py", "deepspeech2.py", "xlstm.py", "siren.py"]
# (deepspeech2: pack_padded_sequence needs the lengths, computed from the
# input percentages, as Python numbers: the compiled step runs eagerly)
EAGER_FALLBACK = {"deepspeech2.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models28_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)


@needs_torchvision
def test_models28_yolov3_matches_torch(tmp_path):
    # torchvision's compiled nms cannot load under this torch build: the
    # reference runs with models21's plain-torch greedy nms in its place
    script = PROGS / "yolov3.py"
    ref = detection_reference(script, tmp_path)
    # the loss selects by boolean masks (x[obj_mask]: data-dependent
    # shapes): the compiled step runs eagerly
    check_program(script, ref, tmp_path, True)
