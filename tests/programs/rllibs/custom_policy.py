"""SB3's "Custom Policy Network" and "Callbacks" guides: net_arch /
activation_fn through policy_kwargs, a custom BaseFeaturesExtractor, a
custom ActorCriticPolicy with its own MlpExtractor, VecNormalize (its
running statistics saved and loaded), an EvalCallback and a custom
BaseCallback, gSDE on Pendulum and PPO on MultiDiscrete / MultiBinary /
Box action spaces."""
import os
import random
import tempfile

import gymnasium as gym
import numpy as np
import torch as th
from torch import nn

from stable_baselines3 import A2C, PPO, SAC
from stable_baselines3.common.callbacks import (BaseCallback, CallbackList, CheckpointCallback,
                                                EvalCallback, StopTrainingOnRewardThreshold)
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


random.seed(0)
th.manual_seed(0)

# policy_kwargs: separate actor / critic architectures and an activation
policy_kwargs = dict(activation_fn=th.nn.ReLU, net_arch=dict(pi=[32, 32], vf=[64]))
model = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=policy_kwargs, n_steps=64,
            batch_size=32, n_epochs=2, seed=0)
print(model.policy)
model.learn(128)
print(f"ppo net_arch {psum(model.policy):.5f}")


# a custom features extractor (the guide's CustomCNN, here an MLP one)
class CustomExtractor(BaseFeaturesExtractor):
    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 16):
        super().__init__(observation_space, features_dim)
        n_input = observation_space.shape[0]
        self.net = nn.Sequential(nn.Linear(n_input, 32), nn.Tanh(),
                                 nn.Linear(32, features_dim), nn.LayerNorm(features_dim), nn.ELU())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.net(observations)


policy_kwargs = dict(features_extractor_class=CustomExtractor,
                     features_extractor_kwargs=dict(features_dim=16),
                     share_features_extractor=False, net_arch=[16])
model = A2C("MlpPolicy", "CartPole-v1", policy_kwargs=policy_kwargs, n_steps=16, seed=1)
model.learn(96)
print(f"a2c extractor {psum(model.policy.pi_features_extractor):.5f} "
      f"{psum(model.policy.vf_features_extractor):.5f} {psum(model.policy):.5f}")
print("a2c predict", model.predict(np.array([0.1, 0.2, -0.1, 0.3], dtype=np.float32),
                                   deterministic=True)[0].tolist())


# a custom policy: the guide's CustomNetwork / CustomActorCriticPolicy
class CustomNetwork(nn.Module):
    def __init__(self, feature_dim: int, last_layer_dim_pi: int = 24, last_layer_dim_vf: int = 12):
        super().__init__()
        self.latent_dim_pi = last_layer_dim_pi
        self.latent_dim_vf = last_layer_dim_vf
        self.policy_net = nn.Sequential(nn.Linear(feature_dim, last_layer_dim_pi), nn.ReLU())
        self.value_net = nn.Sequential(nn.Linear(feature_dim, last_layer_dim_vf), nn.ReLU())

    def forward(self, features):
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features):
        return self.policy_net(features)

    def forward_critic(self, features):
        return self.value_net(features)


class CustomActorCriticPolicy(ActorCriticPolicy):
    def __init__(self, observation_space, action_space, lr_schedule, *args, **kwargs):
        kwargs["ortho_init"] = False
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = CustomNetwork(self.features_dim)


model = PPO(CustomActorCriticPolicy, "CartPole-v1", n_steps=32, batch_size=16, n_epochs=2, seed=2)
model.learn(64)
print(f"custom policy {psum(model.policy):.5f}")
for k in ("train/loss", "train/approx_kl", "train/clip_range"):
    print(" ", k, f"{float(model.logger.name_to_value[k]):.5f}")


# callbacks: a custom BaseCallback, EvalCallback, CheckpointCallback
class CountingCallback(BaseCallback):
    def __init__(self, verbose=0):
        super().__init__(verbose)
        self.calls = 0
        self.rollouts = 0
        self.reward_sum = 0.0

    def _on_rollout_end(self) -> None:
        self.rollouts += 1

    def _on_step(self) -> bool:
        self.calls += 1
        self.reward_sum += float(np.sum(self.locals["rewards"]))
        return True


