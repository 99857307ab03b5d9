"""Public graph programs over sparse tensors, small configurations
(``tests/programs/models44``): a PyG-free GCN in tkipf/pygcn's style
(GraphConvolution's torch.mm / torch.spmm, Adam with weight decay, dropout
in training) over the normalized adjacency built as a coalesced
sparse_coo_tensor (torch.sparse.sum degrees, pow(-0.5) with the isinf fix)
and as its CSR form (to_sparse_csr, crow_indices / col_indices / values,
torch.sparse_csr_tensor, to_sparse_csc, printing, the layout errors,
products by ``@`` / torch.sparse.mm / torch.spmm, learned edge weights
whose gradients flow through the CSR and COO values), and GraphSAGE with
index_add_ and scatter_reduce (mean / amax, include_self=False)
aggregation; and a BoTorch-free Bayesian optimization loop on Branin
(torch.quasirandom.SobolEngine scrambled with seed 0, an exact GP with RBF
and Matern-5/2 kernels over torch.cdist, softplus-constrained
hyperparameters fitted by Adam on the Cholesky marginal log likelihood,
Expected Improvement from Normal(0, 1).cdf / log_prob maximized by L-BFGS
with the strong Wolfe line search from Sobol starts); SynodicMusic/ChebyKAN's
ChebyKANLayer (tanh / acos / in-place `*= arange` / cos / einsum) fitted
to a toy function and PyG's DimeNet radial basis (Envelope,
BesselBasisLayer's arange(out=Parameter)), with torch.special's Bessel
functions and orthogonal polynomials; and two pytorch/examples programs:
vision_transformer/main.py (PatchExtractor's unfold patches, the
(batch_size, 1, latent) class token and positional Parameters moved by
.to(device), MultiheadAttention without batch_first, TrainEval saving the
best weights, its argparse command line) and the
distributed/ddp-tutorial-series single_gpu.py Trainer (MyTrainDataset,
pin_memory / shuffle DataLoader, the one-class cross_entropy that is always
0, torch.save of the state_dict every save_every epochs).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); the programs seed and
draw as their repositories do (tracec's eager draws are PyTorch's).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models44"

CASES = ["gcn_sparse_csr.py", "bayesopt_sobol.py", "chebykan_dimenet.py", "vit_main.py",
         "ddp_single_gpu.py"]
# (the GP's compiled fitting step compiles: torch.linalg.cholesky and
# cholesky_solve trace, tracec.linalg_substitution)
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models44_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
