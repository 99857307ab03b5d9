"""Public programs, small configurations (``tests/programs/programs29``),
written for these tests after public research and scientific code (the
source each follows is named in its header): the Deep Implicit Layers
tutorial's deep equilibrium model (Anderson acceleration with
torch.linalg.solve, the implicit backward pass as a register_hook solving
the adjoint fixed point with autograd.grad), a filterpy-style Kalman filter
whose noise is learned through MultivariateNormal innovation
log-likelihoods, Stein variational gradient descent (activatedgeek/svgd:
the median-heuristic RBF kernel through numpy, autograd.grad scores,
X.grad = -phi into Adam) on a MixtureSameFamily, Deep Sets' digit sums
(masked sum pooling, permutation invariance), SINDy on the Lorenz system
(torch.gradient, torch.linalg.lstsq sequential thresholding, then the
masked gradient-trained coefficients of SindyAutoencoders), Mantas
Lukoševičius' minimalESN echo state network (torch.linalg.eigvals spectral
radius, a float64 ridge readout by torch.linalg.solve, generative mode), a
Lennard-Jones fluid under torchmd's velocity Verlet with autograd forces
and a pair potential fitted by force matching (create_graph), erichson's
consistent Koopman autoencoder (torch.svd / torch.pinverse initialisation,
the k x k consistency loss, clip_grad_norm_), the Deep Ritz method for a
Poisson problem on the disk (ReLU^3 residual blocks, Ritz energy through
autograd.grad create_graph, MultiStepLR), and heteroscedastic regression
with MC dropout (nn.GaussianNLLLoss, dropout left on at test time), and
the Fourier Neural Operator paper's Navier-Stokes data generator (a
Gaussian random field from complex torch.randn through ifftn, the
pseudo-spectral rfft2 / irfft2 vorticity solver with 2/3 dealiasing and
Crank-Nicolson steps, compiled) with a circular-padding CNN surrogate, and
hamiltorch-style HMC for a Bayesian MLP (flattened parameters through
functional_call, leapfrog with autograd.grad, Metropolis acceptance; its
step size small enough that the last-bit matmul differences do not
compound past the printed digits over 30 samples).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (each checks a compiled step against the same
step run eagerly).  The Kalman filter's step (linalg.solve, inv) compiles
(tests/test_compiled_linalg.py); the DEQ's runs eagerly: its solver reads
residuals with .item(), a graph break under torch.compile too.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "programs29"

CASES = ["deq_anderson.py", "kalman_filter.py", "svgd_mixture.py", "deep_sets_sum.py",
         "sindy_lorenz.py", "echo_state_network.py", "lj_md_force_matching.py",
         "koopman_ae_pendulum.py", "deep_ritz_poisson.py", "mc_dropout_heteroscedastic.py",
         "navier_stokes_grf.py", "hmc_bayesian_logreg.py"]
EAGER_FALLBACK = {"deq_anderson.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs29_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
