"""Public model programs, small configurations (``tests/programs/models13``):
scientific machine learning, reinforcement learning, video, contrastive,
super-resolution and set models.  zongyi-li/fourier_neural_operator's
fourier_1d.py / fourier_2d.py (SpectralConv1d / 2d with complex weights from
``torch.rand(..., dtype=torch.cfloat)``, torch.fft.rfft / rfft2, the complex
einsum, irfft / irfft2, LpLoss, UnitGaussianNormalizer, Adam + StepLR); a
Burgers PINN in the PyTorch port of maziarraissi/PINNs (u_t, u_x, u_xx
through autograd.grad(create_graph=True), Adam then LBFGS with strong-Wolfe
line search over loss_func) and a 1-D Poisson PINN; sfujim/TD3 (Actor / twin
Critic, copy.deepcopy'd targets, clipped target-policy noise, the delayed
policy update and the ``.data.copy_`` soft updates, the numpy ReplayBuffer,
save / load); ndrplz/ConvLSTM_pytorch (ConvLSTMCell, multi-layer ConvLSTM
with batch_first and return_all_layers); Spijkervet/SimCLR (NT_Xent with
fill_diagonal_, CosineSimilarity(dim=2), torch.diag offsets, the projector,
the linear probe); leftthomas/SRGAN (residual blocks with PReLU,
PixelShuffle upsampling, the LeakyReLU discriminator, GeneratorLoss with TV
loss); juho-lee/set_transformer (MAB / SAB / ISAB / PMA with the heads split
by torch.split / torch.cat, the max-regression demo).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models13"

CASES = ["fno.py", "pinn.py", "td3.py", "convlstm.py", "simclr.py", "srgan.py",
         "set_transformer.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models13_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
