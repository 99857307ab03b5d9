"""Public spiking, Bayesian, flow and memory-augmented programs, small
configurations (``tests/programs/models22``): fzenke/spytorch and snntorch's
tutorials (a surrogate-gradient spiking network: autograd.Function spike
nonlinearities with ctx.save_for_backward and non-tensor arguments,
torch.heaviside, leaky integrate-and-fire loops with detached resets,
Bernoulli rate coding, spike-count and membrane losses);
nitarshan/bayes-by-backprop (the softplus-rho Gaussian posterior, the
scale-mixture prior through Normal.log_prob, the MC ELBO written into
preallocated tensors, nll_loss's size_average=False, the sampled ensemble,
and a ptrblck-style rsample / kl_divergence layer);
senya-ashukha/real-nvp-pytorch (masks as frozen Parameters, coupling
layers with log_det_J accumulated in place, a MultivariateNormal prior,
sampling through g, retain_graph=True, '%.3f' % tensor);
loudinthecloud/pytorch-ntm (content / location addressing with cosine
similarity, the circular shift through conv1d, sharpening, erase / add
writes, an LSTM controller with learned initial states, a memory module
shared by the heads, the copy task with BCELoss, Tensor.apply_ and
RMSprop; its compiled step stores the NTM's nested (list, tuple, list)
state on the module at every call); RajGhugare19/dreamerv2 (the RSSM with
a GRUCell and 4 x 4 categorical latents through OneHotCategorical's
straight-through sample, namedtuple states stacked per field, KL balancing
with Independent(OneHotCategoricalStraightThrough) and free nats, Normal /
Bernoulli Independent heads, imagination with a one-hot actor, lambda
returns computed backwards and flipped).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import COUNTER_RNG_ENV, ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models22"

CASES = ["snn_surrogate.py", "bayes_by_backprop.py", "realnvp_moons.py", "ntm_copy.py",
         "dreamer_rssm.py"]
EAGER_FALLBACK: set = set()

#: Programs whose compiled step samples (dropout, reparameterized noise) and
#: prints whether it equals the eager step: run with eager draws on the
#: compiled stream (``COUNTER_RNG_ENV``).
COUNTER_RNG = {'bayes_by_backprop.py', 'dreamer_rssm.py'}
torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models22_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK,
                  COUNTER_RNG_ENV if script in COUNTER_RNG else None)
