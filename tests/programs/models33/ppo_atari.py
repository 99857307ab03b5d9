# PPO on Atari-style observations the way vwxyzjn/cleanrl's ppo_atari.py
# writes it: args with torch_deterministic / cuda flags,
# torch.backends.cudnn.deterministic, torch.device("cuda" if
# torch.cuda.is_available() and args.cuda else "cpu"), layer_init
# (torch.nn.init.orthogonal_(layer.weight, std) and
# torch.nn.init.constant_(layer.bias, bias_const)), the Nature-CNN Agent
# (x / 255.0, Conv2d / ReLU / Flatten / Linear, actor std 0.01, critic std 1),
# Categorical(logits=logits) sample / log_prob / entropy, rollout storage
# torch.zeros((num_steps, num_envs) + obs_shape), the lr annealing into
# optimizer.param_groups[0]["lr"], the GAE loop with nextnonterminal, the
# flattened batch, b_inds = np.arange(batch_size); np.random.shuffle(b_inds)
# minibatches, logratio.exp(), old_approx_kl / approx_kl under
# torch.no_grad, clipfracs via .float().mean().item(), advantage
# normalization, the clipped policy and value losses, clip_grad_norm_,
# Adam(eps=1e-5), and explained variance in numpy.  Changes for a CPU test:
# a tiny numpy vector env (4 envs, 8x8x4 uint8 frames) instead of gym's
# Atari envs, the CNN scaled down (Conv2d(4, 8, 4, stride=2) ...), weights
# re-drawn from numpy after layer_init (orthogonal_ draws from torch's
# generator: its checks print [rng]), actions from numpy draws through the
# Categorical's probabilities (the torch sample is [rng]), 2 updates of
# 8 steps; then one minibatch step under torch.compile against eager.
import argparse
import copy
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--torch-deterministic", type=lambda x: bool(x), default=True, nargs="?", const=True)
    parser.add_argument("--cuda", type=lambda x: bool(x), default=True, nargs="?", const=True)
    parser.add_argument("--total-timesteps", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2.5e-4)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=8)
    parser.add_argument("--anneal-lr", type=lambda x: bool(x), default=True, nargs="?", const=True)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--gae-lambda", type=float, default=0.95)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--update-epochs", type=int, default=2)
    parser.add_argument("--norm-adv", type=lambda x: bool(x), default=True, nargs="?", const=True)
    parser.add_argument("--clip-coef", type=float, default=0.1)
    parser.add_argument("--clip-vloss", type=lambda x: bool(x), default=True, nargs="?", const=True)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument("--vf-coef", type=float, default=0.5)
    parser.add_argument("--max-grad-norm", type=float, default=0.5)
    parser.add_argument("--target-kl", type=float, default=0.5)
    args = parser.parse_args([])
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    return args


