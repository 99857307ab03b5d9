"""SB3's off-policy algorithms as its docs' examples write them: DQN on
CartPole-v1, SAC on Pendulum-v1, TD3 with NormalActionNoise on
Pendulum-v1 and DDPG with OrnsteinUhlenbeckActionNoise on
MountainCarContinuous-v0; each learns a few hundred steps, then prints its
parameters' sums, the logger's train/ values, deterministic predictions,
evaluate_policy and its replay buffer's contents."""
import os
import random
import tempfile

import gymnasium as gym
import numpy as np
import torch

from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
from stable_baselines3.common.utils import set_random_seed


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def logged(model, keys):
    for k in keys:
        v = model.logger.name_to_value.get(k)
        print(" ", k, None if v is None else f"{float(v):.5f}")


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


random.seed(0)
torch.manual_seed(0)

# DQN (the docs' example, with a short exploration schedule)
env = gym.make("CartPole-v1")
model = DQN("MlpPolicy", env, learning_rate=1e-3, buffer_size=1000, learning_starts=50,
            batch_size=32, train_freq=4, gradient_steps=1, target_update_interval=50,
            exploration_fraction=0.5, policy_kwargs=dict(net_arch=[32, 32]), seed=0)
print(f"dqn init q {psum(model.q_net):.5f} target {psum(model.q_net_target):.5f}")
model.learn(total_timesteps=300)
print(f"dqn q {psum(model.q_net):.5f} target {psum(model.q_net_target):.5f}")
logged(model, ("train/loss", "train/n_updates", "rollout/exploration_rate"))
obs, _ = env.reset(seed=5)
with torch.no_grad():
    q = model.q_net(model.policy.obs_to_tensor(obs)[0])
print("dqn q values", fmt(q))
acts = []
for _ in range(6):
    action, _ = model.predict(obs, deterministic=True)
    acts.append(int(action))
    obs, reward, terminated, truncated, info = env.step(action)
print("dqn actions", acts)
rb = model.replay_buffer
print("dqn buffer", rb.size(), rb.pos, rb.full, fmt(rb.observations[:3, 0]), rb.actions[:8, 0, 0].tolist())
mean, std = evaluate_policy(model, env, n_eval_episodes=2, deterministic=True)
print(f"dqn eval {mean:.2f} +/- {std:.2f}")

# SAC (the docs' example on Pendulum)
set_random_seed(1)
env = gym.make("Pendulum-v1", max_episode_steps=100)
model = SAC("MlpPolicy", env, learning_starts=60, batch_size=64, buffer_size=1000,
            policy_kwargs=dict(net_arch=[64, 64]), seed=1, verbose=0)
print(f"sac init actor {psum(model.actor):.5f} critic {psum(model.critic):.5f}")
model.learn(total_timesteps=120)
print(f"sac actor {psum(model.actor):.5f} critic {psum(model.critic):.5f} "
      f"critic_target {psum(model.critic_target):.5f}")
print(f"sac log_ent_coef {model.log_ent_coef.item():.5f}")
logged(model, ("train/actor_loss", "train/critic_loss", "train/ent_coef",
               "train/ent_coef_loss", "train/n_updates"))
obs, _ = env.reset(seed=7)
action, _ = model.predict(obs, deterministic=True)
print("sac predict", fmt(action))
batch = model.replay_buffer.sample(4)
print("sac sample", tuple(batch.observations.shape), fmt(batch.rewards))
with torch.no_grad():
    act, logp = model.actor.action_log_prob(batch.observations)
print("sac log_prob", tuple(act.shape), tuple(logp.shape))
mean, std = evaluate_policy(model, env, n_eval_episodes=1, deterministic=True)
print(f"sac eval {mean:.3f}")

# TD3 with Gaussian action noise (the docs' example)
env = gym.make("Pendulum-v1")
n_actions = env.action_space.shape[-1]
action_noise = NormalActionNoise(mean=np.zeros(n_actions), sigma=0.1 * np.ones(n_actions))
model = TD3("MlpPolicy", env, action_noise=action_noise, learning_starts=60, batch_size=64,
            buffer_size=1000, policy_delay=2, policy_kwargs=dict(net_arch=[64, 64]), seed=2)
model.learn(total_timesteps=120)
print(f"td3 actor {psum(model.actor):.5f} critic {psum(model.critic):.5f} "
      f"actor_target {psum(model.actor_target):.5f}")
logged(model, ("train/actor_loss", "train/critic_loss", "train/n_updates"))
obs, _ = env.reset(seed=8)
print("td3 predict", fmt(model.predict(obs, deterministic=True)[0]))

with tempfile.TemporaryDirectory() as d:
    model.save(os.path.join(d, "td3_pendulum"))
    model.save_replay_buffer(os.path.join(d, "td3_buffer"))
    print("saved", sorted(os.listdir(d)))
    loaded = TD3.load(os.path.join(d, "td3_pendulum"), env=env)
    loaded.load_replay_buffer(os.path.join(d, "td3_buffer"))
    print(f"td3 loaded actor {psum(loaded.actor):.5f} buffer {loaded.replay_buffer.size()}")
    print("td3 loaded predict", fmt(loaded.predict(obs, deterministic=True)[0]))

# DDPG with Ornstein-Uhlenbeck noise on MountainCarContinuous
env = gym.make("MountainCarContinuous-v0")
noise = OrnsteinUhlenbeckActionNoise(mean=np.zeros(1), sigma=0.5 * np.ones(1))
model = DDPG("MlpPolicy", env, action_noise=noise, learning_starts=50, batch_size=32,
             buffer_size=500, policy_kwargs=dict(net_arch=[32, 32]), seed=3)
model.learn(total_timesteps=120)
print(f"ddpg actor {psum(model.actor):.5f} critic {psum(model.critic):.5f}")
logged(model, ("train/actor_loss", "train/critic_loss", "train/n_updates"))
obs, _ = env.reset(seed=9)
print("ddpg predict", fmt(model.predict(obs, deterministic=True)[0]))
