"""Public audio, recurrent, attention and energy-based programs, small
configurations (``tests/programs/models19``): jik876/hifi-gan (the
weight-normed generator with ConvTranspose1d upsampling and ResBlock1 / 2,
remove_weight_norm, the multi-period discriminator over 2-D periods, the
multi-scale discriminator with spectral_norm and AvgPool1d, feature /
generator / discriminator losses, the mel-spectrogram L1 loss through
torch.stft, AdamW with ExponentialLR for both optimizers); lucidrains/minGRU-pytorch
(minGRU / minLSTM, the log-space Heinsen scan through logcumsumexp against
the sequential form, the minGRULM char model with cached decoding); microsoft/unilm
Diff-Transformer (MultiheadDiffAttn: two softmax maps subtracted with the
re-parameterized lambda, the lambda_init depth schedule, RMSNorm subln,
interleaved rotary embedding through einops, repeat_kv);
ermongroup/sliced_score_matching (sliced score matching and its variance
reduced form through autograd.grad(..., create_graph=True) twice, sliced
score estimation, exact score matching per dimension, Langevin dynamics);
wgrathwohl/JEM and the UvA DL course's energy-based model tutorial (SGLD
through autograd.Variable and in-place .data updates, replay buffers
written back by index or kept as a list, parameters frozen with
requires_grad = False during sampling, set_grad_enabled, the input's .grad
clamped, detach_() and zero_(), contrastive divergence).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models19"

CASES = ["hifigan.py", "mingru.py", "diff_transformer.py", "sliced_score_matching.py",
         "jem_ebm.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models19_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
