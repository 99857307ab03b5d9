"""Gymnasium's PyTorch side as its docs use it: the NumpyToTorch wrapper
(observations as tensors, tensor actions) on CartPole-v1 and its vector
version on a SyncVectorEnv, driving a hand-written REINFORCE loop (the
"Training an agent" tutorial's shape, in PyTorch); numpy_to_torch /
torch_to_numpy on nested data; and a custom Gymnasium env (SB3's "Using
Custom Environments" GoLeft example) checked by SB3's check_env, trained by
PPO with a linear learning-rate schedule, logged to CSV and read back."""
import csv
import os
import random
import tempfile

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.wrappers import NumpyToTorch
from gymnasium.wrappers.numpy_to_torch import numpy_to_torch, torch_to_numpy
from gymnasium.wrappers.vector import NumpyToTorch as VectorNumpyToTorch
from torch import nn
from torch.distributions import Categorical

from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.logger import configure

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)

# the wrapper: tensors in, tensors out
env = NumpyToTorch(gym.make("CartPole-v1"))
obs, info = env.reset(seed=123)
print(type(obs).__name__, obs.dtype, [f"{v:.5f}" for v in obs.tolist()])
obs, reward, terminated, truncated, info = env.step(torch.tensor(1))
print(type(reward).__name__, reward, terminated, truncated, [f"{v:.5f}" for v in obs.tolist()])

data = {"a": np.arange(3.0), "b": (np.ones((2, 2), np.float32), 4)}
t = numpy_to_torch(data)
print({k: type(v).__name__ for k, v in t.items()}, t["b"][0].dtype, t["b"][1])
back = torch_to_numpy({"x": torch.arange(4).reshape(2, 2), "y": [torch.tensor(2.5)]})
print(type(back["x"]).__name__, back["x"].tolist(), type(back["y"][0]).__name__, float(back["y"][0]))


# REINFORCE over the wrapped env
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))

    def forward(self, x):
        return Categorical(logits=self.net(x))


policy = Policy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range(5):
    obs, _ = env.reset(seed=episode)
    log_probs, rewards = [], []
    done = False
    while not done:
        dist = policy(obs.float())
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        done = terminated or truncated
    returns, g = [], 0.0
    for r in reversed(rewards):
        g = r + 0.99 * g
        returns.insert(0, g)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    loss = -(torch.stack(log_probs) * returns).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"episode {episode} length {len(rewards)} loss {loss.item():.5f}")

# the vector wrapper over a SyncVectorEnv
envs = VectorNumpyToTorch(gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync"))
obs, info = envs.reset(seed=7)
print("vector", type(obs).__name__, tuple(obs.shape), obs.dtype)
total = torch.zeros(3)
for step in range(20):
    with torch.no_grad():
        action = policy(obs.float()).sample()
    obs, reward, terminated, truncated, info = envs.step(action)
    total += reward
print("vector rewards", type(reward).__name__, reward.dtype, total.tolist(),
      [f"{v:.4f}" for v in obs.sum(1).tolist()])
envs.close()


# SB3's custom environment example
class GoLeftEnv(gym.Env):
    metadata = {"render_modes": ["console"]}
    LEFT, RIGHT = 0, 1

    def __init__(self, grid_size=10, render_mode="console"):
        super().__init__()
        self.render_mode = render_mode
        self.grid_size = grid_size
        self.agent_pos = grid_size - 1
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(low=0, high=self.grid_size, shape=(1,), dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed, options=options)
        self.agent_pos = self.grid_size - 1
        return np.array([self.agent_pos]).astype(np.float32), {}

    def step(self, action):
        if action == self.LEFT:
            self.agent_pos -= 1
        elif action == self.RIGHT:
            self.agent_pos += 1
        else:
            raise ValueError(f"Received invalid action={action}")
        self.agent_pos = np.clip(self.agent_pos, 0, self.grid_size)
        terminated = bool(self.agent_pos == 0)
        truncated = False
        reward = 1 if self.agent_pos == 0 else 0
        return np.array([self.agent_pos]).astype(np.float32), reward, terminated, truncated, {}

    def render(self):
        pass


check_env(GoLeftEnv())
print("check_env ok")


def linear_schedule(initial_value):
    def func(progress_remaining):
        return progress_remaining * initial_value
    return func


with tempfile.TemporaryDirectory() as d:
    model = PPO("MlpPolicy", GoLeftEnv(grid_size=6), learning_rate=linear_schedule(3e-3),
                clip_range=linear_schedule(0.2), n_steps=32, batch_size=16, n_epochs=3, seed=8,
                target_kl=0.5)
    model.set_logger(configure(d, ["csv"]))
    model.learn(96)
    print(f"goleft {sum(p.detach().double().sum().item() for p in model.policy.parameters()):.5f}")
    print(f"lr now {model.policy.optimizer.param_groups[0]['lr']:.6f}")
    with open(os.path.join(d, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    keys = ("train/loss", "train/value_loss", "train/learning_rate", "train/clip_range",
            "train/approx_kl", "train/n_updates", "rollout/ep_len_mean")
    for row in rows:
        print(" ".join(f"{k}={float(row[k]):.5f}" if row.get(k) else f"{k}=-" for k in keys))
    env = GoLeftEnv(grid_size=6)
    obs, _ = env.reset()
    actions = []
    for _ in range(8):
        action, _ = model.predict(obs, deterministic=True)
        actions.append(int(action))
        obs, reward, terminated, truncated, _ = env.step(action)
        if terminated:
            break
    print("goleft actions", actions, reward)
