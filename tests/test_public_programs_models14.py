"""Public model programs, small configurations (``tests/programs/models14``):
density estimation, time series, optimal transport and tabular models.
ikostrikov/pytorch-flows (MADE with its masks, BatchNormFlow, Reverse, the
RealNVP coupling layers, InvertibleMM with slogdet / inverse, ActNorm,
FlowSequential's log_probs and sample, main.py's TensorDataset loop with the
BatchNormFlow momentum trick); thuml/Autoformer (AutoCorrelation by
rfft / irfft with the topk / roll training aggregation and the topk / gather
inference one, series_decomp's moving average, the circular-padded token
embedding chosen by ``torch.__version__``, the fixed and timeF temporal
embeddings, EarlyStopping's torch.save / torch.load and
adjust_learning_rate); dfdazac/wassdistance (log-domain Sinkhorn iterations
stopped by ``err.item() < thresh``, used as a loss); dreamquark-ai/tabnet
(sparsemax / entmax15 / entmoid15 autograd.Functions, ghost batch norm by
chunks, GLU blocks with shared layers, the attentive transformer, the
categorical EmbeddingGenerator, the sparsity loss, forward_masks'
feature importances).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models14"

CASES = ["maf_flows.py", "autoformer.py", "sinkhorn.py", "tabnet.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models14_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
