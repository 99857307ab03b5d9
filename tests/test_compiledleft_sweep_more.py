"""More training steps in the style of public code
(tests/compiledleft_cases.py; see tests/test_compiledleft_sweep_train.py):
ReduceLROnPlateau and parameter groups, cumulative BatchNorm, a compiled
forward/backward with the optimizer outside, GradScaler skipping
overflowing steps, uncertainty-weighted multi-task losses, teacher forcing
drawn by random.random(), triplet / cosine losses, train/eval switching,
WGAN-GP's create_graph gradient penalty, LBFGS's closure, Embedding's
max_norm renorm, a causal transformer over changing lengths, a short last
batch, weight_norm, bfloat16 autocast, a backbone unfrozen by
requires_grad_ and add_param_group mid-training with hand-decayed lrs, and
a LambdaLR warm-up stepped inside the step."""
import pytest

from test_compiledleft_sweep_train import check

CASES = ["plateau_groups", "bn_cumulative", "backward_only_compiled", "scaler_overflow",
         "multitask_uncertainty", "seq2seq_teacher_forcing", "siamese_triplet",
         "dropout_eval_switch", "wgan_gp", "lbfgs_closure", "embedding_max_norm",
         "causal_varlen", "short_last_batch_bn", "weight_norm_param", "autocast_bf16",
         "freeze_unfreeze", "lambda_warmup"]


@pytest.mark.parametrize("name", CASES)
def test_compiled_training_step_equals_eager_and_torch(name):
    check(name)
