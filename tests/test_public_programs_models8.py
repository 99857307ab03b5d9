"""Public model programs, small configurations (``tests/programs/models8``):
audio, time series and classic NLP.  The PyTorch speech-command tutorial's M5
raw-waveform classifier with a torchaudio-style mel spectrogram front end
(``torch.stft`` / ``Tensor.stft`` / ``istft``, melscale_fbanks), laiguokun's
LSTNet (Conv2d over time x features, GRU, skip-GRU, highway), ElementAI's
N-BEATS (generic and interpretable stacks, shared blocks, MAPE / sMAPE / MASE
with divide_no_nan), pytorch-forecasting's Temporal Fusion Transformer
pieces (GRN with GLU, variable selection, interpretable multi-head attention,
causal mask, quantile loss), the PyTorch tutorial's fastText-style
EmbeddingBag classifier with fastText's n-gram hashing, Zhang et al.'s
character CNN and AllenNLP's ELMo character encoder with highway layers,
kimiyoung's Transformer-XL (relative attention, _rel_shift, memories),
HuggingFace's T5 relative position buckets and Longformer's sliding-window
attention (as_strided chunks, checked against Tensor.unfold and dense
banded attention).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict, so under torch that line
is eager against eager and under tracec it is ``tracec.compile`` against
eager).  Weights and data come from numpy, so the two runs compute the same
numbers: the outputs must have the same lines (numbers masked, spaces
dropped) and every number must agree to a float32 tolerance, except on lines
marked ``[rng]``.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models8"

CASES = ["speech_m5.py", "lstnet.py", "nbeats.py", "tft.py", "fasttext.py", "char_cnn_elmo.py",
         "transformer_xl.py", "t5_relbias.py", "longformer.py"]
# Programs whose compiled step tracec.compile runs eagerly: none.  The TFT's
# forward takes int(encoder_lengths.max()) of an argument (a shape from the
# data): a speculated integer read, checked at every call.
EAGER_FALLBACK: set = set()


torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models8_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
