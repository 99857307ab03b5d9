"""Real published packages run unmodified on tracec: Stable-Baselines3 and
the Gymnasium environments it trains on (classic control, toy text; its
PyTorch wrappers too) (``tests/programs/rllibs``):

- ``ppo_cartpole.py``: SB3's README quickstart, PPO on CartPole-v1 over
  four vectorized envs (make_vec_env), a short learn(), the logger's train/
  values, deterministic predict, evaluate_actions, evaluate_policy, a
  save / load round-trip through a zip in a temporary folder; then A2C;
- ``offpolicy_pendulum.py``: the off-policy algorithms of SB3's docs: DQN
  on CartPole-v1 (its Q-network, target network, exploration schedule and
  replay buffer), SAC on Pendulum-v1 (the learned entropy coefficient, the
  squashed Gaussian actor's log-probabilities), TD3 with NormalActionNoise
  (saved and loaded with its replay buffer), DDPG with
  OrnsteinUhlenbeckActionNoise on MountainCarContinuous-v0;
- ``custom_policy.py``: the custom-policy and callback guides: net_arch /
  activation_fn, a custom BaseFeaturesExtractor (separate actor / critic
  extractors), a custom ActorCriticPolicy's own network, a custom
  BaseCallback with EvalCallback (best model saved and loaded),
  StopTrainingOnRewardThreshold and CheckpointCallback, VecNormalize's
  running statistics saved and loaded, gSDE exploration (SAC, PPO), and
  MultiDiscrete / MultiBinary action spaces;
- ``images_her.py``: CnnPolicy (NatureCNN behind VecTransposeImage and
  VecFrameStack) with PPO and DQN on FakeImageEnv, MultiInputPolicy
  (CombinedExtractor) on SimpleMultiObsEnv, HerReplayBuffer with DQN and
  SAC on BitFlippingEnv, get_parameters / set_parameters, a policy saved and
  loaded alone, and the docs' export of a policy traced by torch.jit;
- ``gym_torch_loop.py``: Gymnasium's NumpyToTorch wrappers (single and
  vector env; array-api-compat's torch namespace and DLPack under them)
  driving a hand-written REINFORCE loop, numpy_to_torch / torch_to_numpy,
  and SB3's custom-env example through check_env and PPO with linear
  learning-rate / clip-range schedules and target_kl, its CSV log read
  back;
- ``variants.py``: options beyond the defaults: DQN's n-step returns,
  gradient clipping and optimize_memory_usage; SAC trained per episode with
  gradient_steps=-1, three critics, a fixed or "auto_0.3" entropy
  coefficient and gSDE with expln; PPO's squashed gSDE with a clipped value
  function; A2C with Adam logging to TensorBoard (the docs' HParam
  callback; the event files read back), learn() continued; VecMonitor /
  VecCheckNan; ReplayBuffer and RolloutBuffer (GAE) on their own;
  polyak_update and LinearSchedule;
- ``toy_text.py``: discrete observations (SB3's one-hot preprocess_obs):
  PPO on FrozenLake-v1, DQN on Taxi-v4, A2C on CliffWalking-v1 over a
  forked SubprocVecEnv; PPO on CartPole behind a stack of Gymnasium
  wrappers (NormalizeObservation, FrameStackObservation, ...);
- ``distributions.py``: SB3's action distributions on their own
  (categorical, multi-categorical, Bernoulli, diagonal and squashed
  Gaussian with its TanhBijector at the bounds, gSDE with expln and learned
  features): samples, modes, log-probs, entropies, KL divergences and
  gradients;
- ``pretrained_zip.py``: PPO and SAC zips saved under torch
  (``tests/fixtures/rllibs``, as RL Zoo / Hub checkpoints are) loaded,
  predicting and training on with their optimizers' state, saved again;
- ``dqn_tutorial.py``: PyTorch's DQN tutorial as written, on Gymnasium's
  real CartPole-v1 (no SB3);
- ``cleanrl_ppo.py``: CleanRL's single-file PPO as written (a Gymnasium
  SyncVectorEnv with RecordEpisodeStatistics, GAE and the clipped losses
  in torch, TensorBoard logging); ``cleanrl_sac.py``: its
  sac_continuous_action.py (SB3's ReplayBuffer, twin soft Q-networks, the
  tanh-squashed actor, automatic entropy tuning) on Pendulum-v1;
- ``sb3_contrib_algos.py``: SB3-Contrib's RecurrentPPO (LSTM states
  through predict), TRPO (conjugate gradient on Hessian-vector products),
  QR-DQN, TQC, MaskablePPO, ARS and CrossQ (batch renormalization).

Each program runs under ``tracec run`` (SB3's and Gymnasium's own ``import
torch`` is tracec) and, as the reference, under torch 2.13 (recorded, keyed
by the packages' installed versions and the data files a program reads).  The programs seed torch, NumPy and
Python's ``random`` as SB3's ``set_random_seed`` / ``seed=`` do; tracec's
draws equal PyTorch's, so sampled actions, rollouts and losses compare
strictly.
"""
import pathlib
import subprocess

import pytest

import torch_recordings
from library_programs import LIBRARY_ENV, recording_key, versions_or_skip
from test_public_programs_tutorials2 import check_program
from vision_oracle import torch_command

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "rllibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "ppo_cartpole.py": ("stable-baselines3", "gymnasium"),
    "offpolicy_pendulum.py": ("stable-baselines3", "gymnasium"),
    "custom_policy.py": ("stable-baselines3", "gymnasium"),
    "images_her.py": ("stable-baselines3", "gymnasium"),
    "gym_torch_loop.py": ("stable-baselines3", "gymnasium", "array-api-compat"),
    "variants.py": ("stable-baselines3", "gymnasium", "tensorboard"),
    "toy_text.py": ("stable-baselines3", "gymnasium"),
    "distributions.py": ("stable-baselines3", "gymnasium"),
    "pretrained_zip.py": ("stable-baselines3", "gymnasium"),
    "dqn_tutorial.py": ("gymnasium",),
    "cleanrl_ppo.py": ("gymnasium", "tensorboard"),
    "cleanrl_sac.py": ("stable-baselines3", "gymnasium"),
    "sb3_contrib_algos.py": ("sb3-contrib", "stable-baselines3", "gymnasium"),
}

#: program -> the data files it reads (part of its torch recording's key)
DATA = {
    "pretrained_zip.py": [ROOT / "tests" / "fixtures" / "rllibs" / f
                          for f in ("ppo_cartpole_torch.zip", "sac_pendulum_torch.zip")],
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_rllibs_program_matches_torch(script, tmp_path):
    versions = versions_or_skip(CASES[script])
    path = PROGS / script
    env = LIBRARY_ENV

    def run():
        r = subprocess.run(torch_command(path, []), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, "torch failed:\n" + r.stderr[-4000:]
        return r.stdout

    ref = torch_recordings.torch_output(
        f"rllibs/{path.stem}", torch_recordings.program_files(path, DATA.get(script, ())), [],
        recording_key(versions), run)
    check_program(path, ref, tmp_path, False)
