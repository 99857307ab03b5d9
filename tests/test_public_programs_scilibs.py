"""Real published scientific-ML packages run unmodified on tracec
(``tests/programs/scilibs``):

- torchsde: the README's general-noise SDE through sdeint,
  BrownianInterval / BrownianTree / BrownianPath queries (space-time Levy
  area), diagonal-noise Ito and Stratonovich SDEs through every fixed-step
  solver and adaptive srk, a neural SDE trained by backprop with logqp's KL
  term and by sdeint_adjoint, sde_gan.py's general-noise generator through
  reversible_heun with its exact adjoint (equal to backprop's gradients),
  log_ode, scalar and additive noise (davie / foster Levy areas), named
  drift / diffusion, extra solver state, a float64 SDE solved adaptively
  forward and by an adaptive adjoint (``torchsde_sdeint.py``);
- schedulefree, prodigyopt, dadaptation: every schedule-free optimizer
  (train() / eval(), closure, reference and paper variants, the wrapper),
  Prodigy and five D-Adaptation optimizers training an MLP, and a
  schedule-free optimizer resumed from another's live state_dict
  (``adaptive_optimizers.py``);
- normflows: Real NVP (coupling blocks, masked affine flows) and a Neural
  Spline Flow (autoregressive and coupled rational-quadratic splines,
  LULinearPermute) trained by forward KL on TwoMoons, log_prob on a grid,
  sampling, inversion, save / load; planar and radial flows by reverse KL
  and alpha divergence; a residual flow with ActNorm; Glow blocks; a
  conditional flow; Hamiltonian annealed importance sampling and a
  stochastic flow with Metropolis-Hastings and HMC layers; a
  class-conditional multiscale Glow (Squeeze / Merge, bits per dimension);
  a NormalizingFlowVAE with a planar-flow posterior (``normflows_toy2d.py``);
- zuko: the README's conditional NSF trained by maximum likelihood,
  sample / rsample_and_log_prob, the transform's inverse and log-det,
  state_dict save / load; MAF, RealNVP, NICE, SOSPF, NAF, UNAF (sampled
  by bisection), BPF, GF, GMM and a CNF (zuko's own adaptive ODE solver,
  exact trace and Hutchinson's estimator) forward, backward and sampled; a
  hand-built flow of its transforms (``zuko_flows.py``);
- deepxde (PyTorch backend, float64): PINNs for 1-D Poisson problems with
  Dirichlet / Neumann / Robin boundaries (dde.grad.hessian: second
  derivatives through create_graph autograd), an ODE system
  (dde.grad.jacobian), 2-D Laplace with a PointSetBC, a hard-constraint
  output transform and a PFNN, a diffusion TimePDE on GeometryXTime with
  PDEPointResampler, an inverse problem with a trainable dde.Variable, a
  DeepONet on aligned data; Adam with step decay and loss weights, then
  L-BFGS; predict with an operator, save / restore; float32 models with a
  LAAF activation and L2 regularization, a PFNN, AdamW / RMSprop / SGD;
  forward-mode autodiff (nested torch.func.jvp trained through by reverse
  mode) (``deepxde_pinns.py``);
- neuraloperator: FNO (complex spectral convolutions through rfftn /
  irfftn) trained by hand with its AdamW and H1Loss, TFNO (Tucker / CP /
  dense factorized weights through tensorly / tltorch) trained by its
  Trainer with LpLoss / H1Loss evaluation, its training-state checkpoint
  resumed by a fresh Trainer, a finer-resolution evaluation, a
  1-D FNO with domain padding, group norm and super-resolution,
  save_checkpoint / from_checkpoint, a UNO with a DefaultDataProcessor of
  UnitGaussianNormalizers, FiniteDiff / FourierDiff derivatives and
  BurgersEqnLoss, tensor GaLore (its AdamW projecting the complex spectral
  gradients by tensorly's Tucker, complex SVDs), an FNO on complex-valued
  data (``neuraloperator_fno.py``).

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions).  The programs seed torch and NumPy as a user
does; tracec's draws equal PyTorch's, so Brownian samples compare strictly.
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "scilibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "torchsde_sdeint.py": ("torchsde",),
    "adaptive_optimizers.py": ("schedulefree", "prodigyopt", "dadaptation"),
    "normflows_toy2d.py": ("normflows",),
    "zuko_flows.py": ("zuko",),
    "deepxde_pinns.py": ("deepxde", "scikit-optimize"),
    "neuraloperator_fno.py": ("neuraloperator", "tensorly", "tensorly-torch"),
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_scilibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
