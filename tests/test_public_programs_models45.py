"""PyTorch's newer-API tutorials, small configurations
(``tests/programs/models45``): "Getting Started with Nested Tensors"
(torch.nested.nested_tensor with the strided and jagged layouts,
as_nested_tensor, printing, unbind / size / dim / offsets,
to_padded_tensor, torch.nested.narrow, reshape / transpose / matmul / bmm /
softmax / dropout / F.linear / nn.Linear on nested tensors, PyTorch's
refusals, and the tutorial's MultiHeadAttention with
F.scaled_dot_product_attention on jagged inputs compared with the padded
computation, its gradients, and compiled nested and padded calls against eager);
the MaskedTensor overview / sparsity / Adagrad tutorials (masked_tensor /
as_masked_tensor printing and indexing, the torch.where / a / 0 / nansum
gradient issues with MaskedTensor gradients, safe softmax, masked
reductions with and without dim, mask-matching semantics, to_sparse_coo,
the sparse-gradient Adagrad step (sparse_mask, _values, sqrt_) against the
MaskedTensor one) and torch.masked's functional reductions with mask=;
and torch.utils.flop_counter.FlopCounterMode on karpathy/nanoGPT's GPT
(forward, forward + backward, per-module and per-op counts, estimate_mfu's
6N + 12LHQT estimate against the count) and on a small CNN (display=True's
table, get_table(depth)), with a compiled Block training step against eager.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1``; the programs seed torch and draw their data
and default-initialized weights as the tutorials do (tracec's eager draws
equal PyTorch's).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models45"

CASES = ["nested_tensor.py", "masked_tensor.py", "flop_counter.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models45_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
