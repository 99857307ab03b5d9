# PPO for continuous control the way nikhilbarhate99/PPO-PyTorch's PPO.py
# writes it (has_continuous_action_space=True): RolloutBuffer of Python
# lists cleared with del [:], ActorCritic with an action_var filled by
# torch.full, set_action_std, act() through MultivariateNormal(action_mean,
# torch.diag(action_var).unsqueeze(dim=0)), evaluate() through
# action_var.expand_as(action_mean) and torch.diag_embed, the
# action_dim == 1 reshape, Monte Carlo rewards-to-go with a reversed zip
# loop over is_terminals, (rewards - mean) / (std + 1e-7), K epochs of the
# clipped surrogate on torch.squeeze(torch.stack(buffer.states,
# dim=0)).detach(), nn.MSELoss, the entropy bonus, policy_old synced by
# load_state_dict, decay_action_std with round(), save / load of the
# state_dict with map_location=lambda storage, loc: storage, and the
# train.py loop (time_step counters, update_timestep, action_std decay
# frequency, running episode rewards). Changes for a CPU test: a tiny numpy
# point-mass environment instead of gym, small networks with weights from
# numpy, torch seeded with manual_seed(0) for act()'s sampled action, the
# rollout's actions drawn once from numpy and replayed through evaluate(); then one
# PPO update under torch.compile against the same update eagerly.
import copy
import os
import tempfile

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
from torch.distributions import MultivariateNormal
from torch.distributions import Categorical

################################## set device ##################################
print("============================================================================================")
# set device to cpu or cuda
device = torch.device('cpu')
if(torch.cuda.is_available()):
    device = torch.device('cuda:0')
    torch.cuda.empty_cache()
    print("Device set to : " + str(torch.cuda.get_device_name(device)))
else:
    print("Device set to : cpu")
print("============================================================================================")


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


################################## PPO Policy ##################################
class RolloutBuffer:
    def __init__(self):
        self.actions = []
        self.states = []
        self.logprobs = []
        self.rewards = []
        self.state_values = []
        self.is_terminals = []

    def clear(self):
        del self.actions[:]
        del self.states[:]
        del self.logprobs[:]
        del self.rewards[:]
        del self.state_values[:]
        del self.is_terminals[:]


class ActorCritic(nn.Module):
    def __init__(self, state_dim, action_dim, has_continuous_action_space, action_std_init):
        super(ActorCritic, self).__init__()

        self.has_continuous_action_space = has_continuous_action_space

        if has_continuous_action_space:
            self.action_dim = action_dim
            self.action_var = torch.full((action_dim,), action_std_init * action_std_init).to(device)
        # actor
        if has_continuous_action_space :
            self.actor = nn.Sequential(
                            nn.Linear(state_dim, 64),
                            nn.Tanh(),
                            nn.Linear(64, 64),
                            nn.Tanh(),
                            nn.Linear(64, action_dim),
                            nn.Tanh()
                        )
        else:
            self.actor = nn.Sequential(
                            nn.Linear(state_dim, 64),
                            nn.Tanh(),
                            nn.Linear(64, 64),
                            nn.Tanh(),
                            nn.Linear(64, action_dim),
                            nn.Softmax(dim=-1)
                        )
        # critic
        self.critic = nn.Sequential(
                        nn.Linear(state_dim, 64),
                        nn.Tanh(),
                        nn.Linear(64, 64),
                        nn.Tanh(),
                        nn.Linear(64, 1)
                    )

    def set_action_std(self, new_action_std):
        if self.has_continuous_action_space:
            self.action_var = torch.full((self.action_dim,), new_action_std * new_action_std).to(device)
        else:
            print("--------------------------------------------------------------------------------------------")
            print("WARNING : Calling ActorCritic::set_action_std() on discrete action space policy")
            print("--------------------------------------------------------------------------------------------")

    def forward(self):
        raise NotImplementedError

    def act(self, state):
        if self.has_continuous_action_space:
            action_mean = self.actor(state)
            cov_mat = torch.diag(self.action_var).unsqueeze(dim=0)
            dist = MultivariateNormal(action_mean, cov_mat)
        else:
            action_probs = self.actor(state)
            dist = Categorical(action_probs)

        action = dist.sample()
        action_logprob = dist.log_prob(action)
        state_val = self.critic(state)

        return action.detach(), action_logprob.detach(), state_val.detach()

    def evaluate(self, state, action):

        if self.has_continuous_action_space:
            action_mean = self.actor(state)

            action_var = self.action_var.expand_as(action_mean)
            cov_mat = torch.diag_embed(action_var).to(device)
            dist = MultivariateNormal(action_mean, cov_mat)

            # For Single Action Environments.
            if self.action_dim == 1:
                action = action.reshape(-1, self.action_dim)
        else:
            action_probs = self.actor(state)
            dist = Categorical(action_probs)
        action_logprobs = dist.log_prob(action)
        dist_entropy = dist.entropy()
        state_values = self.critic(state)

        return action_logprobs, state_values, dist_entropy


