"""Loading Stable-Baselines3 models saved by PyTorch (zips written with
torch 2.13, tests/fixtures/rllibs/make_fixtures.py), as users load RL Zoo
or Hugging Face Hub checkpoints: PPO.load / SAC.load (the policy's and
optimizers' state dicts, SAC's log entropy coefficient from
pytorch_variables.pth), predictions, continued training with the loaded
optimizer state, a fresh save / load round-trip, and load_from_zip_file's
parts."""
import os
import pathlib
import random
import tempfile

import gymnasium as gym
import numpy as np
import torch

from stable_baselines3 import PPO, SAC
from stable_baselines3.common.save_util import load_from_zip_file

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "rllibs"


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


random.seed(0)
torch.manual_seed(0)

data, params, variables = load_from_zip_file(FIXTURES / "sac_pendulum_torch.zip")
print("zip parts", sorted(params), sorted(variables), data["num_timesteps"], data["_n_updates"])
print("policy tensors", len(params["policy"]), sorted(params["policy"])[:4])
print("log_ent_coef", fmt(variables["log_ent_coef"].detach()), variables["log_ent_coef"].requires_grad)

ppo = PPO.load(FIXTURES / "ppo_cartpole_torch.zip", env=gym.make("CartPole-v1"), seed=1)
print(f"ppo loaded {psum(ppo.policy):.6f}", ppo.num_timesteps, ppo.n_steps, ppo.policy.net_arch)
obs = np.array([[0.1, 0.2, -0.3, 0.4], [0.0, -0.5, 0.05, 0.3]], np.float32)
print("ppo predict", ppo.predict(obs, deterministic=True)[0].tolist())
with torch.no_grad():
    dist = ppo.policy.get_distribution(torch.as_tensor(obs))
    print("ppo probs", fmt(dist.distribution.probs), fmt(ppo.policy.predict_values(torch.as_tensor(obs))))
state = ppo.policy.optimizer.state_dict()
print("ppo adam", len(state["state"]), state["param_groups"][0]["lr"],
      f"{sum(s['exp_avg_sq'].double().sum().item() for s in state['state'].values()):.8f}")
ppo.learn(32, reset_num_timesteps=False)
print(f"ppo continued {psum(ppo.policy):.6f}", ppo.num_timesteps,
      f"{float(ppo.logger.name_to_value['train/loss']):.5f}")

sac = SAC.load(FIXTURES / "sac_pendulum_torch.zip", env=gym.make("Pendulum-v1"), seed=2)
print(f"sac loaded {psum(sac.actor):.6f} {psum(sac.critic):.6f} {psum(sac.critic_target):.6f}")
print(f"sac ent_coef {sac.log_ent_coef.exp().item():.6f}", sac.log_ent_coef.requires_grad,
      sac.log_ent_coef is sac.ent_coef_optimizer.param_groups[0]["params"][0])
print("sac predict", fmt(sac.predict(np.array([0.5, -0.5, 1.0], np.float32), deterministic=True)[0]))
sac.learn(30, reset_num_timesteps=False)
print(f"sac continued {psum(sac.actor):.6f} {sac.log_ent_coef.item():.6f}")

with tempfile.TemporaryDirectory() as d:
    sac.save(os.path.join(d, "sac"))
    again = SAC.load(os.path.join(d, "sac"))
    print(f"round trip {psum(again.actor):.6f} {again.log_ent_coef.item():.6f}",
          sorted(again.critic.optimizer.state_dict()["state"])[:3])
