# Kaixhin/Rainbow the way its model.py, agent.py and memory.py write it:
# the factorised-Gaussian NoisyLinear (weight_mu / weight_sigma
# Parameters, weight_epsilon / bias_epsilon buffers registered from
# torch.empty, reset_parameters through .data.uniform_ / .data.fill_,
# _scale_noise as x.sign().mul_(x.abs().sqrt_()), epsilon_out.ger(epsilon_in)
# copied into the buffer, F.linear switching on self.training), the
# dueling distributional DQN (q = v + a - a.mean(1, keepdim=True), log_softmax
# over atoms when log=True, reset_noise over named_children with 'fc' in the
# name); the Agent (support from torch.linspace, act by
# (net(s.unsqueeze(0)) * support).sum(2).argmax(1).item(), learn with
# double-Q action selection, the C51 projection: Tz.clamp(min=Vmin,
# max=Vmax), b = (Tz - Vmin) / delta_z, l, u = floor / ceil .to(torch.int64),
# l[(u > 0) * (l == u)] -= 1, u[(l < atoms - 1) * (l == u)] += 1, offset
# from torch.linspace(...).unsqueeze(1).expand(...).to(actions), two
# m.view(-1).index_add_ calls, the importance-weighted cross entropy,
# clip_grad_norm_, Adam(eps=adam_eps)), the target net synced by
# load_state_dict with its parameters frozen, train() / eval() switching;
# memory.py's numpy sum tree over a structured-dtype transition array, the
# blank-transition masks, n-step returns by torch.matmul(rewards,
# n_step_scaling), importance weights (capacity * probs) ** -beta and
# update_priorities from loss.detach().cpu().numpy().
# Changes for a CPU test: a tiny numpy environment with 12 x 12 frames
# instead of Atari (84 x 84), a smaller 'data-efficient' conv stack and
# hidden size, the noise of _scale_noise drawn from numpy (torch.randn in
# the original) so both runs see the same noise, a few learning steps; then
# one training step under torch.compile against the same step eagerly.
from __future__ import division
import argparse
import copy
import math

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.utils import clip_grad_norm_

NOISE = np.random.RandomState(123)   # torch.randn in the original


# model.py -------------------------------------------------------------------

# Factorised NoisyLinear layer with bias
class NoisyLinear(nn.Module):
  def __init__(self, in_features, out_features, std_init=0.5):
    super(NoisyLinear, self).__init__()
    self.in_features = in_features
    self.out_features = out_features
    self.std_init = std_init
    self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
    self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
    self.register_buffer('weight_epsilon', torch.empty(out_features, in_features))
    self.bias_mu = nn.Parameter(torch.empty(out_features))
    self.bias_sigma = nn.Parameter(torch.empty(out_features))
    self.register_buffer('bias_epsilon', torch.empty(out_features))
    self.reset_parameters()
    self.reset_noise()

  def reset_parameters(self):
    mu_range = 1 / math.sqrt(self.in_features)
    self.weight_mu.data.uniform_(-mu_range, mu_range)
    self.weight_sigma.data.fill_(self.std_init / math.sqrt(self.in_features))
    self.bias_mu.data.uniform_(-mu_range, mu_range)
    self.bias_sigma.data.fill_(self.std_init / math.sqrt(self.out_features))

  def _scale_noise(self, size):
    x = torch.from_numpy(NOISE.standard_normal(size).astype(np.float32)).to(device=self.weight_mu.device)
    return x.sign().mul_(x.abs().sqrt_())

  def reset_noise(self):
    epsilon_in = self._scale_noise(self.in_features)
    epsilon_out = self._scale_noise(self.out_features)
    self.weight_epsilon.copy_(epsilon_out.ger(epsilon_in))
    self.bias_epsilon.copy_(epsilon_out)

  def forward(self, input):
    if self.training:
      return F.linear(input, self.weight_mu + self.weight_sigma * self.weight_epsilon, self.bias_mu + self.bias_sigma * self.bias_epsilon)
    else:
      return F.linear(input, self.weight_mu, self.bias_mu)


