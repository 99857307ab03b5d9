"""stable-baselines3's README quickstart: PPO (then A2C) on CartPole-v1 over a
few vectorized envs, a short learn(), deterministic predictions,
evaluate_policy, and a save / load round-trip."""
import os
import random
import tempfile

import numpy as np
import torch

from stable_baselines3 import A2C, PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.utils import set_random_seed


def psum(model):
    return sum(p.detach().double().sum().item() for p in model.policy.parameters())


random.seed(0)
torch.manual_seed(0)
set_random_seed(0)

vec_env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
model = PPO("MlpPolicy", vec_env, n_steps=32, batch_size=64, n_epochs=2, seed=0, verbose=0)
print("policy", model.policy.__class__.__name__,
      sum(p.numel() for p in model.policy.parameters()))
print(f"init param sum {psum(model):.6f}")
model.learn(total_timesteps=256)
print(f"ppo param sum {psum(model):.6f}")
for k in ("train/loss", "train/policy_gradient_loss", "train/value_loss",
          "train/entropy_loss", "train/approx_kl", "train/clip_fraction",
          "train/explained_variance"):
    v = model.logger.name_to_value.get(k)
    print(k, None if v is None else f"{float(v):.6f}")

obs = vec_env.reset()
for step in range(5):
    action, _states = model.predict(obs, deterministic=True)
    obs, rewards, dones, info = vec_env.step(action)
    print("step", step, action.tolist(), np.round(obs[0], 5).tolist(), rewards.tolist())

obs_t, _ = model.policy.obs_to_tensor(obs)
with torch.no_grad():
    values, log_prob, entropy = model.policy.evaluate_actions(
        obs_t, torch.as_tensor(action))
print("values", [f"{v:.5f}" for v in values.flatten().tolist()])
print("log_prob", [f"{v:.5f}" for v in log_prob.tolist()])
print("entropy", [f"{v:.5f}" for v in entropy.tolist()])

eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1)
mean_reward, std_reward = evaluate_policy(model, eval_env, n_eval_episodes=3, deterministic=True)
print(f"ppo eval {mean_reward:.2f} +/- {std_reward:.2f}")

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ppo_cartpole")
    model.save(path)
    print("saved", sorted(os.listdir(d)))
    del model
    model = PPO.load(path, env=vec_env)
    print(f"loaded param sum {psum(model):.6f}")
    obs = vec_env.reset()
    action, _ = model.predict(obs, deterministic=True)
    print("loaded predict", action.tolist())

set_random_seed(1)
a2c = A2C("MlpPolicy", "CartPole-v1", n_steps=8, seed=1, verbose=0)
a2c.learn(total_timesteps=160)
print(f"a2c param sum {psum(a2c):.6f}")
for k in ("train/policy_loss", "train/value_loss", "train/entropy_loss",
          "train/explained_variance", "train/n_updates"):
    v = a2c.logger.name_to_value.get(k)
    print(k, None if v is None else f"{float(v):.6f}")
obs, _ = a2c.get_env().envs[0].reset(seed=3), None
action, _ = a2c.predict(np.array([0.01, -0.02, 0.03, 0.04], dtype=np.float32), deterministic=True)
print("a2c predict", int(action))
mean_reward, std_reward = evaluate_policy(a2c, eval_env, n_eval_episodes=2)
print(f"a2c eval {mean_reward:.2f} +/- {std_reward:.2f}")
