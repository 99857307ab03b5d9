# sfujim/TD3: TD3.py (Actor, the twin Critic with Q1, TD3 with its target
# networks made by copy.deepcopy, select_action through .cpu().data.numpy(),
# train's clipped target-policy noise from torch.randn_like(...).clamp, the
# min of the twin targets under no_grad, the delayed policy update and the
# soft target updates target_param.data.copy_(tau * param.data + (1 - tau) *
# target_param.data), save / load through torch.save of the state dicts),
# utils.py (the numpy ReplayBuffer, sample through torch.FloatTensor) and
# main.py (the start_timesteps of random actions, exploration noise from
# np.random.normal, eval_policy, the episode bookkeeping).
# Changes for a CPU test: a numpy point-mass environment instead of gym, 64
# hidden units, batch 16, a few hundred steps; weights from numpy; the
# torch.randn_like target noise differs between tracec and torch, so the
# compared runs clip it to zero (noise_clip=0) and one run with the default
# noise prints [rng] lines.  Then TD3.train (sampling the replay buffer
# inside) under torch.compile against the same calls run eagerly.
import copy
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# Implementation of Twin Delayed Deep Deterministic Policy Gradients (TD3)
# Paper: https://arxiv.org/abs/1802.09477

HIDDEN = 64


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, max_action):
        super(Actor, self).__init__()

        self.l1 = nn.Linear(state_dim, HIDDEN)
        self.l2 = nn.Linear(HIDDEN, HIDDEN)
        self.l3 = nn.Linear(HIDDEN, action_dim)

        self.max_action = max_action

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return self.max_action * torch.tanh(self.l3(a))


class Critic(nn.Module):
    def __init__(self, state_dim, action_dim):
        super(Critic, self).__init__()

        # Q1 architecture
        self.l1 = nn.Linear(state_dim + action_dim, HIDDEN)
        self.l2 = nn.Linear(HIDDEN, HIDDEN)
        self.l3 = nn.Linear(HIDDEN, 1)

        # Q2 architecture
        self.l4 = nn.Linear(state_dim + action_dim, HIDDEN)
        self.l5 = nn.Linear(HIDDEN, HIDDEN)
        self.l6 = nn.Linear(HIDDEN, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)

        q1 = F.relu(self.l1(sa))
        q1 = F.relu(self.l2(q1))
        q1 = self.l3(q1)

        q2 = F.relu(self.l4(sa))
        q2 = F.relu(self.l5(q2))
        q2 = self.l6(q2)
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)

        q1 = F.relu(self.l1(sa))
        q1 = F.relu(self.l2(q1))
        q1 = self.l3(q1)
        return q1


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            fan = p.shape[1] if p.dim() > 1 else 4
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32) / np.sqrt(fan)))
    return module


class TD3(object):
    def __init__(
        self,
        state_dim,
        action_dim,
        max_action,
        discount=0.99,
        tau=0.005,
        policy_noise=0.2,
        noise_clip=0.5,
        policy_freq=2
    ):

        self.actor = numpy_init(Actor(state_dim, action_dim, max_action).to(device), 0)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)

        self.critic = numpy_init(Critic(state_dim, action_dim).to(device), 1)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)

        self.max_action = max_action
        self.discount = discount
        self.tau = tau
        self.policy_noise = policy_noise
        self.noise_clip = noise_clip
        self.policy_freq = policy_freq

        self.total_it = 0


    def select_action(self, state):
        state = torch.FloatTensor(state.reshape(1, -1)).to(device)
        return self.actor(state).cpu().data.numpy().flatten()


    def train(self, replay_buffer, batch_size=256):
        self.total_it += 1

        # Sample replay buffer 
        state, action, next_state, reward, not_done = replay_buffer.sample(batch_size)

        with torch.no_grad():
            # Select action according to policy and add clipped noise
            noise = (
                torch.randn_like(action) * self.policy_noise
            ).clamp(-self.noise_clip, self.noise_clip)
            
            next_action = (
                self.actor_target(next_state) + noise
            ).clamp(-self.max_action, self.max_action)

            # Compute the target Q value
            target_Q1, target_Q2 = self.critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * self.discount * target_Q

        # Get current Q estimates
        current_Q1, current_Q2 = self.critic(state, action)

        # Compute critic loss
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)

        # Optimize the critic
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # Delayed policy updates
        if self.total_it % self.policy_freq == 0:

            # Compute actor losse
            actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
            
            # Optimize the actor 
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()

            # Update the frozen target models
            for param, target_param in zip(self.critic.parameters(), self.critic_target.parameters()):
                target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)

            for param, target_param in zip(self.actor.parameters(), self.actor_target.parameters()):
                target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)


    def save(self, filename):
        torch.save(self.critic.state_dict(), filename + "_critic")
        torch.save(self.critic_optimizer.state_dict(), filename + "_critic_optimizer")
        
        torch.save(self.actor.state_dict(), filename + "_actor")
        torch.save(self.actor_optimizer.state_dict(), filename + "_actor_optimizer")


    def load(self, filename):
        self.critic.load_state_dict(torch.load(filename + "_critic"))
        self.critic_optimizer.load_state_dict(torch.load(filename + "_critic_optimizer"))
        self.critic_target = copy.deepcopy(self.critic)

        self.actor.load_state_dict(torch.load(filename + "_actor"))
        self.actor_optimizer.load_state_dict(torch.load(filename + "_actor_optimizer"))
        self.actor_target = copy.deepcopy(self.actor)