class DQN(nn.Module):
  def __init__(self, args, action_space):
    super(DQN, self).__init__()
    self.atoms = args.atoms
    self.action_space = action_space

    if args.architecture == 'canonical':
      self.convs = nn.Sequential(nn.Conv2d(args.history_length, 32, 8, stride=4, padding=0), nn.ReLU(),
                                 nn.Conv2d(32, 64, 4, stride=2, padding=0), nn.ReLU(),
                                 nn.Conv2d(64, 64, 3, stride=1, padding=0), nn.ReLU())
      self.conv_output_size = 3136
    elif args.architecture == 'data-efficient':
      self.convs = nn.Sequential(nn.Conv2d(args.history_length, 8, 3, stride=3, padding=0), nn.ReLU(),
                                 nn.Conv2d(8, 8, 2, stride=2, padding=0), nn.ReLU())
      self.conv_output_size = 32
    self.fc_h_v = NoisyLinear(self.conv_output_size, args.hidden_size, std_init=args.noisy_std)
    self.fc_h_a = NoisyLinear(self.conv_output_size, args.hidden_size, std_init=args.noisy_std)
    self.fc_z_v = NoisyLinear(args.hidden_size, self.atoms, std_init=args.noisy_std)
    self.fc_z_a = NoisyLinear(args.hidden_size, action_space * self.atoms, std_init=args.noisy_std)

  def forward(self, x, log=False):
    x = self.convs(x)
    x = x.view(-1, self.conv_output_size)
    v = self.fc_z_v(F.relu(self.fc_h_v(x)))  # Value stream
    a = self.fc_z_a(F.relu(self.fc_h_a(x)))  # Advantage stream
    v, a = v.view(-1, 1, self.atoms), a.view(-1, self.action_space, self.atoms)
    q = v + a - a.mean(1, keepdim=True)  # Combine streams
    if log:  # Use log softmax for numerical stability
      q = F.log_softmax(q, dim=2)  # Log probabilities with action over second dimension
    else:
      q = F.softmax(q, dim=2)  # Probabilities with action over second dimension
    return q

  def reset_noise(self):
    for name, module in self.named_children():
      if 'fc' in name:
        module.reset_noise()


# agent.py -------------------------------------------------------------------

