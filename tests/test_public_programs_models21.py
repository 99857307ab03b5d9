"""Public geometric-learning and detection programs, small configurations
(``tests/programs/models21``): yanx27/Pointnet_Pointnet2_pytorch
(square_distance, index_points' batch gather, farthest point sampling with
torch.randint's start and boolean-mask updates, query_ball_point's sort and
masking with N, set abstraction (MSG) and feature propagation, the
classifier trained with NLL over log_softmax, Adam and StepLR);
vgsatorras/egnn (E_GCL with unsorted_segment_sum / mean through new_full
and scatter_add_, attention, tanh, normalize, gcl.py's coords_range tensor
attribute and in-place coord update, qm9's masked E_GCL_mask over padded
molecules, the E(n) equivariance check, Adam and CosineAnnealingLR).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models21"

CASES = ["pointnet2.py", "egnn.py"]
# farthest_point_sample's boolean-mask update (distance[mask] = dist[mask])
# is data-dependent control flow: the compiled step runs eagerly, as
# torch.compile graph-breaks there
EAGER_FALLBACK = {"pointnet2.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models21_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
