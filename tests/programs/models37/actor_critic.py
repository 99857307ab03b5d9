# pytorch/examples reinforcement_learning/actor_critic.py, written the way
# the repo has it: the SavedAction namedtuple, the Policy with a shared
# affine1 and the action_head / value_head (softmax probs and a state
# value), select_action's Categorical(probs) / m.sample() /
# SavedAction(m.log_prob(action), state_value), finish_episode's discounted
# returns normalized with eps = np.finfo(np.float32).eps.item(), advantage
# = R - value.item(), F.smooth_l1_loss(value, torch.tensor([R])),
# torch.stack(policy_losses).sum() + torch.stack(value_losses).sum(),
# running reward.  Changes for a CPU test: gym is replaced by a tiny
# deterministic numpy CartPole-like env (reset(seed=...), 5-tuple step)
# with a 20-step limit, 6 episodes, hidden size 32; then the policy's
# forward under torch.compile checked against eager.
import argparse
import numpy as np
from itertools import count
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

# Cart Pole

parser = argparse.ArgumentParser(description='PyTorch actor-critic example')
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


SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])


class Policy(nn.Module):
    """
    implements both actor and critic in one model
    """
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 32)

        # actor's layer
        self.action_head = nn.Linear(32, 2)

        # critic's layer
        self.value_head = nn.Linear(32, 1)

        # action & reward buffer
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        """
        forward of both actor and critic
        """
        x = F.relu(self.affine1(x))

        # actor: choses action to take from state s_t
        # by returning probability of each action
        action_prob = F.softmax(self.action_head(x), dim=-1)

        # critic: evaluates being in the state s_t
        state_values = self.value_head(x)

        # return values for both actor and critic as a tuple of 2 values:
        # 1. a list with the probability of each action over the action space
        # 2. the value from state s_t
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)

    # create a categorical distribution over the list of probabilities of actions
    m = Categorical(probs)

    # and sample an action using the distribution
    action = m.sample()

    # save to action buffer
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))

    # the action to take (left or right)
    return action.item()


def finish_episode():
    """
    Training code. Calculates actor and critic loss and performs backprop.
    """
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []  # list to save actor (policy) loss
    value_losses = []  # list to save critic (value) loss
    returns = []  # list to save the true values

    # calculate the true value using rewards returned from the environment
    for r in model.rewards[::-1]:
        # calculate the discounted value
        R = r + args.gamma * R
        returns.insert(0, R)

    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)

    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()

        # calculate actor (policy) loss
        policy_losses.append(-log_prob * advantage)

        # calculate critic (value) loss using L1 smooth loss
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))

    # reset gradients
    optimizer.zero_grad()

    # sum up all the values of policy_losses and value_losses
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()

    # perform backprop
    loss.backward()
    optimizer.step()

    # reset rewards and action buffer
    del model.rewards[:]
    del model.saved_actions[:]
    return loss.item()


def main():
    running_reward = 10

    # run infinitely many episodes
    for i_episode in range(1, args.episodes + 1):

        # reset environment and episode reward
        state, _ = env.reset()
        ep_reward = 0

        # for each episode, only run 9999 steps so that we don't
        # infinite loop while learning
        for t in range(1, 10000):

            # select action from policy
            action = select_action(state)

            # take the action
            state, reward, done, truncated, _ = env.step(action)

            if args.render:
                env.render()

            model.rewards.append(reward)
            ep_reward += reward
            if done or truncated:
                break

        # update cumulative reward
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward

        # perform backprop
        loss = finish_episode()

        # log results
        if i_episode % args.log_interval == 0:
            print('Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}\tloss {:.6f}'.format(
                  i_episode, ep_reward, running_reward, loss))

        # check if we have "solved" the cart pole problem
        if running_reward > env.reward_threshold:
            print("Solved! Running reward is now {} and "
                  "the last episode runs to {} time steps!".format(running_reward, t))
            break
    print('value_head weight {}'.format([round(v, 5) for v in model.value_head.weight[0, :4].tolist()]))


if __name__ == '__main__':
    main()
    states = torch.randn(5, 4)
    with torch.no_grad():
        probs, values = model(states)
        cprobs, cvalues = torch.compile(model)(states)
    print('probs', [round(v, 5) for v in probs[:, 0].tolist()])
    print('values', [round(v, 5) for v in values[:, 0].tolist()])
    print('compiled == eager:', torch.allclose(cprobs, probs, atol=1e-6) and
          torch.allclose(cvalues, values, atol=1e-5))
