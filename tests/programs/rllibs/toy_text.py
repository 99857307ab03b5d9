"""SB3 on Gymnasium's discrete-observation toy-text envs and wrapper
stacks: PPO on FrozenLake-v1 (one-hot observations), DQN on Taxi-v4,
A2C on CliffWalking-v1 over a SubprocVecEnv (fork), Gymnasium wrappers
(RecordEpisodeStatistics, TimeAwareObservation, NormalizeObservation,
TransformReward, FrameStackObservation, FlattenObservation) around
CartPole under PPO, and SB3's preprocess_obs on each observation space."""
import random

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium import spaces
from gymnasium.wrappers import (FlattenObservation, FrameStackObservation, NormalizeObservation,
                                RecordEpisodeStatistics, TimeAwareObservation, TransformReward)

from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.vec_env import SubprocVecEnv


def psum(module):
    return sum(p.detach().double().sum().item() for p in module.parameters())


def fmt(a):
    return [f"{x:.5f}" for x in np.asarray(a, dtype=np.float64).ravel().tolist()]


if __name__ == "__main__":
    random.seed(0)
    th.manual_seed(0)

    # preprocess_obs: one-hot for Discrete / MultiDiscrete, floats for MultiBinary, /255 for images
    for space, obs in ((spaces.Discrete(4), [2, 0]), (spaces.MultiDiscrete([2, 3]), [[1, 2], [0, 0]]),
                       (spaces.MultiBinary(3), [[1, 0, 1]]),
                       (spaces.Box(0, 255, (1, 2, 2), np.uint8), [[[[0, 51], [102, 255]]]])):
        out = preprocess_obs(th.as_tensor(np.array(obs)), space)
        print(type(space).__name__, tuple(out.shape), out.dtype, fmt(out))

    env = gym.make("FrozenLake-v1", map_name="4x4", is_slippery=True)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=1,
                policy_kwargs=dict(net_arch=[16]))
    model.learn(128)
    print(f"frozenlake {psum(model.policy):.5f}")
    with th.no_grad():
        probs = model.policy.get_distribution(model.policy.obs_to_tensor(np.arange(4))[0])
    print("frozenlake probs", fmt(probs.distribution.probs[0]),
          model.predict(np.arange(16), deterministic=True)[0].tolist())

    model = DQN("MlpPolicy", "Taxi-v4", learning_starts=50, buffer_size=500, batch_size=16,
                train_freq=2, target_update_interval=40, seed=2, policy_kwargs=dict(net_arch=[32]))
    model.learn(150)
    print(f"taxi {psum(model.q_net):.5f} loss {float(model.logger.name_to_value['train/loss']):.5f}")
    print("taxi actions", model.predict(np.array([0, 17, 123, 499]), deterministic=True)[0].tolist())

    venv = make_vec_env("CliffWalking-v1", n_envs=2, seed=3, vec_env_cls=SubprocVecEnv,
                        vec_env_kwargs=dict(start_method="fork"))
    model = A2C("MlpPolicy", venv, n_steps=8, seed=3, policy_kwargs=dict(net_arch=[16]))
    model.learn(96)
    print(f"cliff {psum(model.policy):.5f}",
          f"{float(model.logger.name_to_value['train/value_loss']):.4f}")
    obs = venv.reset()
    print("cliff obs", obs.tolist(), model.predict(obs, deterministic=True)[0].tolist())
    venv.close()

    def wrapped():
        env = gym.make("CartPole-v1")
        env = RecordEpisodeStatistics(env)
        env = TimeAwareObservation(env)
        env = NormalizeObservation(env)
        env = TransformReward(env, lambda r: 0.1 * r)
        env = FrameStackObservation(env, stack_size=2)
        return FlattenObservation(env)

    venv = make_vec_env(wrapped, n_envs=2, seed=4)
    print("wrapped obs space", venv.observation_space.shape)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=2, seed=4)
    model.learn(128)
    print(f"wrapped {psum(model.policy):.5f}",
          f"{float(model.logger.name_to_value['train/value_loss']):.5f}")
    rms = venv.envs[0].get_wrapper_attr("obs_rms")
    print("normalize", fmt(rms.mean), f"{rms.count:.0f}")
    print("episodes", [(round(float(e["r"]), 2), int(e["l"])) for e in model.ep_info_buffer][:6])