class Agent():
  def __init__(self, args, env):
    self.action_space = env.action_space()
    self.atoms = args.atoms
    self.Vmin = args.V_min
    self.Vmax = args.V_max
    self.support = torch.linspace(args.V_min, args.V_max, self.atoms).to(device=args.device)  # Support (range) of z
    self.delta_z = (args.V_max - args.V_min) / (self.atoms - 1)
    self.batch_size = args.batch_size
    self.n = args.multi_step
    self.discount = args.discount
    self.norm_clip = args.norm_clip

    self.online_net = DQN(args, self.action_space).to(device=args.device)
    self.online_net.train()

    self.target_net = DQN(args, self.action_space).to(device=args.device)
    self.update_target_net()
    self.target_net.train()
    for param in self.target_net.parameters():
      param.requires_grad = False

    self.optimiser = optim.Adam(self.online_net.parameters(), lr=args.learning_rate, eps=args.adam_eps)

  # Resets noisy weights in all linear layers (of online net only)
  def reset_noise(self):
    self.online_net.reset_noise()

  # Acts based on single state (no batch)
  def act(self, state):
    with torch.no_grad():
      return (self.online_net(state.unsqueeze(0)) * self.support).sum(2).argmax(1).item()

  # Acts with an ε-greedy policy (used for evaluation only)
  def act_e_greedy(self, state, epsilon=0.001):  # High ε can reduce evaluation scores drastically
    return np.random.randint(0, self.action_space) if np.random.random() < epsilon else self.act(state)

  def learn(self, mem):
    # Sample transitions
    idxs, states, actions, returns, next_states, nonterminals, weights = mem.sample(self.batch_size)
    loss = self.learn_on(states, actions, returns, next_states, nonterminals, weights)
    mem.update_priorities(idxs, loss.detach().cpu().numpy())  # Update priorities of sampled transitions
    return loss

  def learn_on(self, states, actions, returns, next_states, nonterminals, weights):
    # Calculate current state probabilities (online network noise already sampled)
    log_ps = self.online_net(states, log=True)  # Log probabilities log p(s_t, ·; θonline)
    log_ps_a = log_ps[range(self.batch_size), actions]  # log p(s_t, a_t; θonline)

    with torch.no_grad():
      # Calculate nth next state probabilities
      pns = self.online_net(next_states)  # Probabilities p(s_t+n, ·; θonline)
      dns = self.support.expand_as(pns) * pns  # Distribution d_t+n = (z, p(s_t+n, ·; θonline))
      argmax_indices_ns = dns.sum(2).argmax(1)  # Perform argmax action selection using online network: argmax_a[(z, p(s_t+n, a; θonline))]
      pns = self.target_net(next_states)  # Probabilities p(s_t+n, ·; θtarget)
      pns_a = pns[range(self.batch_size), argmax_indices_ns]  # Double-Q probabilities p(s_t+n, argmax_a[(z, p(s_t+n, a; θonline))]; θtarget)

      # Compute Tz (Bellman operator T applied to z)
      Tz = returns.unsqueeze(1) + nonterminals * (self.discount ** self.n) * self.support.unsqueeze(0)  # Tz = R^n + (γ^n)z (accounting for terminal states)
      Tz = Tz.clamp(min=self.Vmin, max=self.Vmax)  # Clamp between supported values
      # Compute L2 projection of Tz onto fixed support z
      b = (Tz - self.Vmin) / self.delta_z  # b = (Tz - Vmin) / Δz
      l, u = b.floor().to(torch.int64), b.ceil().to(torch.int64)
      # Fix disappearing probability mass when l = b = u (b is int)
      l[(u > 0) * (l == u)] -= 1
      u[(l < (self.atoms - 1)) * (l == u)] += 1

      # Distribute probability of Tz
      m = states.new_zeros(self.batch_size, self.atoms)
      offset = torch.linspace(0, ((self.batch_size - 1) * self.atoms), self.batch_size).unsqueeze(1).expand(self.batch_size, self.atoms).to(actions)
      m.view(-1).index_add_(0, (l + offset).view(-1), (pns_a * (u.float() - b)).view(-1))  # m_l = m_l + p(s_t+n, a*)(u - b)
      m.view(-1).index_add_(0, (u + offset).view(-1), (pns_a * (b - l.float())).view(-1))  # m_u = m_u + p(s_t+n, a*)(b - l)

    loss = -torch.sum(m * log_ps_a, 1)  # Cross-entropy loss (minimises DKL(m||p(s_t, a_t)))
    self.online_net.zero_grad()
    (weights * loss).mean().backward()  # Backpropagate importance-weighted minibatch loss
    clip_grad_norm_(self.online_net.parameters(), self.norm_clip)  # Clip gradients by L2 norm
    self.optimiser.step()
    return loss

  def update_target_net(self):
    self.target_net.load_state_dict(self.online_net.state_dict())

  # Evaluates Q-value based on single state (no batch)
  def evaluate_q(self, state):
    with torch.no_grad():
      return (self.online_net(state.unsqueeze(0)) * self.support).sum(2).max(1)[0].item()

  def train(self):
    self.online_net.train()

  def eval(self):
    self.online_net.eval()


# memory.py ------------------------------------------------------------------