class PPO:
    def __init__(self, state_dim, action_dim, lr_actor, lr_critic, gamma, K_epochs, eps_clip, has_continuous_action_space, action_std_init=0.6):

        self.has_continuous_action_space = has_continuous_action_space

        if has_continuous_action_space:
            self.action_std = action_std_init

        self.gamma = gamma
        self.eps_clip = eps_clip
        self.K_epochs = K_epochs

        self.buffer = RolloutBuffer()

        self.policy = ActorCritic(state_dim, action_dim, has_continuous_action_space, action_std_init).to(device)
        self.optimizer = torch.optim.Adam([
                        {'params': self.policy.actor.parameters(), 'lr': lr_actor},
                        {'params': self.policy.critic.parameters(), 'lr': lr_critic}
                    ])

        self.policy_old = ActorCritic(state_dim, action_dim, has_continuous_action_space, action_std_init).to(device)
        self.policy_old.load_state_dict(self.policy.state_dict())

        self.MseLoss = nn.MSELoss()

    def set_action_std(self, new_action_std):
        if self.has_continuous_action_space:
            self.action_std = new_action_std
            self.policy.set_action_std(new_action_std)
            self.policy_old.set_action_std(new_action_std)
        else:
            print("--------------------------------------------------------------------------------------------")
            print("WARNING : Calling PPO::set_action_std() on discrete action space policy")
            print("--------------------------------------------------------------------------------------------")

    def decay_action_std(self, action_std_decay_rate, min_action_std):
        print("--------------------------------------------------------------------------------------------")
        if self.has_continuous_action_space:
            self.action_std = self.action_std - action_std_decay_rate
            self.action_std = round(self.action_std, 4)
            if (self.action_std <= min_action_std):
                self.action_std = min_action_std
                print("setting actor output action_std to min_action_std : ", self.action_std)
            else:
                print("setting actor output action_std to : ", self.action_std)
            self.set_action_std(self.action_std)

        else:
            print("WARNING : Calling PPO::decay_action_std() on discrete action space policy")
        print("--------------------------------------------------------------------------------------------")

    def select_action(self, state):

        if self.has_continuous_action_space:
            with torch.no_grad():
                state = torch.FloatTensor(state).to(device)
                action, action_logprob, state_val = self.policy_old.act(state)

            self.buffer.states.append(state)
            self.buffer.actions.append(action)
            self.buffer.logprobs.append(action_logprob)
            self.buffer.state_values.append(state_val)

            return action.detach().cpu().numpy().flatten()
        else:
            with torch.no_grad():
                state = torch.FloatTensor(state).to(device)
                action, action_logprob, state_val = self.policy_old.act(state)

            self.buffer.states.append(state)
            self.buffer.actions.append(action)
            self.buffer.logprobs.append(action_logprob)
            self.buffer.state_values.append(state_val)

            return action.item()

    def update(self):
        # Monte Carlo estimate of returns
        rewards = []
        discounted_reward = 0
        for reward, is_terminal in zip(reversed(self.buffer.rewards), reversed(self.buffer.is_terminals)):
            if is_terminal:
                discounted_reward = 0
            discounted_reward = reward + (self.gamma * discounted_reward)
            rewards.insert(0, discounted_reward)

        # Normalizing the rewards
        rewards = torch.tensor(rewards, dtype=torch.float32).to(device)
        rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-7)

        # convert list to tensor
        old_states = torch.squeeze(torch.stack(self.buffer.states, dim=0)).detach().to(device)
        old_actions = torch.squeeze(torch.stack(self.buffer.actions, dim=0)).detach().to(device)
        old_logprobs = torch.squeeze(torch.stack(self.buffer.logprobs, dim=0)).detach().to(device)
        old_state_values = torch.squeeze(torch.stack(self.buffer.state_values, dim=0)).detach().to(device)

        # calculate advantages
        advantages = rewards.detach() - old_state_values.detach()

        # Optimize policy for K epochs
        for _ in range(self.K_epochs):

            # Evaluating old actions and values
            logprobs, state_values, dist_entropy = self.policy.evaluate(old_states, old_actions)

            # match state_values tensor dimensions with rewards tensor
            state_values = torch.squeeze(state_values)

            # Finding the ratio (pi_theta / pi_theta__old)
            ratios = torch.exp(logprobs - old_logprobs.detach())

            # Finding Surrogate Loss
            surr1 = ratios * advantages
            surr2 = torch.clamp(ratios, 1-self.eps_clip, 1+self.eps_clip) * advantages

            # final loss of clipped objective PPO
            loss = -torch.min(surr1, surr2) + 0.5 * self.MseLoss(state_values, rewards) - 0.01 * dist_entropy

            # take gradient step
            self.optimizer.zero_grad()
            loss.mean().backward()
            self.optimizer.step()

        # Copy new weights into old policy
        self.policy_old.load_state_dict(self.policy.state_dict())

        # clear buffer
        self.buffer.clear()
        return loss.mean()

    def save(self, checkpoint_path):
        torch.save(self.policy_old.state_dict(), checkpoint_path)

    def load(self, checkpoint_path):
        self.policy_old.load_state_dict(torch.load(checkpoint_path, map_location=lambda storage, loc: storage))
        self.policy.load_state_dict(torch.load(checkpoint_path, map_location=lambda storage, loc: storage))


