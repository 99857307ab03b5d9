# pytorch/examples reinforcement_learning/actor_critic.py, with a tiny
# CartPole-like environment instead of gym (same interface).
import argparse
import numpy as np
from itertools import count
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser(description='PyTorch actor-critic example')
parser.add_argument('--gamma', type=float, default=0.99, metavar='G')
parser.add_argument('--seed', type=int, default=543, metavar='N')
parser.add_argument('--render', action='store_true')
parser.add_argument('--log-interval', type=int, default=2, metavar='N')
parser.add_argument('--episodes', type=int, default=6)
args = parser.parse_args()


class CartPole:
    """x, x_dot, theta, theta_dot; falls when |theta| > 0.21 or |x| > 2.4."""
    def __init__(self):
        self.rng = np.random.RandomState(0)
        self.spec = namedtuple('Spec', 'reward_threshold')(195.0)
    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.RandomState(seed)
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        return self.s.astype(np.float32), {}
    def step(self, action):
        x, x_dot, th, th_dot = self.s
        force = 10.0 if action == 1 else -10.0
        th_acc = (9.8 * np.sin(th) - np.cos(th) * force / 1.1 * 0.1) / (0.5 * (4 / 3 - 0.1 * np.cos(th) ** 2 / 1.1))
        x_acc = (force + 0.05 * th_dot ** 2 * np.sin(th)) / 1.1
        self.s = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot, th_dot + 0.02 * th_acc])
        done = abs(self.s[2]) > 0.21 or abs(self.s[0]) > 2.4
        return self.s.astype(np.float32), 1.0, done, False, {}

env = CartPole()
env.reset(seed=args.seed)
torch.manual_seed(args.seed)

SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])


class Policy(nn.Module):
    """
    implements both actor and critic in one model
    """
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        # actor's layer
        self.action_head = nn.Linear(128, 2)
        # critic's layer
        self.value_head = nn.Linear(128, 1)
        # action & reward buffer
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    R = 0
    saved_actions = model.saved_actions
    policy_losses = [] # list to save actor (policy) loss
    value_losses = [] # list to save critic (value) loss
    returns = [] # list to save the true values
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]


def main():
    running_reward = 10
    for i_episode in range(1, args.episodes + 1):
        state, _ = env.reset()
        ep_reward = 0
        for t in range(1, 10000):
            action = select_action(state)
            state, reward, done, _, _ = env.step(action)
            if args.render:
                env.render()
            model.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode()
        if i_episode % args.log_interval == 0:
            print('Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}'.format(
                  i_episode, ep_reward, running_reward))
        if running_reward > env.spec.reward_threshold:
            print("Solved! Running reward is now {} and "
                  "the last episode runs to {} time steps!".format(running_reward, t))
            break


if __name__ == '__main__':
    main()