H = W = 12   # 84 in the original
Transition_dtype = np.dtype([('timestep', np.int32), ('state', np.uint8, (H, W)), ('action', np.int32), ('reward', np.float32), ('nonterminal', np.bool_)])
blank_trans = (0, np.zeros((H, W), dtype=np.uint8), 0, 0.0, False)


# Segment tree data structure where parent node values are sum/max of children node values
class SegmentTree():
  def __init__(self, size):
    self.index = 0
    self.size = size
    self.full = False  # Used to track actual capacity
    self.tree_start = 2**(size-1).bit_length()-1  # Put all used node leaves on last tree level
    self.sum_tree = np.zeros((self.tree_start + self.size,), dtype=np.float32)
    self.data = np.array([blank_trans] * size, dtype=Transition_dtype)  # Build structured array
    self.max = 1  # Initial max value to return (1 = 1^ω)

  # Updates nodes values from current tree
  def _update_nodes(self, indices):
    children_indices = indices * 2 + np.expand_dims([1, 2], axis=1)
    self.sum_tree[indices] = np.sum(self.sum_tree[children_indices], axis=0)

  # Propagates changes up tree given tree indices
  def _propagate(self, indices):
    parents = (indices - 1) // 2
    unique_parents = np.unique(parents)
    self._update_nodes(unique_parents)
    if parents[0] != 0:
      self._propagate(parents)

  # Propagates single value up tree given a tree index for efficiency
  def _propagate_index(self, index):
    parent = (index - 1) // 2
    left, right = 2 * parent + 1, 2 * parent + 2
    self.sum_tree[parent] = self.sum_tree[left] + self.sum_tree[right]
    if parent != 0:
      self._propagate_index(parent)

  # Updates values given tree indices
  def update(self, indices, values):
    self.sum_tree[indices] = values  # Set new values
    self._propagate(indices)  # Propagate values
    current_max_value = np.max(values)
    self.max = max(current_max_value, self.max)

  # Updates single value given a tree index for efficiency
  def _update_index(self, index, value):
    self.sum_tree[index] = value  # Set new value
    self._propagate_index(index)  # Propagate value
    self.max = max(value, self.max)

  def append(self, data, value):
    self.data[self.index] = data  # Store data in underlying data structure
    self._update_index(self.index + self.tree_start, value)  # Update tree
    self.index = (self.index + 1) % self.size  # Update index
    self.full = self.full or self.index == 0  # Save when capacity reached
    self.max = max(value, self.max)

  # Searches for the location of values in sum tree
  def _retrieve(self, indices, values):
    children_indices = (indices * 2 + np.expand_dims([1, 2], axis=1)) # Make matrix of children indices
    # If indices correspond to leaf nodes, return them
    if children_indices[0, 0] >= self.sum_tree.shape[0]:
      return indices
    # If children indices correspond to leaf nodes, bound rare outliers in case total slightly overshoots
    elif children_indices[0, 0] >= self.tree_start:
      children_indices = np.minimum(children_indices, self.sum_tree.shape[0] - 1)
    left_children_values = self.sum_tree[children_indices[0]]
    successor_choices = np.greater(values, left_children_values).astype(np.int32)  # Classify which values are in left or right branches
    successor_indices = children_indices[successor_choices, np.arange(indices.size)] # Use classification to index into the indices matrix
    successor_values = values - successor_choices * left_children_values  # Subtract the left branch values when searching in the right branch
    return self._retrieve(successor_indices, successor_values)

  # Searches for values in sum tree and returns values, data indices and tree indices
  def find(self, values):
    indices = self._retrieve(np.zeros(values.shape, dtype=np.int32), values)
    data_index = indices - self.tree_start
    return (self.sum_tree[indices], data_index, indices)  # Return values, data indices, tree indices

  # Returns data given a data index
  def get(self, data_index):
    return self.data[data_index % self.size]

  def total(self):
    return self.sum_tree[0]