class PointMass:
    """2-D point mass pushed by a continuous 2-D action; reward: minus the
    distance to the origin; episodes of 10 steps."""

    def __init__(self):
        self.rng = np.random.default_rng(5)

    def reset(self):
        self.pos = self.rng.uniform(-1, 1, 2)
        self.vel = np.zeros(2)
        self.t = 0
        return np.concatenate([self.pos, self.vel]).astype(np.float32)

    def step(self, action):
        a = np.clip(action, -1, 1)
        self.vel = 0.8 * self.vel + 0.1 * a
        self.pos = self.pos + self.vel
        self.t += 1
        reward = -float(np.linalg.norm(self.pos))
        done = self.t >= 10
        return np.concatenate([self.pos, self.vel]).astype(np.float32), reward, done, {}


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


env = PointMass()
state_dim, action_dim = 4, 2
max_ep_len = 10
max_training_timesteps = 60
update_timestep = max_ep_len * 2
K_epochs = 4
eps_clip = 0.2
gamma = 0.99
lr_actor = 0.0003
lr_critic = 0.001
action_std = 0.6
action_std_decay_rate = 0.05
min_action_std = 0.5
action_std_decay_freq = 30

ppo_agent = PPO(state_dim, action_dim, lr_actor, lr_critic, gamma, K_epochs, eps_clip, True, action_std)
load_numpy(ppo_agent.policy, np.random.default_rng(0))
ppo_agent.policy_old.load_state_dict(ppo_agent.policy.state_dict())
print("action_var", fmt(ppo_agent.policy.action_var, 2), [g['lr'] for g in ppo_agent.optimizer.param_groups])

# act(): the distribution's shapes and the sampled action
with torch.no_grad():
    s0 = torch.FloatTensor(env.reset())
    a0, lp0, v0 = ppo_agent.policy_old.act(s0)
    mean0 = ppo_agent.policy_old.actor(s0)
    d0 = MultivariateNormal(mean0, torch.diag(ppo_agent.policy_old.action_var).unsqueeze(dim=0))
print("act", tuple(a0.shape), tuple(lp0.shape), tuple(v0.shape), tuple(d0.batch_shape), tuple(d0.event_shape),
      fmt(a0, 2))
print("log_prob agrees", torch.allclose(d0.log_prob(a0), lp0), f"{d0.entropy().item():.5f}",
      fmt(d0.covariance_matrix, 4), fmt(d0.scale_tril, 4))

# the rollout: the actions come from numpy and their log-probs from evaluate()
ra = np.random.default_rng(7)
time_step = 0
i_episode = 0
print_running_reward = 0
print_running_episodes = 0
losses = []
while time_step <= max_training_timesteps:

    state = env.reset()
    current_ep_reward = 0

    for t in range(1, max_ep_len + 1):

        # select action with policy
        with torch.no_grad():
            st = torch.FloatTensor(state).to(device)
            mean = ppo_agent.policy_old.actor(st)
            action_t = mean + ppo_agent.action_std * torch.from_numpy(ra.normal(size=action_dim).astype(np.float32))
            logprob, state_val, _ = ppo_agent.policy_old.evaluate(st, action_t)
        ppo_agent.buffer.states.append(st)
        ppo_agent.buffer.actions.append(action_t)
        ppo_agent.buffer.logprobs.append(logprob)
        ppo_agent.buffer.state_values.append(state_val)
        action = action_t.detach().cpu().numpy().flatten()
        state, reward, done, _ = env.step(action)

        # saving reward and is_terminals
        ppo_agent.buffer.rewards.append(reward)
        ppo_agent.buffer.is_terminals.append(done)

        time_step += 1
        current_ep_reward += reward

        # update PPO agent
        if time_step % update_timestep == 0:
            losses.append(ppo_agent.update().item())

        # if continuous action space; then decay action std of ouput action distribution
        if time_step % action_std_decay_freq == 0:
            ppo_agent.decay_action_std(action_std_decay_rate, min_action_std)

        # break; if the episode is over
        if done:
            break

    print_running_reward += current_ep_reward
    print_running_episodes += 1

    i_episode += 1

