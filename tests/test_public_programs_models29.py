"""Public CTR, vector-quantization, mixture-of-experts, tabular-transformer
and graph programs, small configurations (``tests/programs/models29``):
shenweichen/DeepCTR-Torch's DeepFM and xDeepFM (feature columns and their
column slices, per-field embeddings in an nn.ModuleDict, the Linear part,
FM's square-of-sum minus sum-of-square, CIN's einsum / kernel-size-1 Conv1d /
split-half feature maps, the DNN with BatchNorm1d, L2 regularization terms
summed into the loss, binary_cross_entropy(reduction='sum') over a
TensorDataset DataLoader, numpy roc_auc / log_loss; sparse=True embeddings
stepped by SparseAdam beside Adam, and PyTorch's refusals of a sparse
gradient in Adam and of one made dense by an L2 term in SparseAdam);
CompVis/taming-transformers' VQGAN first stage (Encoder / Decoder with
GroupNorm(32) ResnetBlocks, bmm attention and the asymmetric-pad Downsample,
VectorQuantizer2's einsum distances / argmin / straight-through estimator,
the one-hot VectorQuantizer's perplexity, the EMA quantizer's
requires_grad=False Parameters updated through .data, the ActNorm
PatchGAN discriminator, the hinge loss with the adaptive weight from
autograd.grad on the decoder's last layer and its no_grad fallback, two
Adam optimizers stepped in turn with Lightning's toggle_optimizer);
davidmrau/mixture-of-experts' sparsely gated MoE (SparseDispatcher's
nonzero / sort / split / gather / index_add dispatch and combine, noisy
top-k gating with softplus noise, the Normal-cdf load estimate, cv_squared,
the zero-initialized gate whose tied logits topk orders as PyTorch's CPU
kernel does); yandex-research/rtdl's FT-Transformer (numerical and
categorical tokenizers with the non-persistent category_offsets buffer, the
CLS token appended by expand / cat, the separate-projection attention with
xavier / kaiming init, ReGLU, prenormalization without the first block's
attention norm, last_layer_query_idx=[-1], AdamW parameter groups without
decay for tokenizer / norms / biases, a LambdaLR warm-up); and GCNII /
APPNP / a max-aggregation GraphSAGE layer in plain torch (the bincount /
pow(-0.5) / masked_fill_ normalized sparse_coo_tensor adjacency, torch.spmm
and torch.sparse.mm, GCNII's initial residual and identity mapping, Adam
groups with per-group weight decay, APPNP's power iteration over a sparse
buffer, scatter_reduce_(reduce='amax', include_self=False) with its tie
gradient, early stopping through copy.deepcopy(model.state_dict())).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models29"

CASES = ["deepctr.py", "vqgan.py", "sparse_moe.py", "ft_transformer.py", "gcnii_appnp.py"]
# the dispatcher's torch.nonzero / .tolist() part sizes decide the experts'
# batch sizes in Python (torch.compile breaks the graph there too)
EAGER_FALLBACK = {"sparse_moe.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models29_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
