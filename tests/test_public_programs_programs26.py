"""Public programs, small configurations (``tests/programs/programs26``),
written for these tests after public code (the source each follows is named
in its header): elastic weight consolidation on permuted inputs
(moskomule/ewc.pytorch: the diagonal Fisher from deepcopy'd parameters
zeroed through .data), Reptile on sine waves (joschu's demo: hand-written
SGD through .data, state-dict interpolation), gmm-torch's EM for a Gaussian
mixture (float64 covariances, inverse, Cholesky log-determinants, k-means
initialisation, the diagonal model's BIC), SegNet (MaxPool2d with
return_indices into MaxUnpool2d), the original AlexNet (LocalResponseNorm,
StepLR), Dive into Deep Learning's lazy modules and parameter management
with LeNet and a LazyBatchNorm LeNet, involution (nn.Unfold kernels in a
RedNet block; the Unfold / Fold convolution of PyTorch's documentation),
ProdLDA (BatchNorm1d without its weight, resize_as_(...).normal_()
noise, the Laplace-approximated Dirichlet KLD), and torchdyn's Lagrangian
neural network (per-sample torch.autograd.functional jacobian and hessian
with create_graph=True, pinverse, trained through them), and
checkpoint_sequential in both modes after pytorch_memonger's tutorial (BatchNorm
statistics updated again by the recomputation, a ReLU(inplace=True) on a
checkpointed segment's output, compiled).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (each checks a compiled step against the same
step run eagerly).  gmm-torch's compiled E step compiles (``torch.inverse``
and ``linalg.cholesky`` trace); the LNN's compiled step runs eagerly
(``pinverse``'s backward: LAPACK through NumPy, eager only, which tracec says);
ProdLDA's compiled step draws dropout masks and noise, so it runs with
eager draws on the compiled stream and marks the lines after those draws
[rng] (AlexNet's sets its dropout probability to 0 for the compiled step).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import COUNTER_RNG_ENV, ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "programs26"

CASES = ["ewc_continual.py", "reptile_sine.py", "gmm_em.py", "segnet_unpool.py", "alexnet_lrn.py",
         "d2l_lazy_lenet.py", "involution.py", "prodlda.py", "lnn_torchdyn.py",
         "checkpoint_sequential.py"]
EAGER_FALLBACK = {"lnn_torchdyn.py"}
COUNTER_RNG = {"prodlda.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs26_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK,
                  COUNTER_RNG_ENV if script in COUNTER_RNG else None)
