"""Public model programs, small configurations (``tests/programs/models11``):
speech, segmentation and recommendation models.  openai/whisper's model.py
(the LayerNorm / Linear / Conv1d subclasses casting to the input's dtype,
Conv1d's ``_conv_forward`` override, sinusoids, MultiHeadAttention on
F.scaled_dot_product_attention and its manual path, the kv cache that
``install_kv_cache_hooks`` fills through forward hooks on the key / value
Linears, greedy decoding on it) with a cross-entropy fine-tuning step;
facebookresearch/segment-anything's Sam (ImageEncoderViT with padded window
partitions and decomposed relative positions, get_rel_pos's linear
interpolation, PromptEncoder's PositionEmbeddingRandom and boolean-mask
writes, the TwoWayTransformer MaskDecoder with ConvTranspose2d upscaling and
hypernetwork MLPs, postprocess_masks) with a focal + dice + IoU fine-tuning
step; facebookresearch/dlrm's DLRM_Net (numpy-initialized MLPs, EmbeddingBag
sum tables with sparse gradients, learned per-sample weights, the dot
interaction's index lists, LRPolicyScheduler, BCE / weighted BCE);
sooftware/conformer (RelPositionalEncoding, RelativeMultiHeadAttention's
relative shift, the convolution module with GLU / depthwise Conv1d /
BatchNorm1d, Conv2dSubampling's lengths) trained with nn.CTCLoss.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict).  Weights and data come
from numpy, so the two runs compute the same numbers: the outputs must have
the same lines (numbers masked, spaces dropped) and every number must agree
to a float32 tolerance.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models11"

CASES = ["whisper.py", "segment_anything.py", "dlrm.py", "conformer.py"]
# Programs whose compiled step tracec.compile runs eagerly, and says so:
# SAM's PromptEncoder._embed_points reads and writes the point embeddings
# through boolean masks (point_embedding[labels == -1] += ...), whose
# selected size depends on the labels' values (torch.compile breaks its
# graph there too); conformer's CTC loss reads its lengths (computed in the
# step by Conv2dSubampling) and targets as Python data.
EAGER_FALLBACK = {"segment_anything.py", "conformer.py"}
# From a cold cache: whisper's encoder-decoder step ~5.5 s; ~2 s warm.
SLOW = {"whisper.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [
    pytest.param(c, id=c[:-3], marks=[pytest.mark.slow] if c in SLOW else []) for c in CASES])
def test_models11_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
