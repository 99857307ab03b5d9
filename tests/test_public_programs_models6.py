"""Public model programs, small configurations (``tests/programs/models6``),
as published: zalandoresearch's VQ-VAE (VectorQuantizer and
VectorQuantizerEMA with the straight-through estimator, perplexity, the EMA
reassigning Parameters in forward) with rosinality's Quantize (EMA codebook
buffers updated through ``.data`` in place), lucidrains' BYOL (forward hook
on the hidden layer, lazily built projector, deep-copied target encoder
moved by ``.data`` assignment, BatchNorm1d MLPs, cosine loss),
facebookresearch's MoCo v2 (momentum encoder, queue buffer written by index
assignment, einsum logits over a temperature, batch shuffle by randperm /
argsort), christiancosgrove's spectral-norm GAN (``nn.utils.spectral_norm``
and ``parametrizations.spectral_norm``, hinge / wasserstein / BCE losses,
Adam betas (0.0, 0.9), ExponentialLR), junyanz's pix2pix (U-Net with
InstanceNorm2d and ConvTranspose2d, PatchGAN, GANLoss's own ``__call__``,
L1 + BCEWithLogits, LambdaLR), golbin's WaveNet (dilated causal Conv1d
stack, gated tanh * sigmoid, residual and skip 1x1 convolutions) with
torchaudio's mu-law, alexis-jacq's sketch-RNN (bivariate normal mixture NLL,
``F.softmax`` without dim, numpy sampling from 0-d tensors) with
sagelywizard's MDN (``torch.distributions.Categorical``), meijieru's CRNN
(conv stack + bidirectional LSTMs, ``nn.CTCLoss``, greedy CTC decode of
IntTensors), vmikulik's MAML on sinusoids (second order:
``torch.autograd.grad(create_graph=True)``, functional forward with explicit
weights) and karpathy's minGPT with transformers' top-k / top-p sampling
(topk, sort, cumsum, scatter of the removal mask, ``-inf`` assignment,
multinomial, temperature, the repetition penalty).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly where that fits this suite's time, and print the
verdict, so under torch that line is eager against eager and under tracec
it is ``tracec.compile`` against eager).  Weights and data come from numpy,
so the two runs compute the same numbers: the outputs must have the same
lines (numbers masked, spaces dropped) and every number must agree to a
float32 tolerance, except on lines marked ``[rng]``.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import (ENV, assert_output_matches, run_tracec,
                                             torch_refs_fixture)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models6"

CASES = ["vqvae.py", "byol.py", "moco.py", "sngan.py", "pix2pix.py", "wavenet.py",
         "sketch_rnn.py", "crnn.py", "maml.py", "gpt2_sampling.py"]
# Programs whose compiled step tracec.compile runs eagerly: none.
# pix2pix's optimize_parameters and sketch-RNN's step keep their tensors as
# attributes of a plain Python object (Pix2PixModel, Model: not
# nn.Modules): compiled calls set them again, as a module's.
EAGER_FALLBACK: set = set()
FALLBACK_WARNINGS = ("running eagerly", "a Python side effect that compiled calls would not repeat")


torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models6_program_matches_torch(script, torch_refs, tmp_path):
    out, err = run_tracec(PROGS / script, tmp_path)
    assert any(w in err for w in FALLBACK_WARNINGS) == (script in EAGER_FALLBACK), err[-3000:]
    assert_output_matches(out, torch_refs(script), strict=True)
