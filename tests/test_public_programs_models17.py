"""Public model programs, small configurations (``tests/programs/models17``):
greydanus/hamiltonian-nn's HNN (the symplectic gradient from
torch.autograd.grad(..., create_graph=True), the loss on it and the double
backward through it, Adam, rk4 integration of the learned field); the
Growing Neural Cellular Automata PyTorch port (depthwise Sobel perception
with F.conv2d(groups=...), the stochastic update mask, the alive mask from
F.max_pool2d, pool sampling, per-parameter gradient normalization);
torchvision's DeepLabV3 ASPP head with the segmentation reference's training
(dilated convolutions, the bilinear image-pooling branch, BatchNorm,
CrossEntropyLoss(ignore_index=255), the poly LambdaLR, mIoU from
torch.bincount); DALLE-pytorch's DiscreteVAE (F.gumbel_softmax with
hard=True, the KL to the uniform categorical, temperature annealing).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models17"

CASES = ["hnn.py", "growing_nca.py", "deeplabv3_aspp.py", "gumbel_dvae.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models17_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