with tempfile.TemporaryDirectory() as d:
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=10)     # Monitor-wrapped, seeded
    stop = StopTrainingOnRewardThreshold(reward_threshold=500, verbose=0)
    eval_cb = EvalCallback(eval_env, callback_on_new_best=stop, n_eval_episodes=2, eval_freq=25,
                           best_model_save_path=d, log_path=d, deterministic=True)
    counting = CountingCallback()
    ckpt = CheckpointCallback(save_freq=50, save_path=d, name_prefix="a2c")
    model = A2C("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=3), n_steps=5, seed=3)
    model.learn(100, callback=CallbackList([counting, eval_cb, ckpt]))
    print("callback", counting.calls, counting.rollouts, f"{counting.reward_sum:.1f}")
    print("eval", eval_cb.evaluations_timesteps, f"{eval_cb.best_mean_reward:.2f}",
          [fmt(r) for r in eval_cb.evaluations_results])
    print("files", sorted(os.listdir(d)))
    best = A2C.load(os.path.join(d, "best_model"))
    print(f"best model {psum(best.policy):.5f}")

# VecNormalize: running statistics of observations and returns
set_random_seed(4)
venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=4), norm_obs=True,
                    norm_reward=True, clip_obs=10.0)
model = PPO("MlpPolicy", venv, n_steps=64, batch_size=32, n_epochs=2, seed=4)
model.learn(128)
print("vecnorm obs mean", fmt(venv.obs_rms.mean), "var", fmt(venv.obs_rms.var))
print("vecnorm ret var", fmt(venv.ret_rms.var), f"count {venv.obs_rms.count:.1f}")
print(f"ppo pendulum {psum(model.policy):.5f} log_std {fmt(model.policy.log_std.detach())}")
with tempfile.TemporaryDirectory() as d:
    venv.save(os.path.join(d, "vec_normalize.pkl"))
    eval_venv = VecNormalize.load(os.path.join(d, "vec_normalize.pkl"),
                                  make_vec_env("Pendulum-v1", n_envs=1, seed=5))
    eval_venv.training = False
    eval_venv.norm_reward = False
    print("loaded stats", fmt(eval_venv.obs_rms.mean))
    mean, std = evaluate_policy(model, eval_venv, n_eval_episodes=1, deterministic=True)
    print(f"vecnorm eval {mean:.3f}")

# gSDE: state-dependent exploration (SAC and PPO on Pendulum)
model = SAC("MlpPolicy", "Pendulum-v1", use_sde=True, sde_sample_freq=4, learning_starts=50,
            batch_size=32, buffer_size=500, policy_kwargs=dict(net_arch=[32, 32], log_std_init=-2),
            seed=5)
model.learn(75)
print(f"sac gsde {psum(model.actor):.5f} log_std {fmt(model.actor.log_std.detach().sum())}")
print(f"  ent_coef {float(model.logger.name_to_value['train/ent_coef']):.5f}")
model = PPO("MlpPolicy", "Pendulum-v1", use_sde=True, n_steps=64, batch_size=32, n_epochs=2,
            seed=6)
model.learn(128)
print(f"ppo gsde {psum(model.policy):.5f} std {float(model.logger.name_to_value['train/std']):.5f}")

# other action spaces
for env_cls in (IdentityEnvMultiDiscrete, IdentityEnvMultiBinary):
    env = DummyVecEnv([lambda: env_cls(dim=3, ep_length=20)])
    env.seed(7)
    model = PPO("MlpPolicy", env, n_steps=40, batch_size=20, n_epochs=2, seed=7)
    model.learn(80)
    obs = env.reset()
    print(env_cls.__name__, f"{psum(model.policy):.5f}",
          model.predict(obs, deterministic=True)[0].tolist(),
          f"{float(model.logger.name_to_value['train/entropy_loss']):.5f}")
