"""Public architecture-search, point-cloud, volumetric-segmentation,
detection and tree-structured programs, small configurations
(``tests/programs/models34``): quark0/darts's search (the OPS dict of
lambdas, MixedOp / Cell / Network with softmaxed alphas made by
Variable(..., requires_grad=True), genotype()'s numpy parse, the Architect's
second-order unrolled step: params flattened by torch.cat of views, the
momentum buffers read from the SGD state behind a bare except, autograd.grad
over the parameters, _construct_model_from_theta through load_state_dict,
the finite-difference Hessian-vector product through p.data.add_ /
sub_, v.grad = Variable(g.data); utils.accuracy's transposed-top-k view that
PyTorch refuses, clip_grad_norm_, CosineAnnealingLR); WangYueFT/dgcnn's
DGCNN (knn by matmul / topk, get_graph_feature's flat-index gather, repeat
and permute(...).contiguous(), EdgeConv Conv2d + BatchNorm2d shared as
attributes + LeakyReLU, max over neighbours, adaptive max / avg pool1d,
cal_loss's scatter label smoothing, SGD momentum + CosineAnnealingLR,
balanced accuracy in numpy); wolny/pytorch-3dunet's UNet3D and
ResidualUNet3D (create_conv from 'gcr' / 'cbr' order strings, DoubleConv /
SingleConv Sequentials, MaxPool3d encoders, nearest-interpolation + concat
and ConvTranspose3d + interpolate-to-size + sum decoders, the final
Softmax / Sigmoid only when testing, Dice / BCEDice losses over flatten's
permute().contiguous().view, expand_as_one_hot's scatter_ and ignore_index,
Adam + ReduceLROnPlateau); amdegroot/ssd.pytorch's MultiBoxLoss, PriorBox,
L2Norm and Detect (jaccard / match with index_fill_ and the bipartite
for-loop, encode / decode, log_sum_exp, hard negative mining by double sort
and its unviewed loss_c[pos] = 0 refusal, bool-mask sums, the greedy nms
with index_select(out=) into resized tensors); and dasguptar/treelstm.pytorch's
Child-Sum Tree-LSTM (recursive forward over Python Tree objects, leaf states
from inputs[0].detach().new(...).fill_(0.).requires_grad_(), split / repeat
gates, the Similarity head, a frozen padding_idx Embedding, the floor / ceil
target distribution, KLDivLoss, Adagrad with weight decay stepped every
batchsize pairs, Pearson / MSE metrics).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models34"

CASES = ["darts.py", "dgcnn.py", "unet3d.py", "ssd.py", "treelstm.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models34_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
