"""Public time-series and long-sequence programs, small configurations
(``tests/programs/models18``): zhouhaoyi/Informer2020 (ProbSparse self
attention with randint key sampling, topk of the sparsity measure and the
arange-indexed scatter into a mean / cumsum context, ProbMask, circular
Conv1d token embedding, fixed temporal embeddings, the ELU / MaxPool1d
distilling layer, exp_informer's training loop); yuqinie98/PatchTST (RevIN
with affine and subtract_last, series_decomp, ReplicationPad1d + unfold
patching, the channel-independent encoder with residual attention and
BatchNorm1d over the transposed sequence, flatten heads, OneCycleLR);
state-spaces/s4's minimal S4D (complex kernel parameters through
view_as_real / view_as_complex, the FFT convolution with n=2L, per-parameter
optimizer groups) with Hyena's fftconv; Jamie-Stirling/RetNet (xPos, the
gamma ** (n - m) decay mask, parallel / recurrent / chunkwise retention,
GroupNorm over heads, the swish gate).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import COUNTER_RNG_ENV, ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models18"

CASES = ["informer.py", "patchtst.py", "s4d_longconv.py", "retnet.py"]
EAGER_FALLBACK: set = set()

#: Programs whose compiled step samples (dropout, reparameterized noise) and
#: prints whether it equals the eager step: run with eager draws on the
#: compiled stream (``COUNTER_RNG_ENV``).
COUNTER_RNG = {'informer.py'}
torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models18_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK,
                  COUNTER_RNG_ENV if script in COUNTER_RNG else None)
