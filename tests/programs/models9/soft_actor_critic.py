# pranz24/pytorch-soft-actor-critic: model.py (weights_init_, QNetwork's twin critics,
# GaussianPolicy with rsample, tanh squashing, the log-prob correction and the action
# rescaling), utils.py (soft_update / hard_update through param.data.copy_), replay_memory.py
# (ReplayMemory) and sac.py's SAC (update_parameters with alpha auto-tuning through
# log_alpha), driven as main.py drives it.  Changes for a CPU test: a tiny deterministic
# "reach the target" environment instead of gym, a small configuration (hidden 16,
# batch 16, 120 steps, updates from step 40), the weights from numpy, and the policy's
# Normal draws taken from numpy (Normal.rsample draws from a numpy generator; torch's and
# tracec's random streams differ).  Then the update under torch.compile against the same
# update run eagerly (with torch's own random draws, reseeded: the compiled update must
# draw the same numbers).
import copy
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal
from torch.optim import Adam

LOG_SIG_MAX = 2
LOG_SIG_MIN = -20
epsilon = 1e-6


# ---- model.py ----
# Initialize Policy weights
def weights_init_(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight, gain=1)
        torch.nn.init.constant_(m.bias, 0)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super(QNetwork, self).__init__()

        # Q1 architecture
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)

        # Q2 architecture
        self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear5 = nn.Linear(hidden_dim, hidden_dim)
        self.linear6 = nn.Linear(hidden_dim, 1)

        self.apply(weights_init_)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)

        x1 = F.relu(self.linear1(xu))
        x1 = F.relu(self.linear2(x1))
        x1 = self.linear3(x1)

        x2 = F.relu(self.linear4(xu))
        x2 = F.relu(self.linear5(x2))
        x2 = self.linear6(x2)

        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, action_space=None):
        super(GaussianPolicy, self).__init__()

        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)

        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)

        self.apply(weights_init_)

        # action rescaling
        if action_space is None:
            self.action_scale = torch.tensor(1.)
            self.action_bias = torch.tensor(0.)
        else:
            self.action_scale = torch.FloatTensor(
                (action_space.high - action_space.low) / 2.)
            self.action_bias = torch.FloatTensor(
                (action_space.high + action_space.low) / 2.)

    def forward(self, state):
        x = F.relu(self.linear1(state))
        x = F.relu(self.linear2(x))
        mean = self.mean_linear(x)
        log_std = self.log_std_linear(x)
        log_std = torch.clamp(log_std, min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample()  # for reparameterization trick (mean + std * N(0,1))
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        # Enforcing Action Bound
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        self.action_bias = self.action_bias.to(device)
        return super(GaussianPolicy, self).to(device)


# ---- utils.py ----
def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(param.data)


# ---- replay_memory.py ----
class ReplayMemory:
    def __init__(self, capacity, seed):
        random.seed(seed)
        self.capacity = capacity
        self.buffer = []
        self.position = 0

    def push(self, state, action, reward, next_state, done):
        if len(self.buffer) < self.capacity:
            self.buffer.append(None)
        self.buffer[self.position] = (state, action, reward, next_state, done)
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)
        state, action, reward, next_state, done = map(np.stack, zip(*batch))
        return state, action, reward, next_state, done

    def __len__(self):
        return len(self.buffer)


