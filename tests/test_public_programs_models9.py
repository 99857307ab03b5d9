"""Public model programs, small configurations (``tests/programs/models9``):
sequence labelling, dialogue, reinforcement learning and contrastive
pretraining.  The PyTorch tutorial's Bi-LSTM CRF (``_forward_alg`` with
``log_sum_exp``, ``_viterbi_decode``, ``neg_log_likelihood``, SGD with
weight decay), the PyTorch chatbot tutorial (a bidirectional GRU encoder over
``pack_padded_sequence`` / ``pad_packed_sequence``, Luong attention 'dot' /
'general' / 'concat', ``maskNLLLoss`` with ``gather`` / ``masked_select``,
teacher forcing, ``clip_grad_norm_``, greedy search decoding), pranz24's
Soft Actor-Critic (GaussianPolicy with ``rsample``, tanh squashing and its
log-prob correction, twin Q critics, soft / hard target updates through
``param.data.copy_``, alpha tuned through ``log_alpha``) on a tiny
deterministic environment, and OpenAI's CLIP (a ViT image encoder and a text
transformer with a causal mask, ``logit_scale``, symmetric cross entropy).

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

from test_public_programs_tutorials2 import COUNTER_RNG_ENV, ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models9"

CASES = ["bilstm_crf.py", "chatbot.py", "soft_actor_critic.py", "clip.py"]
# Programs whose compiled step tracec.compile runs eagerly: none.  The
# chatbot's train() decides teacher forcing with random.random() inside the
# step (speculated: each compiled call draws and checks the decision), packs
# by a lengths argument and masked_selects by a mask argument (speculated on
# their values), and returns sum(print_losses) / n_totals of item() numbers
# (recorded float64 arithmetic); the Bi-LSTM CRF sets self.hidden, a tuple of
# tensors (replayed by compiled calls).
EAGER_FALLBACK: set = set()


#: Programs whose compiled step samples (dropout, reparameterized noise) and
#: prints whether it equals the eager step: run with eager draws on the
#: compiled stream (``COUNTER_RNG_ENV``).
COUNTER_RNG = {'soft_actor_critic.py'}
torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models9_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK,
                  COUNTER_RNG_ENV if script in COUNTER_RNG else None)
