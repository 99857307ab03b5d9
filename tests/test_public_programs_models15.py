"""Public model programs, small configurations (``tests/programs/models15``):
Gaussian processes, graph networks and the standard training loops.
gp_regression (a GP from scratch: RBF kernel with softplus parameters,
torch.linalg.cholesky / cholesky_solve / solve_triangular, the log marginal
likelihood from the Cholesky diagonal fitted by Adam, MultivariateNormal
posterior samples with scale_tril, then torch.triangular_solve /
cholesky_inverse / cholesky_ex / slogdet / LinAlgError; its compiled step
compiles: the factorizations trace up to 64x64); weihua916/powerful-gnns' GIN
(GraphCNN with torch.sparse.FloatTensor adjacency and pooling matrices and
torch.spmm, sum / average / max neighbour pooling, main.py's loop with
StepLR) and GraphSAGE / GIN layers over index_add_ / scatter_add_;
pytorch/examples imagenet/main.py's loop (accuracy topk=(1, 5),
AverageMeter / ProgressMeter / Summary, save_checkpoint and resume) over a
small torchvision-style ResNet; a modern loop (random_split, a custom
collate_fn with pad_sequence, a GRU over pack_padded_sequence, AdamW with
OneCycleLR, autocast bfloat16 with torch.amp.GradScaler("cpu"),
clip_grad_norm_).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models15"

CASES = ["gp_regression.py", "gin_graphs.py", "imagenet_loop.py", "onecycle_amp_loop.py"]
# (the GP's compiled step compiles: cholesky / cholesky_solve / solve_triangular
# trace, tracec.linalg_substitution)
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models15_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
