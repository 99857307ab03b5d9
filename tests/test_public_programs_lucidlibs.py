"""Real published packages run unmodified on tracec: lucidrains' pip
packages, which many public programs import (``tests/programs/lucidlibs``):

- vit-pytorch: ViT (cls and mean pooling), SimpleViT, CaiT (talking heads,
  layer scale, layer dropout), MAE pretraining a SimpleViT, DINO with its
  torchvision augmentations and EMA teacher (``vit_models.py``); two dozen
  of its other variants (MobileViT, LeViT, ViViT, ...), forward and
  backward in training mode, its Recorder / Extractor / DistillWrapper /
  memory Adapter tools, and a configuration torch refuses
  (``vit_variants.py``);
- x-transformers: a decoder LM in its AutoregressiveWrapper (rotary xpos,
  memory tokens and key/values) trained and sampled (greedy with and
  without the kv cache, top-k, top-p, top-a, min-p, eos, ragged prompts,
  contrastive decoding, beam search), an XTransformer encoder-decoder, a
  continuous autoregressive model (``x_transformers_lm.py``), and encoders
  under many attention / norm / positional flags and the library's other
  wrappers (belief state, multi-input, NeoMLP, prefix LM, probabilistic
  continuous, XVal, CrossAttender) (``x_transformers_encoders.py``);
  decoders under two dozen more of its features (flash attention, cross
  attention, adaptive norm, hyper-connections, value residuals, ...),
  ViTransformerWrapper, NonAutoregressiveWrapper, XLAutoregressiveWrapper
  (``x_transformers_features.py``);
- vector-quantize-pytorch: a VQ-VAE trained with VectorQuantize's EMA
  codebook and commitment loss, cosine / multi-head / k-means VQ,
  ResidualVQ with a learnable codebook, GroupedResidualVQ, FSQ, LFQ, and
  eight more quantizers (rotation trick, SimVQ, residual FSQ / LFQ, FSP,
  ...) forward and backward (``vector_quantize.py``);
- rotary-embedding-torch and lion-pytorch: rotary / xpos / axial / learned
  rotary embeddings in a small causal LM trained by Lion, the rotary
  library's other options and two configurations torch refuses, Lion with
  decoupled weight decay (``rotary_lion.py``).

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions; vit_pytorch imports torchvision, whose
compiled ops ``vision_oracle.torch_command`` leaves out).  The programs
seed torch and Python's ``random`` as a user does; tracec's draws equal
PyTorch's, so dropout, augmentations and sampling compare strictly.
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "lucidlibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "vit_models.py": ("vit-pytorch",),
    "vit_variants.py": ("vit-pytorch",),
    "x_transformers_lm.py": ("x-transformers",),
    "x_transformers_encoders.py": ("x-transformers",),
    "x_transformers_features.py": ("x-transformers",),
    "vector_quantize.py": ("vector-quantize-pytorch",),
    "rotary_lion.py": ("rotary-embedding-torch", "lion-pytorch"),
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_lucidlibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
