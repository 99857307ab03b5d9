# DQN with prioritized experience replay the way higgsfield/RL-Adventure's
# "4.prioritized dqn.ipynb" and rlcode/per write it: NaivePrioritizedBuffer
# (priorities ** alpha, importance weights (total * probs[indices]) **
# (-beta) normalised by their max, beta annealed by beta_by_frame) and
# rlcode's SumTree-backed Memory (propagate / retrieve / total, segment
# sampling, is_weight), the Variable-era code (USE_CUDA, a Variable lambda,
# Variable(torch.FloatTensor(np.float32(state)), volatile=True),
# q_value.max(1)[1].data[0] now .item()), q_values.gather(1,
# action.unsqueeze(1)).squeeze(1), next_q_state_values.gather(1,
# torch.max(next_q_values, 1)[1].unsqueeze(1)) for double DQN, loss = (q -
# expected).pow(2) * weights, prios = loss + 1e-5, the target network synced
# by load_state_dict, epsilon-greedy with random.random(). Changes for a CPU
# test: a tiny deterministic numpy chain environment instead of gym,
# small networks with weights from numpy, the buffers' draws and
# exploration from seeded numpy / random generators, a few dozen frames;
# then one TD step under torch.compile against the same step eagerly.
import copy
import math
import random

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.optim as optim

USE_CUDA = torch.cuda.is_available()
Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)

random.seed(0)
np.random.seed(0)


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


