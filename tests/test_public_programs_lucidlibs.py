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
import importlib.metadata
import importlib.util
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program
from vision_oracle import recorded_torch_output

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


def _versions(packages):
    """``name==version`` of each installed package, or None if one is missing."""
    try:
        return " ".join(f"{p}=={importlib.metadata.version(p)}" for p in packages)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_lucidlibs_program_matches_torch(script, tmp_path):
    versions = _versions(CASES[script])
    if versions is None or importlib.util.find_spec("torch") is None:
        pytest.skip(f"{' / '.join(CASES[script])} (the test extra) not installed")
    path = PROGS / script
    env = {**ENV, "TORCH_COMPILE_DISABLE": "1"}

    ref = recorded_torch_output(
        path, tmp_path, env,
        f"TORCH_COMPILE_DISABLE=1 OMP_NUM_THREADS=1 {versions} vision_oracle.torch_command")
    check_program(path, ref, tmp_path, False)
