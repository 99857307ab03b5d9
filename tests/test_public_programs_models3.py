"""Public model programs, small configurations (``tests/programs/models3``):
johnma2006's mamba-minimal (selective scan, depthwise causal Conv1d,
RMSNorm, tied embeddings, greedy top-k generation), pytorch/examples' GAT,
locuslab's TCN (weight_norm, dilated causal convolutions, Chomp1d),
facebookresearch's ConvNeXt (channels_first LayerNorm, DropPath, layer
scale, trunc_normal_, AdamW with a warmup-cosine LambdaLR), an MLP-Mixer,
1Konny's Beta-VAE and a conditional VAE over ``torch.distributions``,
torchdiffeq's ODE demo with its fixed-grid RK4 solver written out,
microsoft's Swin Transformer (shifted windows, relative position bias,
checkpointing, GradScaler) with its training loop, rosinality's Glow
(ActNorm, LU-parametrized invertible 1x1 convolutions, affine couplings,
nn.DataParallel, reverse sampling), gram-ai's capsule network (dynamic
routing, masked reconstruction decoder, margin loss), and jzbontar's
PixelCNN (masked convolutions that mask their weight through ``.data`` in
forward, 256-way per-pixel cross-entropy, pixel-by-pixel sampling) and
sthalles' SimCLR (info_nce_loss's boolean masks, GradScaler / autocast,
SummaryWriter, checkpoints).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (inductor would take minutes on the CI's two
cores; the programs check their compiled steps against the same steps run
eagerly, and print the verdict, so under torch that line is eager against
eager and under tracec it is ``tracec.compile`` against eager).  Weights
and data come from numpy, so the two runs compute the same numbers: the
outputs must have the same lines (numbers masked, spaces dropped) and every
number must agree to a float32 tolerance, except on lines marked ``[rng]``.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import (ENV, assert_output_matches, run_tracec,
                                             torch_refs_fixture)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models3"

CASES = ["mamba_minimal.py", "gat.py", "tcn.py", "convnext.py", "mlp_mixer.py", "beta_vae.py",
         "neural_ode.py", "swin.py", "glow.py", "capsnet.py", "pixelcnn.py", "simclr.py"]
# Programs whose compiled step tracec.compile runs eagerly: none.  The ODE
# solver's checks of the time grid branch on argument values (bool() of a
# tensor): speculated decisions, so its step compiles too.
EAGER_FALLBACK: set = set()


torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


def _run_tracec(script, cwd):
    return run_tracec(PROGS / script, cwd)


SLOW = {"mamba_minimal.py", "convnext.py", "swin.py"}   # 20-30 s each with a cold compile cache


@pytest.mark.parametrize("script", [
    pytest.param(c, id=c[:-3], marks=[pytest.mark.slow] if c in SLOW else []) for c in CASES])
def test_models3_program_matches_torch(script, torch_refs, tmp_path):
    out, err = _run_tracec(script, tmp_path)
    assert ("running eagerly from now on" in err) == (script in EAGER_FALLBACK), err[-3000:]
    assert_output_matches(out, torch_refs(script), strict=True)
