"""Public speech-separation, score-based generative, GAN, self-supervised
speech and summarization programs, small configurations
(``tests/programs/models26``): kaituoxu/Conv-TasNet (the encoder / TCN
separator / decoder with gLN / cLN / BN, causal Chomp1d, overlap_and_add by
index_add_, the SI-SNR PIT loss with permutations, einsum over one-hot
perms and tensor-indexed reordering, the learning-rate halving through the
optimizer's state dict); yang-song's score_sde_pytorch tutorial (the
Gaussian-Fourier time embedding, the ScoreNet U-Net with GroupNorm and
output_padding ConvTranspose2d under DataParallel, the denoising score
matching loss, Euler-Maruyama and predictor-corrector samplers, the
Skilling-Hutchinson divergence, the EMA of weights); heykeetae's
Self-Attention-GAN (its own SpectralNorm module with u / v / w_bar
Parameters reassigned through .data, Self_Attn with bmm attention maps,
hinge and WGAN-GP losses with a create_graph gradient penalty, TTUR Adam);
fairseq's wav2vec 2.0 ported standalone (the conv feature extractor with
Fp32GroupNorm, numpy span masking, the weight-normed grouped positional
convolution, the Gumbel vector quantizer with perplexities and temperature
annealing, sampled negatives, cosine-similarity logits with -inf masking,
the contrastive + diversity + feature-penalty loss); atulkum's
pointer_summarizer (a packed bidirectional LSTM encoder, ReduceState,
Bahdanau attention with coverage, the pointer-generator's scatter_add over
the extended vocabulary, the coverage loss, Adagrad with
initial_accumulator_value over a parameter list holding the shared
embedding twice, clip_grad_norm_ per module, a greedy eval decode).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models26"

CASES = ["conv_tasnet.py", "score_sde.py", "sagan.py", "wav2vec2.py", "pointer_generator.py"]
# wav2vec2: x[mask_indices] with a boolean mask given to the step (a
# data-dependent shape) runs eagerly
EAGER_FALLBACK = {"wav2vec2.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models26_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
