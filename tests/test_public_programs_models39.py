"""Public LLM-training programs written as their repos write them, seeded
with ``torch.manual_seed`` and default initialization, small configurations
(``tests/programs/models39``): rasbt/LLMs-from-scratch's ch04 / ch05 GPT
(the register_buffer causal mask filled with ``-torch.inf``, the custom
LayerNorm / GELU, the layer-norm, GELU and shortcut-gradient demos with
``torch.set_printoptions(sci_mode=False)``, GPTDatasetV1's sliding window
in a shuffle=True DataLoader, cross_entropy over ``flatten(0, 1)``,
AdamW pretraining with eval_freq, argmax generation and temperature / top-k
sampling through ``torch.multinomial``, the model + optimizer checkpoint
through torch.save / torch.load); its ch06 classifier finetuning (the
padded SpamDataset, the replaced out_head, frozen parameters but the last
block and final norm, last-token logits, accuracy loaders) and appendix E
LoRA (kaiming_uniform_ A, zero B, replace_linear_with_lora over
named_children, trainable-parameter counts); and karpathy/build-nanogpt's
train_gpt2.py (flash ``scaled_dot_product_attention(is_causal=True)``, the
tied wte / lm_head, NANOGPT_SCALE_INIT, decay / no-decay AdamW groups with
the ``inspect.signature`` fused check, bfloat16 ``torch.autocast`` on the
CPU with gradient accumulation, clip_grad_norm_, the cosine schedule set
through param_groups, top-k sampling from a seeded ``torch.Generator``);
and karpathy/makemore part 4 ("Becoming a Backprop Ninja": every
intermediate's retain_grad, the manual backward compared with autograd's
by ``torch.all(dt == t.grad)`` -- whose exact / approximate verdicts must
agree, tanh's fused ``1 - y*y`` included --, the batchnorm and
cross-entropy shortcuts, no_grad training with the manual gradients,
sampling from a ``torch.Generator``); and makemore part 5's WaveNet (the
torch.nn-like classes by hand: BatchNorm1d over ``dim=(0, 1)`` with its
buffers reassigned under no_grad, FlattenConsecutive's view / squeeze,
``layer.training = False`` for evaluation, multinomial sampling).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check one compiled block or LoRA
step against the same step run eagerly, and print the verdict).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models39"

CASES = ["llm_gpt.py", "llm_classifier_lora.py", "build_nanogpt.py", "makemore_backprop.py",
         "makemore_wavenet.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models39_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