class ChainEnv:
    """A deterministic chain: 4 observation features, 2 actions (left /
    right), reward 1 at the right end; episodes of at most 12 steps."""

    def __init__(self, n=6):
        self.n = n

    def reset(self):
        self.pos, self.t = 0, 0
        return self._obs()

    def _obs(self):
        x = self.pos / (self.n - 1)
        return np.array([x, 1 - x, math.sin(3 * x), float(self.pos == self.n - 1)], dtype=np.float64)

    def step(self, action):
        self.t += 1
        self.pos = min(self.n - 1, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        reward = 1.0 if self.pos == self.n - 1 else -0.05
        done = self.pos == self.n - 1 or self.t >= 12
        return self._obs(), reward, done, {}


class NaivePrioritizedBuffer(object):
    def __init__(self, capacity, prob_alpha=0.6):
        self.prob_alpha = prob_alpha
        self.capacity = capacity
        self.buffer = []
        self.pos = 0
        self.priorities = np.zeros((capacity,), dtype=np.float32)

    def push(self, state, action, reward, next_state, done):
        assert state.ndim == next_state.ndim
        state = np.expand_dims(state, 0)
        next_state = np.expand_dims(next_state, 0)

        max_prio = self.priorities.max() if self.buffer else 1.0

        if len(self.buffer) < self.capacity:
            self.buffer.append((state, action, reward, next_state, done))
        else:
            self.buffer[self.pos] = (state, action, reward, next_state, done)

        self.priorities[self.pos] = max_prio
        self.pos = (self.pos + 1) % self.capacity

    def sample(self, batch_size, beta=0.4):
        if len(self.buffer) == self.capacity:
            prios = self.priorities
        else:
            prios = self.priorities[:self.pos]

        probs = prios ** self.prob_alpha
        probs /= probs.sum()

        indices = np.random.choice(len(self.buffer), batch_size, p=probs)
        samples = [self.buffer[idx] for idx in indices]

        total = len(self.buffer)
        weights = (total * probs[indices]) ** (-beta)
        weights /= weights.max()
        weights = np.array(weights, dtype=np.float32)

        batch = list(zip(*samples))
        states = np.concatenate(batch[0])
        actions = batch[1]
        rewards = batch[2]
        next_states = np.concatenate(batch[3])
        dones = batch[4]

        return states, actions, rewards, next_states, dones, indices, weights

    def update_priorities(self, batch_indices, batch_priorities):
        for idx, prio in zip(batch_indices, batch_priorities):
            self.priorities[idx] = prio

    def __len__(self):
        return len(self.buffer)


# ---- rlcode/per: SumTree and Memory
class SumTree:
    write = 0

    def __init__(self, capacity):
        self.capacity = capacity
        self.tree = np.zeros(2 * capacity - 1)
        self.data = np.zeros(capacity, dtype=object)
        self.n_entries = 0

    # update to the root node
    def _propagate(self, idx, change):
        parent = (idx - 1) // 2

        self.tree[parent] += change

        if parent != 0:
            self._propagate(parent, change)

    # find sample on leaf node
    def _retrieve(self, idx, s):
        left = 2 * idx + 1
        right = left + 1

        if left >= len(self.tree):
            return idx

        if s <= self.tree[left]:
            return self._retrieve(left, s)
        else:
            return self._retrieve(right, s - self.tree[left])

    def total(self):
        return self.tree[0]

    # store priority and sample
    def add(self, p, data):
        idx = self.write + self.capacity - 1

        self.data[self.write] = data
        self.update(idx, p)

        self.write += 1
        if self.write >= self.capacity:
            self.write = 0

        if self.n_entries < self.capacity:
            self.n_entries += 1

    # update priority
    def update(self, idx, p):
        change = p - self.tree[idx]

        self.tree[idx] = p
        self._propagate(idx, change)

    # get priority and sample
    def get(self, s):
        idx = self._retrieve(0, s)
        dataIdx = idx - self.capacity + 1

        return (idx, self.tree[idx], self.data[dataIdx])


class Memory:  # stored as ( s, a, r, s_ ) in SumTree
    e = 0.01
    a = 0.6
    beta = 0.4
    beta_increment_per_sampling = 0.001

    def __init__(self, capacity):
        self.tree = SumTree(capacity)
        self.capacity = capacity

    def _get_priority(self, error):
        return (np.abs(error) + self.e) ** self.a

    def add(self, error, sample):
        p = self._get_priority(error)
        self.tree.add(p, sample)

    def sample(self, n):
        batch = []
        idxs = []
        segment = self.tree.total() / n
        priorities = []

        self.beta = np.min([1., self.beta + self.beta_increment_per_sampling])

        for i in range(n):
            a = segment * i
            b = segment * (i + 1)

            s = random.uniform(a, b)
            (idx, p, data) = self.tree.get(s)
            priorities.append(p)
            batch.append(data)
            idxs.append(idx)

        sampling_probabilities = priorities / self.tree.total()
        is_weight = np.power(self.tree.n_entries * sampling_probabilities, -self.beta)
        is_weight /= is_weight.max()

        return batch, idxs, is_weight

    def update(self, idx, error):
        p = self._get_priority(error)
        self.tree.update(idx, p)


class DQN(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super(DQN, self).__init__()

        self.layers = nn.Sequential(
            nn.Linear(num_inputs, 32),
            nn.ReLU(),
            nn.Linear(32, 32),
            nn.ReLU(),
            nn.Linear(32, num_actions)
        )
        self.num_actions = num_actions

    def forward(self, x):
        return self.layers(x)

    def act(self, state, epsilon):
        if random.random() > epsilon:
            state = Variable(torch.FloatTensor(state).unsqueeze(0), volatile=True)
            q_value = self.forward(state)
            action = q_value.max(1)[1].data[0].item()
        else:
            action = random.randrange(self.num_actions)
        return action


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


env = ChainEnv()
current_model = DQN(4, 2)
target_model = DQN(4, 2)
load_numpy(current_model, np.random.default_rng(0))
load_numpy(target_model, np.random.default_rng(1))
if USE_CUDA:
    current_model = current_model.cuda()
    target_model = target_model.cuda()

optimizer = optim.Adam(current_model.parameters(), lr=1e-3)

replay_buffer = NaivePrioritizedBuffer(64)


def update_target(current_model, target_model):
    target_model.load_state_dict(current_model.state_dict())


update_target(current_model, target_model)
print("synced", all(torch.equal(a, b) for a, b in zip(current_model.parameters(), target_model.parameters())),
      target_model.layers[0].weight is not current_model.layers[0].weight)

epsilon_start = 1.0
epsilon_final = 0.01
epsilon_decay = 50

epsilon_by_frame = lambda frame_idx: epsilon_final + (epsilon_start - epsilon_final) * math.exp(-1. * frame_idx / epsilon_decay)
beta_start = 0.4
beta_frames = 100
beta_by_frame = lambda frame_idx: min(1.0, beta_start + frame_idx * (1.0 - beta_start) / beta_frames)
print("schedules", f"{epsilon_by_frame(10):.5f}", f"{beta_by_frame(30):.4f}", beta_by_frame(1000))


def compute_td_loss(batch_size, beta):
    state, action, reward, next_state, done, indices, weights = replay_buffer.sample(batch_size, beta)

    state = Variable(torch.FloatTensor(np.float32(state)))
    next_state = Variable(torch.FloatTensor(np.float32(next_state)))
    action = Variable(torch.LongTensor(action))
    reward = Variable(torch.FloatTensor(reward))
    done = Variable(torch.FloatTensor(done))
    weights = Variable(torch.FloatTensor(weights))

    q_values = current_model(state)
    next_q_values = target_model(next_state)

    q_value = q_values.gather(1, action.unsqueeze(1)).squeeze(1)
    next_q_value = next_q_values.max(1)[0]
    expected_q_value = reward + gamma * next_q_value * (1 - done)

    loss = (q_value - expected_q_value.detach()).pow(2) * weights
    prios = loss + 1e-5
    loss = loss.mean()

    optimizer.zero_grad()
    loss.backward()
    replay_buffer.update_priorities(indices, prios.data.cpu().numpy())
    optimizer.step()

    return loss


num_frames = 56
batch_size = 8
gamma = 0.99

losses = []
all_rewards = []
episode_reward = 0

state = env.reset()
for frame_idx in range(1, num_frames + 1):
    epsilon = epsilon_by_frame(frame_idx)
    action = current_model.act(state, epsilon)

    next_state, reward, done, _ = env.step(action)
    replay_buffer.push(state, action, reward, next_state, done)

    state = next_state
    episode_reward += reward

    if done:
        state = env.reset()
        all_rewards.append(episode_reward)
        episode_reward = 0

    if len(replay_buffer) > batch_size:
        beta = beta_by_frame(frame_idx)
        loss = compute_td_loss(batch_size, beta)
        losses.append(loss.item())

    if frame_idx % 20 == 0:
        update_target(current_model, target_model)

print("episodes", len(all_rewards), [f"{r:.2f}" for r in all_rewards[:4]])
print("losses", len(losses), [f"{v:.5f}" for v in losses[:3]], f"{losses[-1]:.5f}")
print("priorities", fmt(replay_buffer.priorities, 6), replay_buffer.priorities.dtype, len(replay_buffer))
with torch.no_grad():
    q = current_model(torch.FloatTensor(np.float32(np.stack([env.reset(), env.step(1)[0]]))))
print("q", fmt(q, 4), tuple(q.shape), q.max(1)[1].tolist())

# ---- rlcode/per's Memory with double DQN targets
memory = Memory(32)
rs = np.random.default_rng(3)
for i in range(40):
    s = rs.normal(size=4).astype(np.float32)
    a = int(rs.integers(0, 2))
    r_ = float(rs.normal())
    s2 = rs.normal(size=4).astype(np.float32)
    d = bool(rs.random() < 0.2)
    with torch.no_grad():
        target = current_model(Variable(torch.FloatTensor(s))).data
        old_val = target[a].clone()
        target_val = target_model(Variable(torch.FloatTensor(s2))).data
        if d:
            target[a] = r_
        else:
            target[a] = r_ + gamma * torch.max(target_val)
    error = abs(old_val - target[a])
    memory.add(error.item(), (s, a, r_, s2, d))
print("sumtree", f"{memory.tree.total():.5f}", memory.tree.n_entries, memory.tree.write)

mini_batch, idxs, is_weights = memory.sample(8)
mini_batch = np.array(mini_batch, dtype=object).transpose()
states = np.vstack(mini_batch[0])
actions = list(mini_batch[1])
rewards = list(mini_batch[2])
next_states = np.vstack(mini_batch[3])
dones = mini_batch[4].astype(int)

states = torch.Tensor(states)
next_states = torch.Tensor(next_states)
actions = torch.LongTensor(actions)
rewards = torch.FloatTensor(rewards)
dones = torch.FloatTensor(dones)

pred = current_model(states)
pred = pred.gather(1, actions.unsqueeze(1)).squeeze(1)
next_q_values = current_model(next_states)
next_q_state_values = target_model(next_states)
next_pred = next_q_state_values.gather(1, torch.max(next_q_values, 1)[1].unsqueeze(1)).squeeze(1)
target = rewards + (1 - dones) * gamma * next_pred.detach()

errors = torch.abs(pred - target).data.numpy()
for i in range(8):
    memory.update(idxs[i], errors[i])

optimizer.zero_grad()
loss = (torch.FloatTensor(is_weights) * nn.functional.mse_loss(pred, target, reduction='none')).mean()
loss.backward()
optimizer.step()
print("per loss", f"{loss.item():.5f}", fmt(torch.from_numpy(is_weights), 4), f"{memory.tree.total():.5f}",
      errors.dtype, is_weights.dtype)


# one TD step under torch.compile against the same step eagerly
def td_step(state, action, reward, next_state, done, weights):
    q_values = current_model(state)
    next_q_values = target_model(next_state)
    q_value = q_values.gather(1, action.unsqueeze(1)).squeeze(1)
    next_q_value = next_q_values.max(1)[0]
    expected_q_value = reward + gamma * next_q_value * (1 - done)
    loss = (q_value - expected_q_value.detach()).pow(2) * weights
    prios = loss + 1e-5
    loss = loss.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, prios.detach()


args = (states, actions, rewards, next_states, dones, torch.FloatTensor(is_weights))
state0, opt0 = copy.deepcopy(current_model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [td_step(*args) for _ in range(2)]
after = {k: v.clone() for k, v in current_model.state_dict().items()}
current_model.load_state_dict(state0)
optimizer.load_state_dict(opt0)
cstep = torch.compile(td_step)
compiled = [cstep(*args) for _ in range(2)]
print("compiled loss", [f"{l.item():.5f}" for l, _ in compiled])
print("compiled == eager:", all(torch.allclose(c[1], e[1], rtol=1e-4, atol=1e-6) for c, e in zip(compiled, eager)),
      all(torch.allclose(current_model.state_dict()[k], after[k], rtol=1e-4, atol=1e-6) for k in after))
