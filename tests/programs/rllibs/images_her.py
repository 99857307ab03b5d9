"""SB3 on image and dict observations, and its other tools: CnnPolicy
(NatureCNN, with VecTransposeImage and VecFrameStack) on FakeImageEnv,
MultiInputPolicy (CombinedExtractor) on SimpleMultiObsEnv, DQN and SAC
with HerReplayBuffer on BitFlippingEnv, get_parameters / set_parameters,
a policy saved and loaded alone, and the docs' "export" of a policy as a
plain nn.Module traced by torch.jit."""
import os
import random
import tempfile

import numpy as np
import torch as th

from stable_baselines3 import DQN, PPO, SAC, A2C, HerReplayBuffer
from stable_baselines3.common.envs import BitFlippingEnv, FakeImageEnv, SimpleMultiObsEnv
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


random.seed(0)
th.manual_seed(0)
set_random_seed(0)


def image_env():
    env = FakeImageEnv(action_dim=3, screen_height=36, screen_width=36, n_channels=1)
    env.observation_space.seed(0)
    return env


# CnnPolicy: SB3 transposes HWC images (VecTransposeImage) and scales them
venv = VecFrameStack(DummyVecEnv([image_env]), n_stack=2)
model = PPO("CnnPolicy", venv, n_steps=16, batch_size=8, n_epochs=1, seed=0,
            policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=32)))
print(type(model.get_env()).__name__, model.observation_space.shape)
print(model.policy.features_extractor)
model.learn(32)
print(f"cnn ppo {psum(model.policy):.5f}")
for k in ("train/value_loss", "train/entropy_loss", "train/approx_kl"):
    print(" ", k, f"{float(model.logger.name_to_value[k]):.6f}")
obs = model.get_env().reset()
print("cnn obs", obs.shape, obs.dtype, int(obs.sum()))
action, _ = model.predict(obs, deterministic=True)
with th.no_grad():
    dist = model.policy.get_distribution(model.policy.obs_to_tensor(obs)[0])
print("cnn predict", action.tolist(), fmt(dist.distribution.probs))

model = DQN("CnnPolicy", image_env(), buffer_size=200, learning_starts=20, batch_size=8,
            train_freq=4, target_update_interval=20, seed=1,
            policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=16)))
model.learn(40)
print(f"cnn dqn {psum(model.q_net):.5f} loss {float(model.logger.name_to_value['train/loss']):.6f}")

# dict observations: CombinedExtractor (a CNN for the image, flatten for the vector)
np.random.seed(2)
env = SimpleMultiObsEnv(random_start=False)
model = A2C("MultiInputPolicy", env, n_steps=8, seed=2,
            policy_kwargs=dict(features_extractor_kwargs=dict(cnn_output_dim=16)))
print(model.policy.features_extractor)
model.learn(48)
print(f"multi input {psum(model.policy):.5f}")
obs, _ = env.reset()
print("multi input predict", int(model.predict(obs, deterministic=True)[0]))
with th.no_grad():
    value = model.policy.predict_values(model.policy.obs_to_tensor(obs)[0])
print("multi input value", fmt(value))

# HER: goal relabelling on BitFlippingEnv
env = BitFlippingEnv(n_bits=6, continuous=False, max_steps=6)
model = DQN("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
            learning_starts=30, buffer_size=300, batch_size=16, seed=3,
            policy_kwargs=dict(net_arch=[32]))
model.learn(120)
rb = model.replay_buffer
print(f"her dqn {psum(model.q_net):.5f} loss {float(model.logger.name_to_value['train/loss']):.6f}")
print("her buffer", rb.size(), rb.n_episodes_stored if hasattr(rb, "n_episodes_stored") else "",
      rb.ep_length[:6, 0].tolist())
sample = rb.sample(8)
print("her sample", {k: tuple(v.shape) for k, v in sample.observations.items()}, fmt(sample.rewards))

env = BitFlippingEnv(n_bits=4, continuous=True, max_steps=4)
model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs=dict(goal_selection_strategy="final"), learning_starts=20,
            buffer_size=200, batch_size=16, seed=4, policy_kwargs=dict(net_arch=[32]))
model.learn(60)
print(f"her sac {psum(model.actor):.5f} {psum(model.critic):.5f}")
obs, _ = env.reset(seed=5)
print("her sac predict", fmt(model.predict(obs, deterministic=True)[0]))

# parameters as dicts of tensors, the policy alone, a traced export
params = model.get_parameters()
print("get_parameters", sorted(params), sorted(params["policy"])[:3])
params["policy"] = {k: v * 0.5 for k, v in params["policy"].items()}
model.set_parameters(params, exact_match=True)
print(f"set_parameters {psum(model.actor):.5f}")

set_random_seed(6)
model = PPO("MlpPolicy", "Pendulum-v1", n_steps=32, batch_size=16, n_epochs=1, seed=6)
model.learn(32)
with tempfile.TemporaryDirectory() as d:
    model.policy.save(os.path.join(d, "policy.pth"))
    policy = ActorCriticPolicy.load(os.path.join(d, "policy.pth"))
    print(f"policy loaded {psum(policy):.5f}")


class OnnxableSB3Policy(th.nn.Module):
    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, observation):
        return self.policy(observation, deterministic=True)


obs = th.tensor([[0.5, -0.5, 0.25], [1.0, 0.0, -1.0]])
exported = th.jit.trace(OnnxableSB3Policy(model.policy), obs)
actions, values, log_prob = exported(obs)
try:
    fmt(values)     # NumPy refuses an output that requires grad, as numpy() does
except RuntimeError as e:
    print("RuntimeError:", e)
with th.no_grad():
    actions, values, log_prob = exported(obs)
print("traced", fmt(actions), fmt(values), fmt(log_prob))
print("predict", fmt(model.predict(obs.numpy(), deterministic=True)[0]))