class ReplayMemory():
  def __init__(self, args, capacity):
    self.device = args.device
    self.capacity = capacity
    self.history = args.history_length
    self.discount = args.discount
    self.n = args.multi_step
    self.priority_weight = args.priority_weight  # Initial importance sampling weight β, annealed to 1 over course of training
    self.priority_exponent = args.priority_exponent
    self.t = 0  # Internal episode timestep counter
    self.n_step_scaling = torch.tensor([self.discount ** i for i in range(self.n)], dtype=torch.float32, device=self.device)  # Discount-scaling vector for n-step returns
    self.transitions = SegmentTree(capacity)  # Store transitions in a wrap-around cyclic buffer within a sum tree for querying priorities

  # Adds state and action at time t, reward and terminal at time t + 1
  def append(self, state, action, reward, terminal):
    state = state[-1].mul(255).to(dtype=torch.uint8, device=torch.device('cpu'))  # Only store last frame and discretise to save memory
    self.transitions.append((self.t, state, action, reward, not terminal), self.transitions.max)  # Store new transition with maximum priority
    self.t = 0 if terminal else self.t + 1  # Start new episodes with t = 0

  # Returns the transitions with blank states where appropriate
  def _get_transitions(self, idxs):
    transition_idxs = np.arange(-self.history + 1, self.n + 1) + np.expand_dims(idxs, axis=1)
    transitions = self.transitions.get(transition_idxs)
    transitions_firsts = transitions['timestep'] == 0
    blank_mask = np.zeros_like(transitions_firsts, dtype=np.bool_)
    for t in range(self.history - 2, -1, -1):  # e.g. 2 1 0
      blank_mask[:, t] = np.logical_or(blank_mask[:, t + 1], transitions_firsts[:, t + 1]) # True if future frame has timestep 0
    for t in range(self.history, self.history + self.n):  # e.g. 4 5 6
      blank_mask[:, t] = np.logical_or(blank_mask[:, t - 1], transitions_firsts[:, t]) # True if current or past frame has timestep 0
    transitions[blank_mask] = blank_trans
    return transitions

  # Returns a valid sample from each segment
  def _get_samples_from_segments(self, batch_size, p_total):
    segment_length = p_total / batch_size  # Batch size number of segments, based on sum over all probabilities
    segment_starts = np.arange(batch_size) * segment_length
    valid = False
    while not valid:
      samples = np.random.uniform(0.0, segment_length, [batch_size]) + segment_starts  # Uniformly sample from within all segments
      probs, idxs, tree_idxs = self.transitions.find(samples)  # Retrieve samples from tree with un-normalised probability
      if np.all((self.transitions.index - idxs) % self.capacity > self.n) and np.all((idxs - self.transitions.index) % self.capacity >= self.history) and np.all(probs != 0):
        valid = True  # Note that conditions are valid but extra conservative around buffer index 0
    # Retrieve all required transition data (from t - h to t + n)
    transitions = self._get_transitions(idxs)
    # Create un-discretised states and nth next states
    all_states = transitions['state']
    states = torch.tensor(all_states[:, :self.history], device=self.device, dtype=torch.float32).div_(255)
    next_states = torch.tensor(all_states[:, self.n:self.n + self.history], device=self.device, dtype=torch.float32).div_(255)
    # Discrete actions to be used as index
    actions = torch.tensor(np.copy(transitions['action'][:, self.history - 1]), dtype=torch.int64, device=self.device)
    # Calculate truncated n-step discounted returns R^n = Σ_k=0->n-1 (γ^k)R_t+k+1 (note that invalid nth next states have reward 0)
    rewards = torch.tensor(np.copy(transitions['reward'][:, self.history - 1:-1]), dtype=torch.float32, device=self.device)
    R = torch.matmul(rewards, self.n_step_scaling)
    # Mask for non-terminal nth next states
    nonterminals = torch.tensor(np.expand_dims(transitions['nonterminal'][:, self.history + self.n - 1], axis=1), dtype=torch.float32, device=self.device)
    return probs, idxs, tree_idxs, states, actions, R, next_states, nonterminals

  def sample(self, batch_size):
    p_total = self.transitions.total()  # Retrieve sum of all priorities (used to create a normalised probability distribution)
    probs, idxs, tree_idxs, states, actions, returns, next_states, nonterminals = self._get_samples_from_segments(batch_size, p_total)  # Get batch of valid samples
    probs = probs / p_total  # Calculate normalised probabilities
    capacity = self.capacity if self.transitions.full else self.transitions.index
    weights = (capacity * probs) ** -self.priority_weight  # Compute importance-sampling weights w
    weights = torch.tensor(weights / weights.max(), dtype=torch.float32, device=self.device)  # Normalise by max importance-sampling weight from batch
    return tree_idxs, states, actions, returns, next_states, nonterminals, weights

  def update_priorities(self, idxs, priorities):
    priorities = np.power(priorities, self.priority_exponent)
    self.transitions.update(idxs, priorities)


