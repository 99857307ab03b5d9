"""Public model programs, small configurations (``tests/programs/models16``):
a mixture density network over torch.distributions (Categorical logits,
Independent(Normal, 1), MixtureSameFamily's log_prob / mean / variance /
sample / cdf / expand and its constraint, a MultivariateNormal mixture);
lucidrains/rotary-embedding-torch's RotaryEmbedding (einops rotate_half,
cached freqs, offsets, xpos, pixel freqs, partial rotary dimension) next to
the LLaMA torch.polar form in a small causal transformer; a BERT-style
run_glue.py fine-tuning loop (extended attention mask with
torch.finfo.min, no_decay AdamW groups, get_linear_schedule_with_warmup as
a LambdaLR, gradient accumulation, clip_grad_norm_, the scheduler's
state_dict round trip).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models16"

CASES = ["mdn_mixture.py", "rotary_transformer.py", "bert_finetune.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models16_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