# ---- sac.py ----
class SAC(object):
    def __init__(self, num_inputs, action_space, args):

        self.gamma = args.gamma
        self.tau = args.tau
        self.alpha = args.alpha

        self.policy_type = args.policy
        self.target_update_interval = args.target_update_interval
        self.automatic_entropy_tuning = args.automatic_entropy_tuning

        self.device = torch.device("cuda" if args.cuda else "cpu")

        self.critic = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(device=self.device)
        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)

        self.critic_target = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(self.device)
        hard_update(self.critic_target, self.critic)

        if self.policy_type == "Gaussian":
            # Target Entropy = −dim(A) (e.g. , -6 for HalfCheetah-v2) as given in the paper
            if self.automatic_entropy_tuning is True:
                self.target_entropy = -torch.prod(torch.Tensor(action_space.shape).to(self.device)).item()
                self.log_alpha = torch.zeros(1, requires_grad=True, device=self.device)
                self.alpha_optim = Adam([self.log_alpha], lr=args.lr)

            self.policy = GaussianPolicy(num_inputs, action_space.shape[0], args.hidden_size, action_space).to(self.device)
            self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)

    def select_action(self, state, evaluate=False):
        state = torch.FloatTensor(state).to(self.device).unsqueeze(0)
        if evaluate is False:
            action, _, _ = self.policy.sample(state)
        else:
            _, _, action = self.policy.sample(state)
        return action.detach().cpu().numpy()[0]

    def update_parameters(self, memory, batch_size, updates):
        # Sample a batch from memory
        state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory.sample(batch_size=batch_size)

        state_batch = torch.FloatTensor(state_batch).to(self.device)
        next_state_batch = torch.FloatTensor(next_state_batch).to(self.device)
        action_batch = torch.FloatTensor(action_batch).to(self.device)
        reward_batch = torch.FloatTensor(reward_batch).to(self.device).unsqueeze(1)
        mask_batch = torch.FloatTensor(mask_batch).to(self.device).unsqueeze(1)

        with torch.no_grad():
            next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)
            qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * next_state_log_pi
            next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)
        qf1, qf2 = self.critic(state_batch, action_batch)  # Two Q-functions to mitigate positive bias in the policy improvement step
        qf1_loss = F.mse_loss(qf1, next_q_value)  # JQ = 𝔼(st,at)~D[0.5(Q1(st,at) - r(st,at) - γ(𝔼st+1~p[V(st+1)]))^2]
        qf2_loss = F.mse_loss(qf2, next_q_value)  # JQ = 𝔼(st,at)~D[0.5(Q1(st,at) - r(st,at) - γ(𝔼st+1~p[V(st+1)]))^2]
        qf_loss = qf1_loss + qf2_loss

        self.critic_optim.zero_grad()
        qf_loss.backward()
        self.critic_optim.step()

        pi, log_pi, _ = self.policy.sample(state_batch)

        qf1_pi, qf2_pi = self.critic(state_batch, pi)
        min_qf_pi = torch.min(qf1_pi, qf2_pi)

        policy_loss = ((self.alpha * log_pi) - min_qf_pi).mean() # Jπ = 𝔼st∼D,εt∼N[α * logπ(f(εt;st)|st) − Q(st,f(εt;st))]

        self.policy_optim.zero_grad()
        policy_loss.backward()
        self.policy_optim.step()

        if self.automatic_entropy_tuning:
            alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()

            self.alpha_optim.zero_grad()
            alpha_loss.backward()
            self.alpha_optim.step()

            self.alpha = self.log_alpha.exp()
            alpha_tlogs = self.alpha.clone() # For TensorboardX logs
        else:
            alpha_loss = torch.tensor(0.).to(self.device)
            alpha_tlogs = torch.tensor(self.alpha) # For TensorboardX logs


        if updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)

        return qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item(), alpha_tlogs.item()


# ---- a tiny deterministic environment (instead of gym) ----
class Box:
    def __init__(self, low, high, shape):
        self.low, self.high, self.shape = np.full(shape, low, np.float32), np.full(shape, high, np.float32), shape


class ReachEnv:
    """A point in the plane pushed by the action toward a fixed target."""
    _max_episode_steps = 20

    def __init__(self):
        self.observation_space = Box(-5.0, 5.0, (4,))
        self.action_space = Box(-2.0, 2.0, (2,))
        self.target = np.array([1.0, -0.5])

    def reset(self):
        self.pos = np.array([-1.0, 1.0])
        self.t = 0
        return self._obs()

    def _obs(self):
        return np.concatenate([self.pos, self.target - self.pos]).astype(np.float32)

    def step(self, action):
        self.pos = np.clip(self.pos + 0.1 * np.asarray(action, np.float64), -5, 5)
        self.t += 1
        dist = float(np.linalg.norm(self.target - self.pos))
        done = dist < 0.1
        return self._obs(), -dist, done, {}


class Args:
    gamma = 0.99
    tau = 0.005
    lr = 0.0003
    alpha = 0.2
    policy = "Gaussian"
    target_update_interval = 1
    automatic_entropy_tuning = True
    cuda = False
    hidden_size = 16
    batch_size = 16
    start_steps = 40
    num_steps = 80
    updates_per_step = 1
    replay_size = 1000
    seed = 123456


args = Args()

# the policy's N(0, 1) draws, from numpy (torch's and tracec's random streams differ)
_noise = np.random.default_rng(3)
_torch_rsample = Normal.rsample


def numpy_rsample(self, sample_shape=torch.Size()):
    shape = self._extended_shape(sample_shape)
    eps = torch.from_numpy(_noise.standard_normal(tuple(shape)).astype(np.float32))
    return self.loc + eps * self.scale


Normal.rsample = numpy_rsample

# ---- main.py ----
env = ReachEnv()
torch.manual_seed(args.seed)
np.random.seed(args.seed)

agent = SAC(env.observation_space.shape[0], env.action_space, args)
r = np.random.default_rng(0)
with torch.no_grad():
    for net in (agent.critic, agent.policy):
        for name, p in net.named_parameters():
            p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / math.sqrt(p.shape[-1])).astype(np.float32)))
hard_update(agent.critic_target, agent.critic)
print("action_scale", agent.policy.action_scale, "action_bias", agent.policy.action_bias,
      "target_entropy", agent.target_entropy)

memory = ReplayMemory(args.replay_size, args.seed)
act_rng = np.random.default_rng(5)   # env.action_space.sample()