# ---- utils.py ----
class ReplayBuffer(object):
    def __init__(self, state_dim, action_dim, max_size=int(1e6)):
        self.max_size = max_size
        self.ptr = 0
        self.size = 0

        self.state = np.zeros((max_size, state_dim))
        self.action = np.zeros((max_size, action_dim))
        self.next_state = np.zeros((max_size, state_dim))
        self.reward = np.zeros((max_size, 1))
        self.not_done = np.zeros((max_size, 1))

        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


    def add(self, state, action, next_state, reward, done):
        self.state[self.ptr] = state
        self.action[self.ptr] = action
        self.next_state[self.ptr] = next_state
        self.reward[self.ptr] = reward
        self.not_done[self.ptr] = 1. - done

        self.ptr = (self.ptr + 1) % self.max_size
        self.size = min(self.size + 1, self.max_size)


    def sample(self, batch_size):
        ind = np.random.randint(0, self.size, size=batch_size)

        return (
            torch.FloatTensor(self.state[ind]).to(self.device),
            torch.FloatTensor(self.action[ind]).to(self.device),
            torch.FloatTensor(self.next_state[ind]).to(self.device),
            torch.FloatTensor(self.reward[ind]).to(self.device),
            torch.FloatTensor(self.not_done[ind]).to(self.device)
        )


# ---- a numpy point-mass environment with gym's interface ----
class PointMass:
    state_dim, action_dim, max_action, _max_episode_steps = 3, 1, 2.0, 25

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.t = 0
        self.s = self.rng.uniform(-1, 1, 3)
        return self.s.copy()

    def step(self, a):
        a = float(np.clip(a, -self.max_action, self.max_action)[0])
        pos, vel, goal = self.s
        vel = 0.9 * vel + 0.1 * a
        pos = pos + 0.1 * vel
        self.s = np.array([pos, vel, goal])
        self.t += 1
        reward = -(pos - goal) ** 2 - 0.01 * a * a
        return self.s.copy(), reward, self.t >= self._max_episode_steps, {}


# Runs policy for X episodes and returns average reward
# A fixed seed is used for the eval environment
def eval_policy(policy, seed, eval_episodes=2):
    eval_env = PointMass(seed + 100)

    avg_reward = 0.
    for _ in range(eval_episodes):
        state, done = eval_env.reset(), False
        while not done:
            action = policy.select_action(np.array(state))
            state, reward, done, _ = eval_env.step(action)
            avg_reward += reward

    avg_reward /= eval_episodes

    print("---------------------------------------")
    print(f"Evaluation over {eval_episodes} episodes: {avg_reward:.3f}")
    print("---------------------------------------")
    return avg_reward


# ---- main.py ----
seed = 0
start_timesteps = 50
eval_freq = 100
max_timesteps = 200
expl_noise = 0.1
batch_size = 16

env = PointMass(seed)
torch.manual_seed(seed)
np.random.seed(seed)

state_dim = env.state_dim
action_dim = env.action_dim
max_action = float(env.max_action)

kwargs = {
    "state_dim": state_dim,
    "action_dim": action_dim,
    "max_action": max_action,
    "discount": 0.99,
    "tau": 0.005,
}

# Target policy smoothing is scaled wrt the action scale
kwargs["policy_noise"] = 0.2 * max_action
kwargs["noise_clip"] = 0.0        # the compared runs: the randn_like noise clipped to zero
kwargs["policy_freq"] = 2
policy = TD3(**kwargs)

replay_buffer = ReplayBuffer(state_dim, action_dim)

# Evaluate untrained policy
evaluations = [eval_policy(policy, seed)]

state, done = env.reset(), False
episode_reward = 0
episode_timesteps = 0
episode_num = 0