# a tiny numpy environment (env.py's Env interface: reset / step / action_space,
# a deque-like stack of history_length frames) ---------------------------------

class Env():
  def __init__(self, args):
    self.rng = np.random.RandomState(args.seed)
    self.window = args.history_length
    self.pos = 0
    self.t = 0
    self.state_buffer = [torch.zeros(H, W) for _ in range(self.window)]

  def _frame(self):
    f = np.zeros((H, W), dtype=np.float32)
    f[:, self.pos] = 1.0
    f[self.rng.randint(H), self.rng.randint(W)] = 0.5
    return torch.from_numpy(f)

  def reset(self):
    self.pos, self.t = W // 2, 0
    self.state_buffer = [torch.zeros(H, W) for _ in range(self.window - 1)] + [self._frame()]
    return torch.stack(self.state_buffer, 0)

  def step(self, action):
    self.pos = int(np.clip(self.pos + (-1, 0, 1)[action], 0, W - 1))
    self.t += 1
    reward = 1.0 if self.pos == W - 1 else (-0.1 if action == 0 else 0.0)
    done = self.pos == W - 1 or self.t >= 9
    self.state_buffer = self.state_buffer[1:] + [self._frame()]
    return torch.stack(self.state_buffer, 0), reward, done

  def action_space(self):
    return 3


parser = argparse.ArgumentParser(description='Rainbow')
parser.add_argument('--seed', type=int, default=123, help='Random seed')
parser.add_argument('--history-length', type=int, default=2, metavar='T', help='Number of consecutive states processed')
parser.add_argument('--architecture', type=str, default='data-efficient', choices=['canonical', 'data-efficient'], metavar='ARCH', help='Network architecture')
parser.add_argument('--hidden-size', type=int, default=16, metavar='SIZE', help='Network hidden size')
parser.add_argument('--noisy-std', type=float, default=0.1, metavar='σ', help='Initial standard deviation of noisy linear layers')
parser.add_argument('--atoms', type=int, default=11, metavar='C', help='Discretised size of value distribution')
parser.add_argument('--V-min', type=float, default=-2, metavar='V', help='Minimum of value distribution support')
parser.add_argument('--V-max', type=float, default=2, metavar='V', help='Maximum of value distribution support')
parser.add_argument('--memory-capacity', type=int, default=64, metavar='CAPACITY', help='Experience replay memory capacity')
parser.add_argument('--priority-exponent', type=float, default=0.5, metavar='ω', help='Prioritised experience replay exponent (originally denoted α)')
parser.add_argument('--priority-weight', type=float, default=0.4, metavar='β', help='Initial prioritised experience replay importance sampling weight')
parser.add_argument('--multi-step', type=int, default=3, metavar='n', help='Number of steps for multi-step return')
parser.add_argument('--discount', type=float, default=0.99, metavar='γ', help='Discount factor')
parser.add_argument('--target-update', type=int, default=8, metavar='τ', help='Number of steps after which to update target network')
parser.add_argument('--learning-rate', type=float, default=0.001, metavar='η', help='Learning rate')
parser.add_argument('--adam-eps', type=float, default=1.5e-4, metavar='ε', help='Adam epsilon')
parser.add_argument('--batch-size', type=int, default=4, metavar='SIZE', help='Batch size')
parser.add_argument('--norm-clip', type=float, default=10, metavar='NORM', help='Max L2 norm for gradient clipping')
parser.add_argument('--learn-start', type=int, default=24, metavar='STEPS', help='Number of steps before starting training')
parser.add_argument('--replay-frequency', type=int, default=2, metavar='k', help='Frequency of sampling from memory')
parser.add_argument('--T-max', type=int, default=40, metavar='STEPS', help='Number of training steps')
args = parser.parse_args([])
np.random.seed(args.seed)
torch.manual_seed(np.random.randint(1, 10000))
args.device = torch.device('cpu')


