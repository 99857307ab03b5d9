"""Public recommendation, knowledge-graph, forecasting, generative and graph
programs, small configurations (``tests/programs/models23``):
mklimasz/TransE-PyTorch and DeepGraphLearning/KnowledgeGraphEmbedding
(TransE with padding-idx embeddings renormalized in place through
``.data[:-1, :].div_``, negatives by torch.randint + torch.where,
MarginRankingLoss(reduction='none'), hits@k by topk and MRR by argsort +
nonzero; KGEModel's frozen gamma / embedding_range Parameters read by
``.item()``, RotatE's rotation, self-adversarial negative sampling, the
filtered test_step ranks); pmixer/SASRec.pytorch (padding-idx item
embeddings scaled in place, numpy positions and torch.BoolTensor timeline
masks, MultiheadAttention over transposes with a causal ~tril mask, the
Conv1d(kernel_size=1) point-wise feed-forward, BCEWithLogits on logits
indexed by np.where, Adam(betas=(0.9, 0.98)), the 101-candidate
NDCG / HR evaluation; the compiled step takes the sampler's numpy arrays); zhykoties/TimeSeries DeepAR (a 3-layer LSTM
with forget biases set through _all_weights, softplus sigma, the
Normal(mu[mask], sigma[mask]).log_prob loss, missing inputs filled by
boolean-mask assignment, unsqueeze_ on an indexing view, Net.test's mean
and ancestral-sampling paths, median / std / quantile / topk rho-risk;
its compiled step runs eagerly: loss_fn's boolean masks computed in the
step have data-dependent shapes, which torch's dynamo also breaks on); timbmg/VAE-CVAE-MNIST (the
Sequential built by add_module in a loop, idx2onehot's zeros(...).scatter_,
the BCE(reduction='sum') + KLD loss, defaultdict trackers filled by
.item(), inference by label); williamleif/graphsage-simple (MeanAggregator's
random.sample'd neighbour sets and its mask[row_indices, column_indices] = 1
row-normalized by div, Encoders with a bool ``cuda`` attribute shadowing
Module.cuda and the deprecated init.xavier_uniform, layers chained through
lambdas, a frozen Embedding weight, SGD over filter(requires_grad)).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models23"

CASES = ["kge.py", "sasrec.py", "deepar.py", "cvae.py", "graphsage.py"]
EAGER_FALLBACK = {"deepar.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models23_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
