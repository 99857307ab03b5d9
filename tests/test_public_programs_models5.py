"""Public model programs, small configurations (``tests/programs/models5``),
as published, einops included: lucidrains' vit-pytorch ViT (einops
rearrange / repeat and ``einops.layers.torch.Rearrange``) and its ViT for
small datasets (shifted patch tokens through negative F.pad, locality self
attention), codertimo's BERT-pytorch (BERTEmbedding, the hand-written masked
multi-head attention, BERTLM's two heads, ScheduledOptim,
NLLLoss(ignore_index=0), BERTDataset's masking and BERTTrainer's
pretraining loop with tqdm and torch.save), Shawn1993's CNN_Text with its
train / eval / predict / save, Andras7's word2vec skip-gram with negative
sampling (sparse embeddings, SparseAdam, CosineAnnealingLR), guoyang9's NCF
(GMF, MLP, NeuMF-end and NeuMF-pre, HR / NDCG through topk and take),
bentrevett's seq2seq "Attention is All You Need" (masks with tril,
clip_grad_norm_, greedy translate_sentence), lucidrains'
denoising-diffusion-pytorch (einops Unet with linear and full attention,
GaussianDiffusion's schedules, losses, DDPM / DDIM sampling), lucidrains'
perceiver-pytorch (fourier features over a meshgrid, masked cross
attention, cache_fn weight tying, einops Reduce head), deep-spin's entmax
(sparsemax / 1.5-entmax autograd.Functions with sort, topk and their
recursion on unsolved rows, SparsemaxLoss) and jacobgil's pytorch-grad-cam
(forward hooks registering tensor hooks, retain_graph backward, GradCAM and
GradCAM++ weights in numpy, the context manager removing the hooks).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict, so under torch that line
is eager against eager and under tracec it is ``tracec.compile`` against
eager).  Weights and data come from numpy (or Python's seeded ``random``),
so the two runs compute the same numbers: the outputs must have the same
lines (numbers masked, spaces dropped) and every number must agree to a
float32 tolerance, except on lines marked ``[rng]``.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import (ENV, assert_output_matches, run_tracec,
                                             torch_refs_fixture)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models5"

CASES = ["vit.py", "bert.py", "cnn_text.py", "word2vec.py", "ncf.py",
         "seq2seq_transformer.py", "ddpm_unet.py", "perceiver.py", "vit_small_dataset.py",
         "entmax.py", "grad_cam.py"]
# Programs whose compiled step tracec.compile runs eagerly, and says so: none.
# Every program's compiled step must compile (BERT's advances ScheduledOptim's
# Python step counter and sets the lr from it: lifted, tracec.lifted_state;
# entmax's differentiates custom autograd.Functions: their recorded eager
# backward).
EAGER_FALLBACK: set = set()
FALLBACK_WARNINGS = ("running eagerly", "a Python side effect that compiled calls would not repeat")


torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


def _run_tracec(script, cwd):
    return run_tracec(PROGS / script, cwd)


SLOW = {"ddpm_unet.py", "seq2seq_transformer.py"}   # 20-40 s with a cold compile cache


@pytest.mark.parametrize("script", [
    pytest.param(c, id=c[:-3], marks=[pytest.mark.slow] if c in SLOW else []) for c in CASES])
def test_models5_program_matches_torch(script, torch_refs, tmp_path):
    out, err = _run_tracec(script, tmp_path)
    assert any(w in err for w in FALLBACK_WARNINGS) == (script in EAGER_FALLBACK), err[-3000:]
    assert_output_matches(out, torch_refs(script), strict=True)
