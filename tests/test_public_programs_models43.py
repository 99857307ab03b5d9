"""Public LLM-inference and speed-run training programs, small
configurations (``tests/programs/models43``): pytorch-labs/gpt-fast's
model.py / quantize.py / generate.py (ModelArgs.from_name's fuzzy match, the
fused-wqkv load_state_dict pre-hook, a model built on the meta device and
loaded with ``load_state_dict(assign=True)`` from an mmap'd checkpoint,
KVCache buffers written by ``k_out[:, :, input_pos] = k_val``, the
torch.polar / stack rotary cache, GQA by repeat_interleave, the bool causal
mask indexed by input_pos into scaled_dot_product_attention, the
exponential_-based multinomial_sample_one_no_sync, top-k by a topk pivot and
torch.where, int8 weight-only quantization, and decode_one_token under
``torch.compile(mode="reduce-overhead", fullgraph=True)``); karpathy/llama2.c's
model.py and train.py loop (a memmap'd uint16-shard IterableDataset with
get_worker_info, weight tying and the scaled w3 / wo init, the
decay / no-decay AdamW groups and the inspect.signature fused check,
get_lr's warmup and cosine written into param_groups, gradient accumulation
through a disabled GradScaler, clip_grad_norm_, the ckpt.pt checkpoint with
its ``_orig_mod.`` prefix stripped, inference_mode generation with top-k by
mask assignment and multinomial, and a compiled model's ``self.last_loss``
backpropagated outside the compiled call); meta-llama/llama's Llama 2
model.py and generation.py without fairscale (torch.polar / view_as_complex /
view_as_real rotary embeddings, plain-tensor KV caches written by slice
assignment under inference_mode, the triu / hstack mask, text_completion
with top-p sampling by sort / cumsum / div_ / multinomial / gather,
logprobs by a K-dimensional cross_entropy with ignore_index=-1, echo, and
a compiled prefill and decode step); KellerJordan/modded-nanogpt's late-2024
train_gpt2.py on one device (Muon with the @torch.compile'd bfloat16
Newton-Schulz iteration, Rotary's bfloat16 cos / sin cache, CastedLinear in a
bfloat16 model, QK rms_norm, the value residual, relu().square(), the U-net
skip weights, the tanh logit softcap, headered uint16 .bin shards, Adam on
bfloat16 embeddings and scalars beside Muon, initial_lr scheduling and the
Muon momentum warmup).

Each runs under ``tracec run`` and, as the reference, under torch 2.13; most
with ``TORCH_COMPILE_DISABLE=1`` (they check a compiled step against the
same step run eagerly, and print the verdict), gpt-fast with torch.compile
itself (its fullgraph=True compile refuses to run with compilation
disabled).  tracec's eager draws follow PyTorch's, so initialization, data
order, dropout masks and sampled tokens are compared too.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models43"

CASES = ["llama2c_train.py", "meta_llama.py", "modded_nanogpt.py"]
# torch's reference runs these under torch.compile itself
COMPILED_CASES = ["gpt_fast.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})
torch_compiled_refs = torch_refs_fixture(PROGS, COMPILED_CASES, ENV)


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models43_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in COMPILED_CASES])
def test_models43_compiled_program_matches_torch(script, torch_compiled_refs, tmp_path):
    check_program(PROGS / script, torch_compiled_refs(script), tmp_path, script in EAGER_FALLBACK)
