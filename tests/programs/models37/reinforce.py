# pytorch/examples reinforcement_learning/reinforce.py, written the way the
# repo has it: argparse args, torch.manual_seed(args.seed), the Policy with
# affine1 / Dropout(p=0.6) / affine2 and saved_log_probs / rewards lists,
# select_action's torch.from_numpy(state).float().unsqueeze(0),
# Categorical(probs), m.sample(), m.log_prob(action), finish_episode's
# discounted returns, eps = np.finfo(np.float32).eps.item(), the
# (returns - returns.mean()) / (returns.std() + eps) normalization,
# torch.cat(policy_loss).sum(), del policy.rewards[:], and the running
# reward.  Changes for a CPU test: gym is replaced by a tiny deterministic
# numpy CartPole-like env (env.reset(seed=...) returning (state, info),
# env.step returning (state, reward, terminated, truncated, info)) with a
# 20-step limit, 6 episodes; then the policy's forward (eval mode) under
# torch.compile checked against eager.
import argparse
import numpy as np
from itertools import count

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical


parser = argparse.ArgumentParser(description='PyTorch REINFORCE example')
parser.add_argument('--gamma', type=float, default=0.99, metavar='G',
                    help='discount factor (default: 0.99)')
parser.add_argument('--seed', type=int, default=543, metavar='N',
                    help='random seed (default: 543)')
parser.add_argument('--render', action='store_true',
                    help='render the environment')
parser.add_argument('--log-interval', type=int, default=1, metavar='N',
                    help='interval between training status logs (default: 1)')
parser.add_argument('--episodes', type=int, default=6)
args = parser.parse_args([])


class TinyCartPole:
    """CartPole-v1's dynamics (Euler step), termination and reward, with a
    20-step limit; reset(seed=...) seeds the start state as gym does."""
    reward_threshold = 19.0

    def __init__(self, max_steps=20):
        self.max_steps = max_steps
        self.np_random = np.random.default_rng()
        self.state = None

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self.t = 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sintheta) / 1.1
        thetaacc = (9.8 * sintheta - costheta * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costheta ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        x = x + 0.02 * x_dot
        x_dot = x_dot + 0.02 * xacc
        theta = theta + 0.02 * theta_dot
        theta_dot = theta_dot + 0.02 * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self.t += 1
        terminated = bool(x < -2.4 or x > 2.4 or theta < -0.2095 or theta > 0.2095)
        truncated = self.t >= self.max_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}


env = TinyCartPole()
env.reset(seed=args.seed)
torch.manual_seed(args.seed)


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


def main():
    running_reward = 10
    for i_episode in range(1, args.episodes + 1):
        state, _ = env.reset()
        ep_reward = 0
        for t in range(1, 10000):  # Don't infinite loop while learning
            action = select_action(state)
            state, reward, done, _, _ = env.step(action)
            if args.render:
                env.render()
            policy.rewards.append(reward)
            ep_reward += reward
            if done or env.t >= env.max_steps:
                break

        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        loss = finish_episode()
        if i_episode % args.log_interval == 0:
            print('Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}\tloss {:.6f}'.format(
                  i_episode, ep_reward, running_reward, loss))
        if running_reward > env.reward_threshold:
            print("Solved! Running reward is now {} and "
                  "the last episode runs to {} time steps!".format(running_reward, t))
            break
    print('affine1 weight abs-sum {:.5f}, affine2 bias {}'.format(
        policy.affine1.weight.abs().sum().item(), [round(v, 5) for v in policy.affine2.bias.tolist()]))


if __name__ == '__main__':
    main()
    policy.eval()
    states = torch.randn(5, 4)
    with torch.no_grad():
        eager = policy(states)
        compiled = torch.compile(policy)(states)
    print('probs', [round(v, 5) for v in eager[:, 0].tolist()])
    print('compiled == eager:', torch.allclose(compiled, eager, atol=1e-6))