def fmt(t, n=4):
  return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(net, r):
  # Rainbow initialises with uniform_ (mu) and fill_ (sigma): keep the fills,
  # take the uniform draws from numpy
  with torch.no_grad():
    for name, p in net.named_parameters():
      if 'sigma' not in name:
        bound = 1 / math.sqrt(p.shape[-1] if p.dim() == 2 else p.shape[0]) if 'fc' in name else 0.3
        p.copy_(torch.from_numpy(r.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))


# NoisyLinear on its own
nl = NoisyLinear(5, 3, std_init=0.4)
print("noisy params", [n for n, _ in nl.named_parameters()], "buffers", [n for n, _ in nl.named_buffers()])
print("sigma fill", fmt(nl.weight_sigma, 2), fmt(nl.bias_sigma, 2), "mu range",
      bool(nl.weight_mu.abs().max() <= 1 / math.sqrt(5)))
eps_in, eps_out = nl._scale_noise(5), nl._scale_noise(3)
print("eps", fmt(eps_in, 5), "ger", fmt(eps_out.ger(eps_in), 6), tuple(eps_out.ger(eps_in).shape),
      torch.equal(eps_out.ger(eps_in), torch.outer(eps_out, eps_in)))
nl.reset_noise()
x = torch.from_numpy(np.random.RandomState(0).standard_normal((2, 5)).astype(np.float32))
with torch.no_grad():
  nl.weight_mu.copy_(torch.linspace(-1, 1, 15).view(3, 5))
  nl.bias_mu.copy_(torch.tensor([0.1, -0.2, 0.3]))
y_train = nl(x)
nl.eval()
y_eval = nl(x)
nl.train()
print("noisy train", fmt(y_train, 6), "eval", fmt(y_eval, 6), nl.training, y_train.requires_grad)
print("state_dict", list(nl.state_dict().keys()))

env = Env(args)
env_rng = np.random.RandomState(7)
agent = Agent(args, env)
load_numpy(agent.online_net, np.random.RandomState(1))
agent.update_target_net()
print("target frozen", all(not p.requires_grad for p in agent.target_net.parameters()),
      "synced", all(torch.equal(a, b) for a, b in zip(agent.online_net.state_dict().values(), agent.target_net.state_dict().values())))
print("state keys", list(agent.online_net.state_dict().keys())[:8])
print("support", fmt(agent.support, 11), f"{agent.delta_z:.3f}")
mem = ReplayMemory(args, args.memory_capacity)
print("n_step_scaling", fmt(mem.n_step_scaling, 3), "tree_start", mem.transitions.tree_start)

state = env.reset()
with torch.no_grad():
  probs0 = agent.online_net(state.unsqueeze(0))
  logp0 = agent.online_net(state.unsqueeze(0), log=True)
