"""SB3 options beyond the defaults, as its docs and RL Zoo hyperparameters
use them: DQN with n-step returns, max_grad_norm and
optimize_memory_usage; SAC with
train_freq in episodes, gradient_steps=-1, a fixed ent_coef and a
custom target_entropy; PPO with squash_output gSDE (expln,
full_std=False), no advantage normalization and a value-function clip;
A2C with Adam and GAE; a tensorboard log (hyperparameters too, read back); continuing learn() without
resetting the timestep counter; VecMonitor / VecCheckNan; the policy's
predict with episode starts; evaluate_policy's per-episode returns."""
import os
import random
import tempfile

import gymnasium as gym
import numpy as np
import torch as th
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util.tensor_util import make_ndarray

from stable_baselines3 import A2C, DQN, PPO, SAC
from stable_baselines3.common.buffers import ReplayBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import HParam
from stable_baselines3.common.utils import LinearSchedule, polyak_update
from stable_baselines3.common.vec_env import DummyVecEnv, VecCheckNan, VecMonitor


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


def logged(model, keys):
    print("  " + " ".join(f"{k.split('/')[-1]}={float(model.logger.name_to_value[k]):.5f}"
                          for k in keys))


random.seed(0)
th.manual_seed(0)

venv = make_vec_env("CartPole-v1", n_envs=2, seed=0)
model = DQN("MlpPolicy", venv, n_steps=3, max_grad_norm=1.0, learning_starts=40, batch_size=16,
            buffer_size=400, train_freq=2, gradient_steps=2, target_update_interval=30,
            exploration_initial_eps=0.5, policy_kwargs=dict(net_arch=[32]), seed=0)
print(type(model.replay_buffer).__name__)
model.learn(120)
print(f"dqn n-step {psum(model.q_net):.5f} {psum(model.q_net_target):.5f}")
logged(model, ("train/loss", "train/n_updates", "rollout/exploration_rate"))

model = DQN("MlpPolicy", "CartPole-v1", optimize_memory_usage=True,
            replay_buffer_kwargs=dict(handle_timeout_termination=False), buffer_size=300,
            learning_starts=50, batch_size=16, policy_kwargs=dict(net_arch=[16]), seed=1)
model.learn(150)
print(f"dqn memory {psum(model.q_net):.5f}")
logged(model, ("train/loss",))

model = SAC("MlpPolicy", gym.make("Pendulum-v1", max_episode_steps=30), train_freq=(1, "episode"), gradient_steps=-1, ent_coef=0.05,
            learning_starts=0, batch_size=32, buffer_size=1000, tau=0.02,
            policy_kwargs=dict(net_arch=dict(pi=[32], qf=[32, 32]), n_critics=3), seed=2)
model.learn(60)   # two 30-step episodes
print(f"sac episodes {psum(model.actor):.5f} {psum(model.critic):.5f} {psum(model.critic_target):.5f}")
logged(model, ("train/actor_loss", "train/critic_loss", "train/ent_coef", "train/n_updates"))

model = SAC("MlpPolicy", "Pendulum-v1", ent_coef="auto_0.3", target_entropy=-0.5,
            learning_starts=20, batch_size=16, buffer_size=200, use_sde=True,
            policy_kwargs=dict(net_arch=[32], use_expln=True, clip_mean=1.5), seed=3)
model.learn(60)
print(f"sac target entropy {psum(model.actor):.5f} {model.log_ent_coef.exp().item():.5f}")

model = PPO("MlpPolicy", "MountainCarContinuous-v0", use_sde=True, sde_sample_freq=8,
            normalize_advantage=False, clip_range_vf=0.3, ent_coef=0.01, vf_coef=0.4,
            max_grad_norm=0.3, n_steps=64, batch_size=32, n_epochs=2, seed=4,
            policy_kwargs=dict(squash_output=True, full_std=False, use_expln=True,
                               log_std_init=-1.0, net_arch=dict(pi=[16], vf=[16])))
model.learn(128)
print(f"ppo squashed gsde {psum(model.policy):.5f}")
logged(model, ("train/loss", "train/value_loss", "train/std", "train/clip_fraction"))
obs = model.get_env().reset()
print("ppo actions", fmt(model.predict(obs, deterministic=True)[0]),
      fmt(model.predict(obs, deterministic=False)[0]))



