# Implicit Quantile Networks (Dabney et al. 2018) in the shape of the
# public PyTorch IQN implementations (e.g. BY571/IQN-and-Extensions,
# IQN.py / agent.py, and Kaixhin-style code): the cosine embedding of
# sampled fractions tau, cos(pi * i * tau) for i = 0..n_cos-1 through a
# Linear and ReLU, multiplied into the state features, the quantile head
# (batch, N, actions), actions chosen by the mean over quantiles, the
# target network's quantiles at the greedy next action (detached,
# gather over the action dimension after repeat / expand), the pairwise
# TD errors (batch, N, N'), the Huber loss calculate_huber_loss with
# kappa 1, the quantile weighting |tau - 1{td < 0}|, .sum(dim=1).mean(),
# clip_grad_norm_, Adam, epsilon-greedy acting, a replay buffer (deque,
# random.sample) and the soft update of the target
# (tau * local + (1 - tau) * target via copy_). Written for this test:
# a 5-state chain MDP with a noisy reward (torch), 64-dim features, 8
# quantiles, 150 steps; one compiled learning step against eager (its
# fractions fixed to the midpoints (i + 0.5) / N).
import copy
import random
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

random.seed(0)
torch.manual_seed(0)
np.random.seed(0)


class IQN(nn.Module):
    def __init__(self, state_size, action_size, layer_size, N, n_cos=16):
        super(IQN, self).__init__()
        self.input_shape = state_size
        self.action_size = action_size
        self.N = N
        self.n_cos = n_cos
        self.layer_size = layer_size
        self.fixed_taus = None  # (risk-sensitive / evaluation policies fix tau)
        self.pis = torch.FloatTensor([np.pi * i for i in range(self.n_cos)]).view(1, 1, self.n_cos)
        self.head = nn.Linear(self.input_shape, layer_size)
        self.cos_embedding = nn.Linear(self.n_cos, layer_size)
        self.ff_1 = nn.Linear(layer_size, layer_size)
        self.ff_2 = nn.Linear(layer_size, action_size)

    def calc_cos(self, batch_size, n_tau=8):
        if self.fixed_taus is None:
            taus = torch.rand(batch_size, n_tau).unsqueeze(-1)
        else:
            taus = self.fixed_taus.view(1, n_tau, 1).expand(batch_size, n_tau, 1)
        cos = torch.cos(taus * self.pis)
        assert cos.shape == (batch_size, n_tau, self.n_cos), "cos shape is incorrect"
        return cos, taus

    def forward(self, input, num_tau=8):
        batch_size = input.shape[0]
        x = torch.relu(self.head(input))
        cos, taus = self.calc_cos(batch_size, num_tau)
        cos = cos.view(batch_size * num_tau, self.n_cos)
        cos_x = torch.relu(self.cos_embedding(cos)).view(batch_size, num_tau, self.layer_size)
        x = (x.unsqueeze(1) * cos_x).view(batch_size * num_tau, self.layer_size)
        x = torch.relu(self.ff_1(x))
        out = self.ff_2(x)
        return out.view(batch_size, num_tau, self.action_size), taus

    def get_qvalues(self, inputs):
        quantiles, _ = self.forward(inputs, self.N)
        actions = quantiles.mean(dim=1)
        return actions


def calculate_huber_loss(td_errors, k=1.0):
    loss = torch.where(td_errors.abs() <= k, 0.5 * td_errors.pow(2), k * (td_errors.abs() - 0.5 * k))
    assert loss.shape == (td_errors.shape[0], 8, 8), "huber loss has wrong shape"
    return loss


class ChainEnv:
    """5 states in a row; action 1 moves right (reward 1 at the end, noisy), 0 resets."""

    def __init__(self, n=5):
        self.n = n
        self.s = 0

    def one_hot(self):
        v = np.zeros(self.n, dtype=np.float32)
        v[self.s] = 1.0
        return v

    def reset(self):
        self.s = 0
        return self.one_hot()

    def step(self, a):
        if a == 1:
            self.s = min(self.s + 1, self.n - 1)
            r = 1.0 + 0.5 * float(torch.randn(())) if self.s == self.n - 1 else 0.0
        else:
            self.s, r = 0, 0.1
        done = self.s == self.n - 1
        return self.one_hot(), r, done