for t in range(int(max_timesteps)):

    episode_timesteps += 1

    # Select action randomly or according to policy
    if t < start_timesteps:
        action = np.random.uniform(-max_action, max_action, action_dim)
    else:
        action = (
            policy.select_action(np.array(state))
            + np.random.normal(0, max_action * expl_noise, size=action_dim)
        ).clip(-max_action, max_action)

    # Perform action
    next_state, reward, done, _ = env.step(action)
    done_bool = float(done) if episode_timesteps < env._max_episode_steps else 0

    # Store data in replay buffer
    replay_buffer.add(state, action, next_state, reward, done_bool)

    state = next_state
    episode_reward += reward

    # Train agent after collecting sufficient data
    if t >= start_timesteps:
        policy.train(replay_buffer, batch_size)

    if done:
        # +1 to account for 0 indexing. +0 on ep_timesteps since it will increment +1 even if done=True
        if episode_num % 2 == 0:
            print(f"Total T: {t+1} Episode Num: {episode_num+1} Episode T: {episode_timesteps} Reward: {episode_reward:.3f}")
        # Reset environment
        state, done = env.reset(), False
        episode_reward = 0
        episode_timesteps = 0
        episode_num += 1

    # Evaluate episode
    if (t + 1) % eval_freq == 0:
        evaluations.append(eval_policy(policy, seed))

print("total_it", policy.total_it, "actor l3", f"{policy.actor.l3.weight.abs().sum().item():.6f}",
      "target l3", f"{policy.actor_target.l3.weight.abs().sum().item():.6f}")
print("critic target l6", f"{policy.critic_target.l6.bias.item():.6f}", f"{policy.critic.l6.bias.item():.6f}")
print("adam step", policy.critic_optimizer.state_dict()["state"][0]["step"].item(),
      policy.actor_optimizer.state_dict()["state"][0]["step"].item())

with tempfile.TemporaryDirectory() as d:
    file_name = os.path.join(d, "TD3_PointMass_0")
    policy.save(file_name)
    p2 = TD3(**kwargs)
    p2.load(file_name)
    print("loaded", all(torch.equal(a, b) for a, b in zip(p2.actor_target.parameters(), policy.actor.parameters())),
          p2.critic_optimizer.state_dict()["param_groups"][0]["lr"], sorted(os.listdir(d)))

# the default target noise: torch.randn_like draws ([rng])
kwargs["noise_clip"] = 0.5 * max_action
p3 = TD3(**kwargs)
for _ in range(4):
    p3.train(replay_buffer, batch_size)
print("noisy critic", f"{p3.critic.l6.bias.item():.6f}")
z = torch.from_numpy(np.random.standard_normal((16, 1)).astype(np.float32))
noise = (z * kwargs["policy_noise"]).clamp(-kwargs["noise_clip"], kwargs["noise_clip"])
print("noise clamp", f"{noise.abs().max().item():.4f}", f"{noise.sum().item():.5f}")

# TD3.train under torch.compile against the same calls run eagerly: two
# calls per round, one with and one without the delayed policy update; the
# replay buffer's numpy draws happen outside (a compiled call would repeat
# the first call's np.random draw), through a buffer that hands out batches
# sampled ahead
class Sampled:
    batch = None

    def sample(self, batch_size):
        return self.batch


kwargs["noise_clip"] = 0.0
policy = TD3(**kwargs)
policy.train(replay_buffer, batch_size)
nets = lambda p: {"actor": p.actor, "actor_target": p.actor_target, "critic": p.critic, "critic_target": p.critic_target}
state = {k: copy.deepcopy(m.state_dict()) for k, m in nets(policy).items()}
opt_state = [copy.deepcopy(policy.actor_optimizer.state_dict()), copy.deepcopy(policy.critic_optimizer.state_dict())]
batches = [replay_buffer.sample(batch_size) for _ in range(5)]
buf = Sampled()
for b in batches:
    buf.batch = b
    policy.train(buf, batch_size)
after = {k: copy.deepcopy(m.state_dict()) for k, m in nets(policy).items()}
for k, m in nets(policy).items():
    m.load_state_dict(state[k])
policy.actor_optimizer.load_state_dict(opt_state[0])
policy.critic_optimizer.load_state_dict(opt_state[1])
policy.total_it = 1
ctrain = torch.compile(policy.train)
for b in batches:
    buf.batch = b
    ctrain(buf, batch_size)
print("compiled total_it", policy.total_it)
print("compiled == eager:", all(torch.allclose(m.state_dict()[k], after[n][k], rtol=1e-4, atol=1e-6)
                                for n, m in nets(policy).items() for k in after[n]))