class HParamCallback(BaseCallback):
    """The docs' "Logging Hyperparameters" callback."""

    def _on_training_start(self) -> None:
        hparam_dict = {"algorithm": self.model.__class__.__name__,
                       "learning rate": self.model.learning_rate, "gamma": self.model.gamma}
        metric_dict = {"rollout/ep_len_mean": 0, "train/value_loss": 0.0}
        self.logger.record("hparams", HParam(hparam_dict, metric_dict),
                           exclude=("stdout", "log", "json", "csv"))

    def _on_step(self) -> bool:
        return True


with tempfile.TemporaryDirectory() as d:
    model = A2C("MlpPolicy", "Acrobot-v1", use_rms_prop=False, gae_lambda=0.9,
                normalize_advantage=True, n_steps=10, seed=5, tensorboard_log=d)
    model.learn(100, tb_log_name="a2c", callback=HParamCallback(), log_interval=5)
    print(f"a2c adam {psum(model.policy):.5f} {type(model.policy.optimizer).__name__}")
    logged(model, ("train/policy_loss", "train/value_loss", "train/entropy_loss"))
    model.learn(100, reset_num_timesteps=False, tb_log_name="a2c", log_interval=5)
    print("continued", model.num_timesteps, model._n_updates, sorted(os.listdir(d)),
          [f.split(".")[0] for f in os.listdir(os.path.join(d, "a2c_1"))])
    print(f"a2c continued {psum(model.policy):.5f}")
    model.logger.close()
    run = os.path.join(d, "a2c_1")
    for name in sorted(os.listdir(run), key=lambda f: os.path.getmtime(os.path.join(run, f))):
        values = {}
        for event in EventFileLoader(os.path.join(run, name)).Load():
            for v in event.summary.value:
                plugin = v.metadata.plugin_data.plugin_name
                values.setdefault((v.tag, plugin), []).append(
                    (event.step, f"{float(make_ndarray(v.tensor)):.4f}" if plugin == "scalars"
                     else len(v.metadata.plugin_data.content)))
        for (tag, plugin), got in sorted(values.items()):
            if not tag.startswith("time/"):     # (wall-clock values)
                print(" ", tag, plugin, got)

venv = VecCheckNan(VecMonitor(DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)), raise_exception=True)
venv.seed(6)
model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=6)
obs = venv.reset()
actions, states = model.predict(obs, state=None, episode_start=np.array([True, True]),
                                deterministic=True)
print("episode start predict", actions.tolist(), states)
rewards, lengths = evaluate_policy(model, venv, n_eval_episodes=4, return_episode_rewards=True)
print("episode rewards", rewards, lengths)

# the buffers on their own
obs_space, act_space = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,))
rb = ReplayBuffer(50, obs_space, act_space, n_envs=2)
rng = np.random.default_rng(0)
for i in range(30):
    rb.add(rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32),
           rng.standard_normal((2, 1)).astype(np.float32), rng.standard_normal(2).astype(np.float32),
           np.array([i % 7 == 6, False]), [{}, {}])
np.random.seed(7)
s = rb.sample(5)
print("replay sample", s.observations.dtype, fmt(s.actions), fmt(s.dones))
rollout = RolloutBuffer(8, obs_space, act_space, gamma=0.9, gae_lambda=0.8, n_envs=2)
for i in range(8):
    rollout.add(rng.standard_normal((2, 3)).astype(np.float32),
                rng.standard_normal((2, 1)).astype(np.float32), rng.standard_normal(2).astype(np.float32),
                np.array([i == 0, i == 4]), th.tensor(rng.standard_normal(2), dtype=th.float32),
                th.tensor(rng.standard_normal(2), dtype=th.float32))
rollout.compute_returns_and_advantage(last_values=th.tensor([0.5, -0.5]), dones=np.array([False, True]))
print("gae", fmt(rollout.advantages[:, 0]), fmt(rollout.returns[:, 1]))
batch = next(rollout.get(batch_size=16))
print("rollout batch", tuple(batch.observations.shape), f"{batch.advantages.sum().item():.5f}")

src, dst = th.nn.Linear(3, 2), th.nn.Linear(3, 2)
polyak_update(src.parameters(), dst.parameters(), tau=0.1)
sched = LinearSchedule(1.0, 0.1, 0.5)
print(f"polyak {psum(dst):.5f}", [f"{sched(p):.3f}" for p in (1.0, 0.75, 0.5, 0.0)])
