"""Real published packages run unmodified on tracec (``tests/programs/misclibs``):

- snntorch: its tutorials 1-5 on tiny synthetic MNIST-like data - spike
  encoding (spikegen.rate / latency / delta), Lapicque / Leaky / Synaptic /
  Alpha / RLeaky neurons stepped by hand, six surrogate gradients, a
  spiking MLP trained with SF.ce_rate_loss, its other losses, and an
  init_hidden Sequential trained by backprop.BPTT / TBPTT / RTRL, tutorial 6's convolutional
  SNN trained two steps, SLSTM / SConv2dLSTM / RSynaptic, learnable beta and
  threshold (their gradients), inhibition, graded spikes, state quantization,
  reset_delay, the temporal losses and population-coded accuracy, the 1.0
  parallel / state-space neurons (LeakyParallel, StateLeaky, LinearLeaky,
  DeltaLeaky, AssociativeLeaky) and BatchNormTT1d (``snntorch_tutorials.py``);
- pykan: its quickstart KAN(width=[2,5,1], grid=5, k=3) fitted with LBFGS
  and with Adam (regularisation, grid updates) on create_dataset, attribution,
  prune, symbolic edges and symbolic_formula, saveckpt / loadckpt, its
  checkpoint folder in the working directory, a KAN with multiplication
  nodes (width [2, [2, 1], 1]) fitted with Adam and regularised LBFGS
  (``pykan_fit.py``; not refine(): torch 2.13's CPU lstsq (gelsy) is
  wrong there - a leading all-zero column makes it report rank 0 - and
  differs run to run);
- torchcde, einx, ema-pytorch, torch-ema (``cde_einx_ema.py``): a neural
  CDE over natural cubic / Hermite / linear / rectilinear coefficients
  (a missing value among them), cdeint with rk4, dopri5 (jump_t at a
  linear interpolation's knots) and the adjoint, its torchsde backend
  (reversible Heun with its adjoint), two training steps; einx's dot,
  reductions, id, get_at / set_at / add_at, softmax, sort, roll, argmax,
  flip, where, an einx attention with its gradient, einx.torch's
  adapt_with_vmap (a per-head attention under torch.vmap, backward) and
  its numpy-like reduce / elementwise adapters; EMA (ema-pytorch, with a
  BatchNorm buffer) and ExponentialMovingAverage (torch-ema) around an SGD
  loop, average_parameters / copy_to, the EMA's state_dict saved and loaded
  in the working directory, and a PostHocEMA (two profiles checkpointed in
  float16 into the working directory, a third synthesized from them by
  least squares).

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions).  The programs seed torch and Python's
``random``; tracec's draws equal PyTorch's, so spike trains compare strictly.
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "misclibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "snntorch_tutorials.py": ("snntorch",),
    "pykan_fit.py": ("pykan",),
    "cde_einx_ema.py": ("torchcde", "einx", "ema-pytorch", "torch-ema"),
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_misclibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
