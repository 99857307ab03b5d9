"""Public reinforcement-learning, atomistic, augmentation, long-convolution
and data-loading programs, small
configurations (``tests/programs/models27``): Kaixhin/Rainbow (the
factorised-Gaussian NoisyLinear with its epsilon buffers, the dueling
distributional DQN, the agent's C51 projection through floor / ceil,
boolean-mask in-place fixes and two view(-1).index_add_ calls, double-Q
action selection, importance-weighted loss, the numpy sum-tree replay
memory with n-step returns and blank-transition masks, target sync by
load_state_dict); schnetpack's SchNet (GaussianRBF and CosineCutoff
buffers, shifted softplus, Dense with xavier_uniform_ reset, the
continuous-filter convolution aggregated by index_add or scatter_add_, a
neighbor list from cdist and nonzero, forces by autograd.grad with
create_graph=True and force matching by Adam, distances also from cdist's
matrix-multiply mode); hongyi-zhang/mixup-cifar10 and
clovaai/CutMix-PyTorch (mixup_data / mixup_criterion with np.random.beta,
rand_bbox and the in-place box paste, the pixel-ratio lam, top-k error
through topk().t().eq(), a PreAct-ResNet, nesterov SGD with MultiStepLR); HazyResearch/safari's Hyena operator
(fftconv through rfft / irfft(norm="forward"), complex-exponential
positional embeddings, Sin with a learnable frequency, exponential
modulation, the implicit filter MLP, the depthwise short filter, `_optim`
parameter groups for AdamW) in a small LM; and a torch.utils.data
pipeline as training scripts write it (hand-written Compose / RandomCrop /
RandomHorizontalFlip / ToTensor / Normalize over numpy HWC uint8 images,
random_split with a seeded Generator, ConcatDataset, Subset,
WeightedRandomSampler, DataLoader with collate_fn / drop_last /
pin_memory, default_collate on dicts, an IterableDataset splitting by
get_worker_info). The orders drawn from torch's generator (random_split,
the samplers) are printed on [rng] lines with their invariants: tracec's
generators do not reproduce torch's Mersenne-Twister stream.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models27"

CASES = ["rainbow.py", "schnet.py", "mixup_cutmix.py", "hyena.py", "data_pipeline.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models27_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
