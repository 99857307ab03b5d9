"""Public reinforcement-learning, graph, generative, face-recognition and
continuous-time RNN programs, small configurations
(``tests/programs/models33``): vwxyzjn/cleanrl's ppo_atari.py (layer_init
with orthogonal_ / constant_, the Nature-CNN agent on uint8 frames / 255,
Categorical(logits=...) sample / log_prob / entropy, rollout storage, lr
annealing through param_groups, the GAE loop, numpy-shuffled minibatches,
approx_kl and clipfracs, clipped policy and value losses, clip_grad_norm_,
Adam(eps=1e-5), numpy explained variance) on a tiny numpy vector env;
PetarV-/DGI's Deep Graph Infomax (the sparse torch.spmm and dense bmm GCN
with PReLU, the masked AvgReadout, the nn.Bilinear discriminator on
expand_as summaries, numpy-permuted corruption, BCEWithLogitsLoss, early
stopping through torch.save / torch.load of the state_dict, the
legacy torch.sparse.FloatTensor constructor, the LogReg evaluation);
pclucas14/pixel-cnn-pp's PixelCNN++ (concat_elu, the RGB and 1-channel
discretized mixture of logistics losses with their float-mask selects,
ZeroPad2d shifts, weight-normed shifted convolutions and deconvolutions,
gated_resnet, StepLR, bits per dim, mixture sampling);
ronghuaiyang/arcface-pytorch's ArcFace / CosFace / SphereFace heads and
FocalLoss with KaiyangZhou/pytorch-center-loss's CenterLoss (addmm_ with
beta / alpha, the centers' own SGD with rescaled gradients) on an
IR-ResNet with SE blocks; and mlech26l/ncps' LTC (a dict of registered
Parameters, non-trainable wiring masks, the unfolded ODE solver, weight
constraints through .data) and CfC (default / no_gate / pure modes,
timespans, sequence-first input, sparsity masks).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models33"

CASES = ["ppo_atari.py", "dgi.py", "pixelcnn_pp.py", "arcface_center.py", "ncps_ltc_cfc.py"]

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models33_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, False)
