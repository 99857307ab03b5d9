"""Training steps of public reinforcement-learning and representation
code (tests/compiledleft_cases.py; see tests/test_compiledleft_sweep_train.py):
DQN on a NumPy replay batch with a target network synced by
load_state_dict, PPO minibatches with a clip range that changes every
update, distillation with a temperature, SimCLR's NT-Xent, focal loss with
mixup (a lambda drawn each step), task heads picked from a ModuleDict by
name."""
import pytest

from test_compiledleft_sweep_train import check

CASES = ["dqn_numpy_batch", "ppo_minibatch", "distill_kl", "simclr_ntxent", "focal_mixup",
         "moduledict_tasks"]


@pytest.mark.parametrize("name", CASES)
def test_compiled_training_step_equals_eager_and_torch(name):
    info = check(name)
    assert not info.eager_reasons, info.eager_reasons