total_numsteps = 0
updates = 0
for i_episode in range(1, 100):
    episode_reward = 0
    episode_steps = 0
    done = False
    state = env.reset()

    while not done:
        if args.start_steps > total_numsteps:
            action = act_rng.uniform(-2.0, 2.0, 2).astype(np.float32)  # Sample random action
        else:
            action = agent.select_action(state)  # Sample action from policy

        if len(memory) > args.batch_size:
            # Number of updates per step in environment
            for i in range(args.updates_per_step):
                # Update parameters of all the networks
                critic_1_loss, critic_2_loss, policy_loss, ent_loss, alpha = agent.update_parameters(memory, args.batch_size, updates)
                updates += 1
                if updates % 20 == 0:
                    print("update {}: critic_1 {:.5f} critic_2 {:.5f} policy {:.5f} entropy {:.5f} alpha {:.5f}".format(
                        updates, critic_1_loss, critic_2_loss, policy_loss, ent_loss, alpha))

        next_state, reward, done, _ = env.step(action) # Step
        episode_steps += 1
        total_numsteps += 1
        episode_reward += reward

        # Ignore the "done" signal if it comes from hitting the time horizon.
        # (https://github.com/openai/spinningup/blob/master/spinup/algos/sac/sac.py)
        mask = 1 if episode_steps == env._max_episode_steps else float(not done)

        memory.push(state, action, reward, next_state, mask) # Append transition to memory

        state = next_state
        if episode_steps == env._max_episode_steps:
            done = True

    if total_numsteps > args.num_steps:
        break

    print("Episode: {}, total numsteps: {}, episode steps: {}, reward: {}".format(i_episode, total_numsteps, episode_steps, round(episode_reward, 2)))

state = env.reset()
episode_reward = 0
for _ in range(env._max_episode_steps):
    action = agent.select_action(state, evaluate=True)
    state, reward, done, _ = env.step(action)
    episode_reward += reward
    if done:
        break
print("Test Episodes: 1, Avg. Reward: {}".format(round(episode_reward, 2)))

# the update under torch.compile against the same update run eagerly, with the
# framework's own Normal draws (the same seed before each: the draws must agree)
Normal.rsample = _torch_rsample
state_batch, action_batch, reward_batch, next_state_batch, mask_batch = (
    torch.FloatTensor(a) for a in memory.sample(batch_size=args.batch_size))
reward_batch, mask_batch = reward_batch.unsqueeze(1), mask_batch.unsqueeze(1)
alpha0 = agent.alpha.detach()


def update_step(state_batch, action_batch, reward_batch, next_state_batch, mask_batch):
    with torch.no_grad():
        next_state_action, next_state_log_pi, _ = agent.policy.sample(next_state_batch)
        qf1_next_target, qf2_next_target = agent.critic_target(next_state_batch, next_state_action)
        min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - alpha0 * next_state_log_pi
        next_q_value = reward_batch + mask_batch * agent.gamma * (min_qf_next_target)
    qf1, qf2 = agent.critic(state_batch, action_batch)
    qf_loss = F.mse_loss(qf1, next_q_value) + F.mse_loss(qf2, next_q_value)
    agent.critic_optim.zero_grad()
    qf_loss.backward()
    agent.critic_optim.step()
    pi, log_pi, _ = agent.policy.sample(state_batch)
    qf1_pi, qf2_pi = agent.critic(state_batch, pi)
    policy_loss = ((alpha0 * log_pi) - torch.min(qf1_pi, qf2_pi)).mean()
    agent.policy_optim.zero_grad()
    policy_loss.backward()
    agent.policy_optim.step()
    alpha_loss = -(agent.log_alpha * (log_pi + agent.target_entropy).detach()).mean()
    agent.alpha_optim.zero_grad()
    alpha_loss.backward()
    agent.alpha_optim.step()
    soft_update(agent.critic_target, agent.critic, agent.tau)
    return qf_loss, policy_loss, alpha_loss


nets = (agent.critic, agent.critic_target, agent.policy)
opts = (agent.critic_optim, agent.policy_optim, agent.alpha_optim)
state = copy.deepcopy(([n.state_dict() for n in nets], [o.state_dict() for o in opts],
                       agent.log_alpha.detach().clone()))
batch = (state_batch, action_batch, reward_batch, next_state_batch, mask_batch)
torch.manual_seed(7)
eager = [[v.item() for v in update_step(*batch)] for _ in range(3)]
after = copy.deepcopy([n.state_dict() for n in nets]) + [agent.log_alpha.detach().clone()]
for n, s in zip(nets, state[0]):
    n.load_state_dict(s)
for o, s in zip(opts, state[1]):
    o.load_state_dict(s)
with torch.no_grad():
    agent.log_alpha.copy_(state[2])
torch.manual_seed(7)
cstep = torch.compile(update_step)
compiled = [[v.item() for v in cstep(*batch)] for _ in range(3)]
print("[rng] compiled losses", [[f"{v:.5f}" for v in c] for c in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for c, e in zip(compiled, eager) for a, b in zip(c, e)),
      all(torch.allclose(n.state_dict()[k], a[k], rtol=1e-4, atol=1e-5) for n, a in zip(nets, after) for k in a),
      torch.allclose(agent.log_alpha, after[-1], rtol=1e-4, atol=1e-6))
