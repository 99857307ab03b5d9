"""Public geometric-learning and detection programs, small configurations
(``tests/programs/models21``): yanx27/Pointnet_Pointnet2_pytorch
(square_distance, index_points' batch gather, farthest point sampling with
torch.randint's start and boolean-mask updates, query_ball_point's sort and
masking with N, set abstraction (MSG) and feature propagation, the
classifier trained with NLL over log_softmax, Adam and StepLR);
vgsatorras/egnn (E_GCL with unsorted_segment_sum / mean through new_full
and scatter_add_, attention, tanh, normalize, gcl.py's coords_range tensor
attribute and in-place coord update, qm9's masked E_GCL_mask over padded
molecules, the E(n) equivariance check, Adam and CosineAnnealingLR); the
Attentive Neural Process of deepmind/neural-processes as its PyTorch ports
write it (the GP curve sampler with torch.cholesky of the float64 kernel,
uniform / laplace / dot-product / nn.MultiheadAttention cross-attention,
Normal latents with kl_divergence, the decoder's log_prob);
suragnair/alpha-zero-general (OthelloNNet's BatchNorm conv tower with the
log_softmax policy and tanh value, NNetWrapper's training from numpy boards
through torch.FloatTensor, predict's .data.cpu().numpy(), checkpoints via
torch.save({'state_dict': ...}), MCTS self-play on 6x6 Othello); a
minimal Faster R-CNN assembled from torchvision/models/detection's modules
(AnchorGenerator, RPN, BoxCoder, Matcher, BalancedPositiveNegativeSampler,
RoIHeads over MultiScaleRoIAlign) with the torchvision.ops box functions,
roi_align, nms / batched_nms and sigmoid_focal_loss.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.  The
detection program's reference imports the real torchvision 0.28, whose
compiled kernels cannot load against the CPU torch: its registrations are
stubbed (``vision_oracle``), roi_align then runs torchvision's own
pure-tensor ``_roi_align``, and nms, which has no Python fallback, is a
plain-torch transcription of the CPU kernel's greedy rule (DETECTION_DRIVER).
"""
import pathlib
import subprocess
import sys

import pytest

import torch_recordings
from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture
from vision_oracle import needs_torchvision

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models21"

CASES = ["pointnet2.py", "egnn.py", "attentive_np.py", "alphazero_othello.py"]
# (farthest_point_sample's boolean-mask update, distance[mask] = dist[mask],
# records as a masked write since models27: the compiled step compiles)
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models21_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)


DETECTION_DRIVER = """
import runpy, sys, types
for _n in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
    sys.modules.setdefault(_n, types.ModuleType(_n))
import torch
import torchvision
import torchvision.ops.boxes as _boxes


def greedy_nms(boxes, scores, iou_threshold):
    # torchvision's CPU nms kernel: by falling score (stable), each kept box
    # drops the later ones whose IoU with it exceeds the threshold
    order = torch.sort(scores, descending=True, stable=True)[1]
    iou = _boxes.box_iou(boxes, boxes)
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        suppressed |= iou[i] > iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


_boxes.nms = torchvision.ops.nms = greedy_nms
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def detection_reference(script, tmp_path):
    """torch's output of the detection program ``script`` (its recording,
    else a run under DETECTION_DRIVER: torchvision's Python code with the
    plain-torch greedy nms)."""
    env = {**ENV, "TORCH_COMPILE_DISABLE": "1"}

    def run():
        r = subprocess.run([sys.executable, "-c", DETECTION_DRIVER, str(script)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, "torch failed:\n" + r.stderr[-4000:]
        return r.stdout

    return torch_recordings.torch_output(
        f"{script.parent.name}/{script.stem}", torch_recordings.program_files(script), [],
        "TORCH_COMPILE_DISABLE=1 OMP_NUM_THREADS=1 torchvision==0.28.0 greedy-nms driver\n" + DETECTION_DRIVER,
        run)


@needs_torchvision
def test_models21_faster_rcnn_matches_torch(tmp_path):
    script = PROGS / "faster_rcnn_lite.py"
    ref = detection_reference(script, tmp_path)
    # the RPN's and RoI heads' proposal filtering (nonzero, nms) is
    # data-dependent: the compiled step runs eagerly
    check_program(script, ref, tmp_path, True)
