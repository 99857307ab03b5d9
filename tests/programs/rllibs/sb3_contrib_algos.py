"""SB3-Contrib's algorithms as its docs' examples write them: RecurrentPPO
(an LSTM policy: hidden states carried through predict with episode
starts), TRPO (conjugate gradient on Hessian-vector products of the KL,
a line search), QR-DQN (quantile Huber loss), TQC (truncated quantile
critics), MaskablePPO with action masks, ARS (random search over a
linear policy) and CrossQ (batch renormalization), each learning a few
hundred steps; parameter sums, logger values and predictions printed.
(TRPO's conjugate-gradient step amplifies float32 rounding: its numbers
agree to ~1e-4, within the checker's tolerance.)"""
import random

import gymnasium as gym
import numpy as np
import torch as th

from sb3_contrib import ARS, QRDQN, TQC, TRPO, CrossQ, MaskablePPO, RecurrentPPO
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.env_util import make_vec_env


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


def logged(model, keys):
    print("  " + " ".join(f"{k.split('/')[-1]}={float(model.logger.name_to_value[k]):.5f}"
                          for k in keys if k in model.logger.name_to_value))


random.seed(0)
th.manual_seed(0)

# RecurrentPPO: the docs' example loop with lstm_states and episode_starts
model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, batch_size=16, n_epochs=2,
                     seed=0, policy_kwargs=dict(lstm_hidden_size=16, net_arch=[16]))
model.learn(64)
print(f"recurrent ppo {psum(model.policy):.5f}")
logged(model, ("train/loss", "train/value_loss", "train/approx_kl"))
vec_env = model.get_env()
obs = vec_env.reset()
lstm_states = None
num_envs = 1
episode_starts = np.ones((num_envs,), dtype=bool)
actions = []
for _ in range(6):
    action, lstm_states = model.predict(obs, state=lstm_states, episode_start=episode_starts,
                                        deterministic=True)
    obs, rewards, dones, info = vec_env.step(action)
    episode_starts = dones
    actions.append(int(action[0]))
print("recurrent actions", actions, fmt(lstm_states[0][0, 0, :4]), fmt(lstm_states[1][0, 0, :4]))

# TRPO
model = TRPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_critic_updates=3,
             cg_max_steps=5, seed=1, policy_kwargs=dict(net_arch=[16]))
model.learn(128)
print(f"trpo {psum(model.policy):.5f}")
logged(model, ("train/policy_objective", "train/value_loss", "train/kl_divergence_loss",
               "train/is_line_search_success", "train/std"))

# QR-DQN
model = QRDQN("MlpPolicy", "CartPole-v1", learning_starts=50, buffer_size=500, batch_size=16,
              target_update_interval=40, seed=2, policy_kwargs=dict(n_quantiles=8, net_arch=[32]))
model.learn(120)
print(f"qrdqn {psum(model.quantile_net):.5f}")
logged(model, ("train/loss",))
print("qrdqn predict", model.predict(np.array([0.1, 0.0, -0.1, 0.2], np.float32), deterministic=True)[0])

# TQC
model = TQC("MlpPolicy", "Pendulum-v1", top_quantiles_to_drop_per_net=2, learning_starts=50,
            batch_size=16, buffer_size=300, seed=3,
            policy_kwargs=dict(n_critics=2, n_quantiles=5, net_arch=[32]))
model.learn(100)
print(f"tqc {psum(model.actor):.5f} {psum(model.critic):.5f}")
logged(model, ("train/actor_loss", "train/critic_loss", "train/ent_coef"))

# MaskablePPO on the docs' InvalidActionEnvDiscrete
env = InvalidActionEnvDiscrete(dim=8, n_invalid_actions=4)
env.action_space.seed(4)
model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=2, gamma=0.4, seed=4,
                    policy_kwargs=dict(net_arch=[16]))
model.learn(64)
print(f"maskable {psum(model.policy):.5f}")
obs, _ = env.reset(seed=5)
masks = np.asarray(get_action_masks(env))
action, _ = model.predict(obs, action_masks=masks, deterministic=True)
print("maskable", masks.astype(int).tolist(), int(action))
logged(model, ("train/loss", "train/entropy_loss"))

# ARS
model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, n_top=1, delta_std=0.05, seed=5)
model.learn(600)
print(f"ars {psum(model.policy):.5f}")

# CrossQ
# (a few updates only: the bias of a Linear before a batch renorm has a zero
# gradient up to rounding, which Adam scales to +-lr steps in either library)
model = CrossQ("MlpPolicy", "Pendulum-v1", learning_starts=50, batch_size=16, buffer_size=300,
               seed=6, policy_kwargs=dict(net_arch=dict(pi=[32], qf=[64])))
model.learn(54)
print(f"crossq {psum(model.actor):.5f} {psum(model.critic):.5f}")
logged(model, ("train/actor_loss", "train/critic_loss", "train/ent_coef"))
obs, _ = gym.make("Pendulum-v1").reset(seed=7)
print("crossq predict", fmt(model.predict(obs, deterministic=True)[0]))
venv = make_vec_env("CartPole-v1", n_envs=2, seed=8)
model = RecurrentPPO("MlpLstmPolicy", venv, n_steps=16, batch_size=8, n_epochs=1, seed=8,
                     policy_kwargs=dict(lstm_hidden_size=8, enable_critic_lstm=False,
                                        shared_lstm=True, net_arch=[8]))
model.learn(64)
print(f"shared lstm {psum(model.policy):.5f}")
