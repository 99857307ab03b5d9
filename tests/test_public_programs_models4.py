"""Public model programs, small configurations (``tests/programs/models4``):
fxia22's pointnet.pytorch (STN3d / STNkd spatial transformers through
torch.bmm, PointNetfeat's max over points, PointNetCls / PointNetDenseCls,
feature_transform_regularizer, the classification and segmentation training
loops with the mIOU benchmark), Blealtan's efficient-kan (KANLinear's
B-spline bases, curve2coeff through torch.linalg.lstsq, update_grid's
sorted-quantile grids, regularization_loss; LBFGS on the published toy
regression and the AdamW / ExponentialLR MNIST-style loop), lukemelas'
EfficientNet-PyTorch (the memory-efficient Swish autograd.Function,
TensorFlow-style same-padding convolutions through F.pad / ZeroPad2d,
MBConvBlock with squeeze-and-excitation, drop_connect, round_filters and
BlockDecoder, the ImageNet example's accuracy(topk) / AverageMeter loop),
tonylins' pytorch-mobilenet-v2 (InvertedResidual's depthwise convolutions
with groups=hidden_dim, in-place ReLU6, _initialize_weights, a checkpoint
through torch.save / torch.load), kuangliu's pytorch-cifar (DenseNet-BC's
Bottleneck / Transition with torch.cat, PreActResNet's pre-activation
blocks with `out += shortcut`, main.py's train / test with SGD, nesterov,
CosineAnnealingLR, correct / total counting, checkpoints and --resume),
aladdinpersson's YOLOv1 (Yolov1 from architecture_config, YoloLoss with its
index-slice assignments and int64 best-box masks, intersection_over_union
in both formats, non_max_suppression, mean_average_precision with
torch.trapz, cellboxes_to_boxes, the VOCDataset label matrix, train_fn)
and yenchenlin's nerf-pytorch (the positional Embedder, NeRF with skips and
view directions, get_rays / ndc_rays, sample_pdf's searchsorted + gather
inverse-CDF sampling, raw2outputs' exclusive cumprod, hierarchical
render_rays, the training loop's learning-rate decay).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (inductor would take minutes on the CI's two
cores; the programs check their compiled steps against the same steps run
eagerly, and print the verdict, so under torch that line is eager against
eager and under tracec it is ``tracec.compile`` against eager).  Weights
and data come from numpy, so the two runs compute the same numbers: the
outputs must have the same lines (numbers masked, spaces dropped) and every
number must agree to a float32 tolerance, except on lines marked ``[rng]``.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import (ENV, assert_output_matches, run_tracec,
                                             torch_refs_fixture)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models4"

CASES = ["pointnet.py", "efficient_kan.py", "efficientnet.py", "mobilenet_v2.py",
         "pytorch_cifar.py", "yolov1.py", "nerf.py"]
# Programs with a compiled step tracec.compile runs eagerly: none.  NeRF's
# render_rays tests its outputs for NaN in Python (`if (torch.isnan(x).any()
# or ...) and DEBUG`): a speculated decision, so its step compiles too.
EAGER_FALLBACK: set = set()


torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


def _run_tracec(script, cwd):
    return run_tracec(PROGS / script, cwd)


SLOW: set = set()   # none: mobilenet_v2, pytorch_cifar and yolov1 take 5-7 s with a cold compile cache


@pytest.mark.parametrize("script", [
    pytest.param(c, id=c[:-3], marks=[pytest.mark.slow] if c in SLOW else []) for c in CASES])
def test_models4_program_matches_torch(script, torch_refs, tmp_path):
    out, err = _run_tracec(script, tmp_path)
    assert ("running eagerly from now on" in err) == (script in EAGER_FALLBACK), err[-3000:]
    assert_output_matches(out, torch_refs(script), strict=True)
