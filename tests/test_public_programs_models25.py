"""Public self-supervised, sharpness-aware, custom-optimizer and metric
learning programs, small configurations (``tests/programs/models25``):
facebookresearch/barlowtwins (the BatchNorm1d(affine=False) cross-correlation
loss with torch.diagonal(c).add_(-1).pow_(2) and the flatten / view
off_diagonal, its LARS optimizer subclass with the torch.where trust ratio and
the 'mu' state, adjust_learning_rate on param_groups, SyncBatchNorm
conversion, GradScaler / autocast disabled on CPU, the checkpoint round trip,
the VICReg-style LARS with callable filters in its param_groups);
davda54/sam (SAM wrapping SGD / Adam through self.param_groups, first_step /
second_step with p.data = old_p, the adaptive grad norm, step(closure) under
torch.enable_grad()(closure), the load_state_dict override, bypass_bn's
momentum backup on every _BatchNorm, smooth_crossentropy through scatter_ and
kl_div, the OrderedDict WideResNet, its StepLR); custom optimizers as users
write them (lucidrains' Lion, michaelrzhang's and alphadl's Lookahead
wrappers that skip Optimizer.__init__, under StepLR, with the deprecated
add_(Number, Tensor) pullback; AdaBelief with amsgrad through torch.max(...,
out=), rectification and decoupled decay; state_dict round trips through
torch.save; compiled steps of Lion, of AdaBelief counting in a Python int
state['step'] and of Lookahead counting in an attribute, against eager);
jakesnell's and orobix's Prototypical Networks (the model registry, Protonet.loss over support / query sample dicts with
arange(...).view(...).expand(...) targets and gather, euclidean_dist through
unsqueeze / expand, the episodic and prototypical batch samplers over
randperm, np.isnan on tensors and a NaN-filled index matrix, DataLoader with
batch_sampler=, prototypical_loss through unique / eq / nonzero, float64 by
set_default_dtype); adambielski/siamese-triplet (contrastive and triplet
losses, pdist through mm / t / view, pair and triplet selectors mining in
numpy with LongTensor and numpy index mixes, np.argpartition, combinations,
the BalancedBatchSampler(BatchSampler) of numpy index lists, Siamese /
Triplet datasets whose empty target lists collate to [], the trainer's
scheduler.step() before the epoch and tuple loss_inputs, PReLU nets, the
in-place `output /=` of EmbeddingNetL2 failing its backward as in PyTorch,
TripletMarginLoss / pairwise_distance cross-checks).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models25"

CASES = ["barlow_twins.py", "sam.py", "custom_optimizers.py", "protonet.py",
         "siamese_triplet.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models25_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
