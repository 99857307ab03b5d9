"""Public reinforcement-learning, sequence, efficient-attention and style
transfer programs, small configurations (``tests/programs/models24``):
higgsfield/RL-Adventure's prioritized DQN and rlcode/per (NaivePrioritizedBuffer
with priorities ** alpha and annealed importance weights, the SumTree-backed
Memory, Variable-era code, gather / squeeze TD targets and double DQN, prios
from the weighted loss, the target network synced by load_state_dict);
nikhilbarhate99/PPO-PyTorch with a continuous action space (MultivariateNormal
over torch.diag / diag_embed covariances, Monte Carlo rewards-to-go, K epochs
of the clipped surrogate, decay_action_std, save / load with a map_location
lambda); bentrevett/pytorch-seq2seq's packed-padded GRU encoder and
attention decoder with budzianowski/PyTorch-Beam-Search-Decoding's
PriorityQueue beam search and a batched topk beam search;
lucidrains/performer-pytorch and lucidrains/linformer (orthogonal random
features through torch.linalg.qr, softmax / generalized kernels, linear and
chunked causal linear attention, the projection redraw by buffer copy_,
Linformer's E / F sequence projections) in a small causal LM;
naoto0804/pytorch-AdaIN (calc_mean_std, adaptive instance normalization,
the reflection-padded decoder with nearest upsampling, the VGG cut into
encoder slices, content / style losses, style interpolation, CORAL through
torch.svd / inverse, adjust_learning_rate, an infinite sampler).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models24"

CASES = ["prioritized_dqn.py", "ppo_continuous.py", "seq2seq_beam.py", "performer_linformer.py",
         "adain_style.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models24_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