print("dist", tuple(probs0.shape), fmt(probs0[0, 1], 4), fmt(logp0[0, 2], 3),
      torch.allclose(probs0.sum(2), torch.ones(1, 3)), torch.allclose(logp0.exp(), probs0, atol=1e-6))
print("q", f"{agent.evaluate_q(state):.5f}", "act", agent.act(state))

priority_weight_increase = (1 - args.priority_weight) / (args.T_max - args.learn_start)
losses, actions_taken, done = [], [], False
for T in range(1, args.T_max + 1):
  if done:
    state = env.reset()
  if T % args.replay_frequency == 0:
    agent.reset_noise()  # Draw a new set of noisy weights
  action = agent.act(state)  # Choose an action greedily (with noisy weights)
  actions_taken.append(action)
  next_state, reward, done = env.step(action)  # Step
  mem.append(state, action, reward, done)  # Append transition to memory
  if T >= args.learn_start:
    mem.priority_weight = min(mem.priority_weight + priority_weight_increase, 1)  # Anneal importance sampling weight β to 1
    if T % args.replay_frequency == 0:
      loss = agent.learn(mem)  # Train with n-step distributional double-Q learning
      losses.append(loss)
    if T % args.target_update == 0:
      agent.update_target_net()
  state = next_state

print("actions", actions_taken)
print("losses", [fmt(l, 3) for l in losses])
print("tree total", f"{mem.transitions.total():.4f}", f"max {mem.transitions.max:.4f}", mem.transitions.index,
      mem.transitions.full, f"beta {mem.priority_weight:.4f}")
print("weights", fmt(agent.online_net.fc_z_a.weight_mu, 4), fmt(agent.online_net.convs[0].weight, 3))

# the projection on its own: exact atoms (l == u) keep their mass
agent.eval()
print("eval mode", agent.online_net.training, agent.online_net.fc_h_v.training, agent.target_net.training)
print("q eval", f"{agent.evaluate_q(state):.5f}", "greedy", agent.act_e_greedy(state, epsilon=0.0))
agent.train()
Vmin, Vmax, atoms, delta_z = agent.Vmin, agent.Vmax, agent.atoms, agent.delta_z
Tz = torch.tensor([[-3.0, -2.0, -0.8, 0.0, 0.45, 1.2, 2.0, 2.5, 0.4, -1.6, 1.9]])
Tz.clamp_(min=Vmin, max=Vmax)
b = (Tz - Vmin) / delta_z
l, u = b.floor().to(torch.int64), b.ceil().to(torch.int64)
l[(u > 0) * (l == u)] -= 1
u[(l < (atoms - 1)) * (l == u)] += 1
p = torch.full((1, atoms), 1.0 / atoms)
m = torch.zeros(1, atoms)
m.view(-1).index_add_(0, l.view(-1), (p * (u.float() - b)).view(-1))
m.view(-1).index_add_(0, u.view(-1), (p * (b - l.float())).view(-1))
print("projection", l.tolist(), u.tolist(), fmt(m, 11), f"{m.sum().item():.5f}")

# one training step under torch.compile against the same step eagerly
_, batch_states, batch_actions, batch_returns, batch_next, batch_nonterm, batch_w = mem.sample(args.batch_size)
state_sd = copy.deepcopy(agent.online_net.state_dict())
opt_sd = copy.deepcopy(agent.optimiser.state_dict())
eager = [agent.learn_on(batch_states, batch_actions, batch_returns, batch_next, batch_nonterm, batch_w).sum().item()
         for _ in range(2)]
after = {k: v.clone() for k, v in agent.online_net.state_dict().items()}
agent.online_net.load_state_dict(state_sd)
agent.optimiser.load_state_dict(opt_sd)
cstep = torch.compile(agent.learn_on)
compiled = [cstep(batch_states, batch_actions, batch_returns, batch_next, batch_nonterm, batch_w).sum().item()
            for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(agent.online_net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
