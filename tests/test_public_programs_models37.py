"""Public programs written as their repos write them, seeded with
``torch.manual_seed`` and default initialization, small configurations
(``tests/programs/models37``): pytorch/examples' REINFORCE and actor-critic
(a tiny numpy CartPole-like env with ``reset(seed=...)``, ``Categorical``
sampling, ``np.finfo(np.float32).eps`` return normalization, SavedAction,
``F.smooth_l1_loss``, running reward); pytorch/examples' DCGAN (weights_init
through ``.data.normal_`` / ``fill_``, ``fixed_noise = torch.randn``,
``torch.full(..., dtype=real_cpu.dtype)``, BCELoss, ``label.fill_``, the
D_x / D_G_z1 / D_G_z2 prints, a shuffle=True DataLoader); and
time_sequence_prediction (``np.random.randint`` sine waves, the
double-precision LSTMCell Sequence with its ``future`` loop, LBFGS with a
closure) with its ``torch.manual_seed(0)`` default init; and a timm-style
loop (``random_split`` with a seeded Generator, WeightedRandomSampler,
mixup with ``np.random.beta`` and ``torch.randperm``, label smoothing,
CosineAnnealingWarmRestarts stepped fractionally, gradient accumulation,
an AveragedModel EMA with a custom ``avg_fn`` and ``update_bn``); and a
BERT masked-LM pretraining step with transformers'
DataCollatorForLanguageModeling masking (``torch.bernoulli`` of
``torch.full`` probability matrices, ``labels[~masked_indices] = -100``,
``torch.randint(len(tokenizer), ...)`` random words), a tiny
nn.TransformerEncoder BERT with dropout 0.1 trained in train mode, tied
decoder weights, AdamW no-decay groups and a linear warm-up LambdaLR.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled part against
the same computation run eagerly, and print the verdict).  tracec's eager
draws follow PyTorch's streams, so every printed number is compared,
sampled actions included.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models37"

CASES = ["reinforce.py", "actor_critic.py", "dcgan.py", "time_sequence.py",
         "timm_loop.py", "bert_mlm.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models37_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
