"""Public programs, small configurations (``tests/programs/programs25``),
written for these tests after public code (the source each follows is named
in its header): labml's evidential deep learning losses (lgamma / digamma /
new_tensor / masked_select), labml's FNet token mixing (torch.fft.fft twice,
the real part) with a fuzzy-tiling-activation feed-forward, labml's switch
transformer routing (nonzero(as_tuple=True), capacity dropping by randperm,
index writes, the load-balancing loss), labml's samplers (greedy,
temperature through distributions.Categorical, top-k through scatter,
nucleus through sort / cumsum / masked -inf) on an nn.LSTM language model,
and quantization-aware training with torch.fake_quantize_per_tensor_affine
(tensor qparams from moving-average min/max buffers) and
torch.fake_quantize_per_channel_affine on the weights, and QAT with
torch.ao.quantization's modules (QuantStub / DeQuantStub, default_fake_quant,
default_per_channel_weight_fake_quant, default_weight_fake_quant,
disable_observer after two steps, the FakeQuantize state dict loaded into a
fresh model, disable_fake_quant / enable_fake_quant), and the static
quantization tutorial's MobileNetV2 (ConvBNReLU Sequentials, the
FloatFunctional skip add, QuantStub / DeQuantStub) fused by its fuse_model()
with fuse_modules (the same function in eval) and fuse_modules_qat (the same
training trajectory); and labml's ALiBi slopes and biases (5 heads: the
interleaved extra slopes) with an AFT-local layer (masked position bias,
exp / sigmoid gating through einsum) in a character model.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (each checks a compiled training step against
the same step run eagerly).  The switch layer's compiled step runs eagerly:
its expert sizes depend on the routing (``nonzero``), which tracec says.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "programs25"

CASES = ["evidential.py", "fnet_fta.py", "switch_moe.py", "sampling_lstm.py", "qat_fake_quant.py",
         "qat_modules.py", "fuse_mobilenet.py", "alibi_aft.py"]
EAGER_FALLBACK = {"switch_moe.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs25_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
