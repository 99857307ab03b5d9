"""Public self-supervised, graph-embedding, normalizing-flow, vocoder and
MLP / vision-transformer programs, small configurations
(``tests/programs/models35``): facebookresearch/vicreg's main_vicreg.py
(the Projector from an mlp spec string, the invariance / variance /
covariance loss with off_diagonal's flatten-view trick and its in-place
pow_, FullGatherLayer as an autograd.Function outside an initialized
process group, the LARS optimizer with its weight-decay and adaptation
filters and nested torch.where, adjust_learning_rate's warmup and cosine,
torch.cuda.amp's GradScaler / autocast disabled on CPU); and
pyg-team/pytorch_geometric's Node2Vec in plain torch (a sparse=True
nn.Embedding stepped by SparseAdam, the DataLoader with collate_fn=sample,
pos_sample / neg_sample windows, the log-sigmoid losses with EPS, a numpy
logistic-regression test, the sparse gradient's layout and coalesce(),
rw.unfold windows, DeepWalk-style EmbeddingBag(sparse=True) bags with SGD);
and rtqichen/ffjord's CNF on 8gaussians (ConcatLinear_v2 / ConcatSquashLinear
in an ODEnet, ODEfunc's Hutchinson and brute-force divergences through
autograd.grad(create_graph=True) under set_grad_enabled(True), torchdiffeq's
fixed-grid rk4 written out with its torch.ceil(...).item() grid, the
standard-normal log-likelihood loss, RunningAverageMeter, Adam; the compiled
step differentiates through the double backward); and
descriptinc/melgan-neurips' MelGAN (weight-normed Conv1d / ConvTranspose1d
with output_padding, ReflectionPad1d ResnetBlocks, Audio2Mel's reflect pad /
stft(return_complex=False) / numpy mel filterbank / log10 clamp, the
multi-scale NLayerDiscriminator with grouped convs and the
count_include_pad=False AvgPool1d, hinge and feature-matching losses, Adam
with betas=(0.5, 0.9)); and lucidrains/g-mlp-pytorch's gMLP (the Conv1d
SpatialGatingUnit with its causal triu_ mask and F.conv1d, the tiny-attention
gate residual) with facebookresearch/deit's CaiT (talking-heads attention,
LayerScale blocks, class attention over the expanded cls token, AdamW groups
from no_weight_decay, timm's DropPath and LabelSmoothingCrossEntropy).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models35"

CASES = ["vicreg.py", "node2vec.py", "ffjord.py", "melgan.py", "gmlp_cait.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models35_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