class TinyVecEnv:
    """4 envs of 8x8x4 uint8 frames: a bright dot drifts; action 1 moves it
    toward the center (reward 1 when there), episodes end after 5 steps."""

    def __init__(self, num_envs, seed):
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)
        self.single_observation_space_shape = (4, 8, 8)
        self.single_action_space_n = 3
        self.pos = self.rng.integers(0, 8, size=(num_envs, 2))
        self.t = np.zeros(num_envs, dtype=np.int64)

    def _obs(self):
        obs = self.rng.integers(0, 40, size=(self.num_envs,) + self.single_observation_space_shape).astype(np.uint8)
        for i, (r, c) in enumerate(self.pos):
            obs[i, :, r, c] = 255
        return obs

    def reset(self):
        return self._obs()

    def step(self, action):
        move = np.where(action[:, None] == 1, -np.sign(self.pos - 4), self.rng.integers(-1, 2, size=self.pos.shape))
        move = np.where(action[:, None] == 2, 0, move)
        self.pos = np.clip(self.pos + move, 0, 7)
        reward = (np.abs(self.pos - 4).sum(1) <= 1).astype(np.float32)
        self.t += 1
        done = self.t >= 5
        self.pos[done] = self.rng.integers(0, 8, size=(int(done.sum()), 2))
        self.t[done] = 0
        return self._obs(), reward, done, [{} for _ in range(self.num_envs)]


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 8, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(8, 16, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(16 * 1 * 1, 32)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(32, envs.single_action_space_n), std=0.01)
        self.critic = layer_init(nn.Linear(32, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in torch.as_tensor(t).reshape(-1)[:n].tolist()]


if __name__ == "__main__":
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    print("device", device, "deterministic", torch.backends.cudnn.deterministic)

    envs = TinyVecEnv(args.num_envs, args.seed)
    agent = Agent(envs).to(device)

    # layer_init's orthogonal weights: rows orthonormal up to std
    w = agent.network[5].weight.detach()
    print("[rng] orthogonal", bool(torch.allclose(w.t() @ w, 2 * torch.eye(16), atol=1e-4)),
          bool(torch.allclose(agent.actor.weight @ agent.actor.weight.t(), 1e-4 * torch.eye(3), atol=1e-7)))
    print("biases", agent.critic.bias.tolist(), float(agent.network[0].bias.detach().abs().sum()))
    q = torch.empty(3, 5)
    torch.nn.init.orthogonal_(q, gain=0.5)
    print("[rng] orthogonal wide", bool(torch.allclose(q @ q.t(), 0.25 * torch.eye(3), atol=1e-5)))
    conv = torch.empty(6, 2, 3, 3)
    torch.nn.init.orthogonal_(conv)
    flat = conv.reshape(6, -1)
    print("[rng] orthogonal conv", tuple(conv.shape), bool(torch.allclose(flat @ flat.t(), torch.eye(6), atol=1e-5)))

    wr = np.random.default_rng(7)
    with torch.no_grad():
        for name, p in agent.named_parameters():
            scale = 0.01 if name.startswith("actor") else 0.3
            p.copy_(torch.from_numpy(wr.normal(0, scale, tuple(p.shape)).astype(np.float32)))
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs_shape = envs.single_observation_space_shape
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + ()).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    print("storage", tuple(obs.shape), obs.dtype, tuple(actions.shape))

    global_step = 0
    start_time = time.time()
    next_obs = torch.Tensor(envs.reset()).to(device)
    next_done = torch.zeros(args.num_envs).to(device)
    num_updates = args.total_timesteps // args.batch_size
    print("next_obs", next_obs.dtype, tuple(next_obs.shape), float(next_obs.max()))
    act_rng = np.random.default_rng(3)

    for update in range(1, num_updates + 1):
        if args.anneal_lr:
            frac = 1.0 - (update - 1.0) / num_updates
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(0, args.num_steps):
            global_step += 1 * args.num_envs
            obs[step] = next_obs
            dones[step] = next_done

            with torch.no_grad():
                sampled, _, _, _ = agent.get_action_and_value(next_obs)
                hidden = agent.network(next_obs / 255.0)
                p = Categorical(logits=agent.actor(hidden)).probs.numpy().astype(np.float64)
                u = act_rng.random((args.num_envs, 1))
                action = torch.from_numpy((u > np.cumsum(p, 1)).sum(1).clip(0, 2))
                action, logprob, _, value = agent.get_action_and_value(next_obs, action)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            if step == 0:
                print("sample", sampled.dtype, tuple(sampled.shape), bool(((sampled >= 0) & (sampled < 3)).all()))

            next_obs, reward, done, info = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = torch.Tensor(next_obs).to(device), torch.Tensor(done).to(device)

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values
        print("update", update, "lr", f"{optimizer.param_groups[0]['lr']:.6f}", "rewards", rewards.sum().item(),
              "adv", fmt(advantages[0]), "ret", fmt(returns[-1]))

        # flatten the batch
        b_obs = obs.reshape((-1,) + obs_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + ())
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # Optimizing the policy and value network
        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                    v_loss = 0.5 * v_loss_max.mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                gn = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None:
                if approx_kl > args.target_kl:
                    break
            print("  epoch", epoch, "inds", b_inds[:4].tolist(), "loss", f"{loss.item():.5f}", "pg", f"{pg_loss.item():.5f}",
                  "v", f"{v_loss.item():.5f}", "ent", f"{entropy_loss.item():.5f}", "gn", f"{gn.item():.4f}")

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        print("  charts", f"{optimizer.param_groups[0]['lr']:.6f}", f"{old_approx_kl.item():.6f}",
              f"{approx_kl.item():.6f}", f"{np.mean(clipfracs):.4f}", f"{explained_var:.4f}", global_step)
        print("SPS", int(global_step / max(time.time() - start_time, 1e-9)) > 0)

    print("critic", fmt(agent.critic.weight), "actor", fmt(agent.actor.weight), "step",
          optimizer.state_dict()["state"][0]["step"].item())

    # one minibatch step under torch.compile against the same step eagerly
    def minibatch_step(mb_obs, mb_actions, mb_logprobs, mb_advantages, mb_returns, mb_values):
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb_obs, mb_actions)
        logratio = newlogprob - mb_logprobs
        ratio = logratio.exp()
        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
        pg_loss = torch.max(-mb_advantages * ratio, -mb_advantages * torch.clamp(ratio, 0.9, 1.1)).mean()
        newvalue = newvalue.view(-1)
        v_clipped = mb_values + torch.clamp(newvalue - mb_values, -0.1, 0.1)
        v_loss = 0.5 * torch.max((newvalue - mb_returns) ** 2, (v_clipped - mb_returns) ** 2).mean()
        loss = pg_loss - 0.01 * entropy.mean() + v_loss * 0.5
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        optimizer.step()
        return loss

    mb = np.arange(8)
    batch = (b_obs[mb], b_actions.long()[mb], b_logprobs[mb], b_advantages[mb], b_returns[mb], b_values[mb])
    state, opt_state = copy.deepcopy(agent.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [minibatch_step(*batch).item() for _ in range(2)]
    after = {k: v.clone() for k, v in agent.state_dict().items()}
    agent.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(minibatch_step)
    compiled = [cstep(*batch).item() for _ in range(2)]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(agent.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