STATE, ACTIONS, N_Q, GAMMA, TAU, BATCH = 5, 2, 8, 0.9, 1e-2, 16
qnetwork_local = IQN(STATE, ACTIONS, 64, N_Q)
qnetwork_target = IQN(STATE, ACTIONS, 64, N_Q)
qnetwork_target.load_state_dict(qnetwork_local.state_dict())
optimizer = optim.Adam(qnetwork_local.parameters(), lr=5e-3)
memory = deque(maxlen=1000)


def learn(states, actions, rewards, next_states, dones):
    optimizer.zero_grad()
    Q_targets_next, _ = qnetwork_target(next_states, N_Q)
    Q_targets_next = Q_targets_next.detach()
    action_indx = torch.argmax(Q_targets_next.mean(dim=1), dim=1, keepdim=True)
    Q_targets_next = Q_targets_next.gather(2, action_indx.unsqueeze(-1).expand(BATCH, N_Q, 1)).transpose(1, 2)
    Q_targets = rewards.unsqueeze(-1) + (GAMMA * Q_targets_next * (1. - dones.unsqueeze(-1)))
    Q_expected, taus = qnetwork_local(states, N_Q)
    Q_expected = Q_expected.gather(2, actions.unsqueeze(-1).expand(BATCH, N_Q, 1))
    td_error = Q_targets - Q_expected
    assert td_error.shape == (BATCH, N_Q, N_Q), "wrong td error shape"
    huber_l = calculate_huber_loss(td_error, 1.0)
    quantil_l = abs(taus - (td_error.detach() < 0).float()) * huber_l / 1.0
    loss = quantil_l.sum(dim=1).mean(dim=1)
    loss = loss.mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(qnetwork_local.parameters(), 1)
    optimizer.step()
    soft_update(qnetwork_local, qnetwork_target)
    return loss


def soft_update(local_model, target_model):
    for target_param, local_param in zip(target_model.parameters(), local_model.parameters()):
        target_param.data.copy_(TAU * local_param.data + (1.0 - TAU) * target_param.data)


def sample():
    experiences = random.sample(memory, k=BATCH)
    states = torch.from_numpy(np.stack([e[0] for e in experiences])).float()
    actions = torch.from_numpy(np.vstack([e[1] for e in experiences])).long()
    rewards = torch.from_numpy(np.vstack([e[2] for e in experiences])).float()
    next_states = torch.from_numpy(np.stack([e[3] for e in experiences])).float()
    dones = torch.from_numpy(np.vstack([e[4] for e in experiences]).astype(np.uint8)).float()
    return states, actions, rewards, next_states, dones


env = ChainEnv()
state = env.reset()
eps, score, episode, losses = 1.0, 0.0, 0, []
for t in range(150):
    if random.random() > eps:
        with torch.no_grad():
            action = int(np.argmax(qnetwork_local.get_qvalues(torch.from_numpy(state).unsqueeze(0)).numpy()))
    else:
        action = random.choice(np.arange(ACTIONS))
    next_state, reward, done = env.step(action)
    memory.append((state, action, reward, next_state, done))
    state, score = next_state, score + reward
    if len(memory) > BATCH and t % 2 == 0:
        losses.append(learn(*sample()).item())
    if done or t % 20 == 19:
        episode += 1
        state = env.reset()
        eps = max(0.05, eps * 0.8)
    if t % 50 == 49:
        print(f"step {t + 1} episodes {episode} eps {eps:.3f} score {score:.3f} loss {np.mean(losses[-10:]):.5f}")

with torch.no_grad():
    torch.manual_seed(5)
    q = qnetwork_local.get_qvalues(torch.eye(STATE))
print("Q(s, .):", [[round(v, 3) for v in row] for row in q.tolist()])

# the compiled check with fixed fractions (compiled random draws, as in
# torch.compile, do not follow the eager generator)
batch = sample()
for net in (qnetwork_local, qnetwork_target):
    net.fixed_taus = (torch.arange(N_Q) + 0.5) / N_Q
s_local, s_target = copy.deepcopy(qnetwork_local.state_dict()), copy.deepcopy(qnetwork_target.state_dict())
s_opt = copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(learn)(*batch)
after_c = copy.deepcopy(qnetwork_local.state_dict())
target_c = copy.deepcopy(qnetwork_target.state_dict())
qnetwork_local.load_state_dict(s_local)
qnetwork_target.load_state_dict(s_target)
optimizer.load_state_dict(s_opt)
loss_e = learn(*batch)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in qnetwork_local.state_dict().items()),
      all(torch.allclose(target_c[k], v, atol=1e-6) for k, v in qnetwork_target.state_dict().items()))