print("Episode : {} \t\t Timestep : {} \t\t Average Reward : {}".format(
    i_episode, time_step, round(print_running_reward / print_running_episodes, 2)))
print("losses", [f"{v:.5f}" for v in losses], len(ppo_agent.buffer.states), ppo_agent.action_std)
print("policy_old synced", all(torch.equal(a, b) for a, b in zip(ppo_agent.policy.parameters(),
                                                                  ppo_agent.policy_old.parameters())))

# save / load with map_location
with tempfile.TemporaryDirectory() as d:
    checkpoint_path = os.path.join(d, "PPO_PointMass_0_0.pth")
    ppo_agent.save(checkpoint_path)
    agent2 = PPO(state_dim, action_dim, lr_actor, lr_critic, gamma, K_epochs, eps_clip, True, action_std)
    agent2.load(checkpoint_path)
    sd = torch.load(checkpoint_path, map_location=lambda storage, loc: storage)
print("loaded", list(sd.keys())[:3], len(sd), all(torch.equal(a, b) for a, b in zip(agent2.policy.parameters(),
                                                                                    ppo_agent.policy_old.parameters())))

# a single action dimension (the action_dim == 1 reshape) and the discrete head
ac1 = ActorCritic(4, 1, True, 0.5)
load_numpy(ac1, np.random.default_rng(2))
st = torch.from_numpy(np.random.default_rng(3).normal(size=(6, 4)).astype(np.float32))
acts = torch.from_numpy(np.random.default_rng(4).normal(size=(6,)).astype(np.float32))
lp1, sv1, ent1 = ac1.evaluate(st, acts)
print("1-d", tuple(lp1.shape), tuple(sv1.shape), fmt(lp1, 4), f"{ent1[0].item():.5f}")
acd = ActorCritic(4, 3, False, 0.5)
load_numpy(acd, np.random.default_rng(5))
lpd, svd, entd = acd.evaluate(st, torch.tensor([0, 1, 2, 2, 1, 0]))
print("discrete", fmt(lpd, 4), fmt(entd, 2))
acd.set_action_std(0.3)


# one PPO update under torch.compile against the same update eagerly
old_states, old_actions = st, torch.from_numpy(np.random.default_rng(6).normal(size=(6, 2)).astype(np.float32))
with torch.no_grad():
    old_logprobs, old_vals, _ = ppo_agent.policy_old.evaluate(old_states, old_actions)
rewards = torch.from_numpy(np.random.default_rng(8).normal(size=6).astype(np.float32))
advantages = rewards - old_vals.squeeze()


def ppo_step(old_states, old_actions, old_logprobs, rewards, advantages):
    logprobs, state_values, dist_entropy = ppo_agent.policy.evaluate(old_states, old_actions)
    state_values = torch.squeeze(state_values)
    ratios = torch.exp(logprobs - old_logprobs.detach())
    surr1 = ratios * advantages
    surr2 = torch.clamp(ratios, 1 - eps_clip, 1 + eps_clip) * advantages
    loss = -torch.min(surr1, surr2) + 0.5 * ppo_agent.MseLoss(state_values, rewards) - 0.01 * dist_entropy
    ppo_agent.optimizer.zero_grad()
    loss.mean().backward()
    ppo_agent.optimizer.step()
    return loss.mean()


args = (old_states, old_actions, old_logprobs, rewards, advantages)
p0, o0 = copy.deepcopy(ppo_agent.policy.state_dict()), copy.deepcopy(ppo_agent.optimizer.state_dict())
eager = [ppo_step(*args).item() for _ in range(2)]
after = {k: v.clone() for k, v in ppo_agent.policy.state_dict().items()}
ppo_agent.policy.load_state_dict(p0)
ppo_agent.optimizer.load_state_dict(o0)
cstep = torch.compile(ppo_step)
compiled = [cstep(*args).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(ppo_agent.policy.state_dict()[k], after[k], rtol=1e-4, atol=1e-6) for k in after))
