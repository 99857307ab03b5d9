"""Public self-supervised, speech, traffic-forecasting, reading-comprehension
and segmentation programs, small configurations (``tests/programs/models31``):
facebookresearch/swav's SwAV (the multi-crop forward grouped by
unique_consecutive / cumsum of the crops' resolutions, per-group trunk runs
joined by torch.cat, the projection head and bias-free prototypes
normalized under no_grad through weight.data.clone() / copy_, the
distributed_sinkhorn with its guarded all_reduce calls and in-place
normalizations, the feature queue and its torch.mm against the prototypes,
the swapped prediction loss, prototype gradients set to None while frozen,
numpy float64 learning rates written into param_group["lr"], and the
checkpoint restart whose torch.load refuses those numpy scalars until they
are allowed with safe_globals); ming024/FastSpeech2 (get_mask_from_lengths
with a numpy int64 max_len, the numpy-temperature ScaledDotProductAttention
with masked_fill(-np.inf), FFT blocks with Conv1d position-wise FFNs, the
frozen sinusoid table Parameter, the VarianceAdaptor's bucketize into pitch
/ energy embeddings over frozen linspace / exp-log bins, the .item()-driven
LengthRegulator with its F.pad helper and zero-length expansions at
inference, the PostNet, FastSpeech2Loss's masked_select, ScheduledOptim's
numpy Noam learning rate, gradient accumulation with clip_grad_norm_, and
checkpoints read back by get_model with its `model.requires_grad_ = False`);
nnzhan/Graph-WaveNet (its Conv1d(kernel_size=(1, 2)) gate convolution and
PyTorch's refusal of its 4-D input, then the Conv2d the users' fix puts
there; einsum graph convolutions over np.matrix supports and the adaptive
softmax(relu(mm)) adjacency from Parameters made with .to(device), gated
dilated convolutions, skip crops in a bare try / except, masked MAE / MAPE /
RMSE with NaN guards, the numpy-scaled StandardScaler, per-epoch state_dict
checkpoints and the np.argmin best-epoch reload); galsang/BiDAF-pytorch's
BiDAF (the character CNN with its view-not-transpose reshape and squeezes,
the frozen from_pretrained word embedding, the setattr / getattr highway,
LSTMs whose forget-gate init chunk(4)[1].fill_ PyTorch refuses outside
no_grad, sorted and enforce_sorted=False packing, the trilinear attention
flow, Adadelta over filter()ed parameters, the parameter EMA swapped in
through .data.copy_ for the dev pass, the -inf tril span decoding beside
AllenNLP's triu / flattened-max search, SQuAD EM / F1); and NVlabs/SegFormer's
MiT backbone and SegFormerHead (overlapping patch embeddings returning H /
W, spatial-reduction attention, DWConv Mlp, timm's DropPath and erfinv
trunc_normal_, _init_weights through apply with fan_out //= groups,
reset_drop_path, bilinear resize to the first stage with a torch.Size
size, the ConvModule fuse, CrossEntropyLoss(ignore_index=255) beside
mmseg's mean over every pixel, topk accuracy, AdamW with one group per
parameter and mmcv's warm-up poly schedule, histc and bincount mIoU under
inference_mode; its compiled step trains the decode head).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models31"

CASES = ["swav.py", "fastspeech2.py", "graph_wavenet.py", "bidaf.py", "segformer.py"]
# FastSpeech2Loss's masked_select sizes its result by the masks, and BiDAF's
# pack_padded_sequence reads the lengths (torch.compile breaks the graph there
# too)
EAGER_FALLBACK = {"fastspeech2.py", "bidaf.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models31_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
