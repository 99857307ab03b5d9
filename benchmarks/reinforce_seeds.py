"""REINFORCE on a hand-written CartPole, per seed, with tracec and with torch.

The policy and the training loop follow PyTorch's public
``examples/reinforcement_learning/reinforce.py`` (Linear 4->128, Dropout 0.6,
ReLU, Linear 128->2, softmax; ``Categorical(probs).sample()``; Adam lr 1e-2;
gamma 0.99; returns normalized with float32 eps).  CartPole is gym's
``cartpole.py`` dynamics (Euler, tau 0.02), reset uniformly in +-0.05 from a
NumPy generator seeded with the run's seed, so both libraries see the same
initial states and differ only in their own random numbers.

Slow (10-60 s per seed with tracec): a benchmark, not a test.  One JSON line
per seed: episodes run, solved (running reward above --threshold within
--episodes), the running reward reached.

    python benchmarks/reinforce_seeds.py --lib tracec --seeds 543 1 2 3
    python benchmarks/reinforce_seeds.py --lib torch
    python benchmarks/reinforce_seeds.py --lib tracec --actions numpy  # NumPy picks actions
    python benchmarks/reinforce_seeds.py --lib tracec --bits numpy     # NumPy bits everywhere
    python benchmarks/reinforce_seeds.py --lockstep --seeds 543        # same bits, both libs

The script's episodes stop at --max-steps (500, CartPole-v1's limit); the
public script ignores gym's truncation flag and would run on.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from collections import deque

import numpy as np


class CartPole:
    """gym's CartPole-v1 dynamics; ``step`` returns (state, reward, terminated)."""
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.state = None

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=(4,))
        return self.state.astype(np.float32)

    def step(self, action: int):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + polemass_length * theta_dot ** 2 * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold or theta > self.theta_threshold)
        return self.state.astype(np.float32), 1.0, terminated


def run_seed(torch, seed: int, episodes: int, threshold: float, max_steps: int,
             actions: str, gamma: float = 0.99) -> dict:
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Categorical = torch.distributions.Categorical

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
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

    env = CartPole(seed)
    torch.manual_seed(seed)
    action_rng = np.random.default_rng(seed + 10_000)
    policy = Policy()
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        if actions == "numpy":
            # The same inverse CDF as the library's sampler, on NumPy's draws.
            action = torch.tensor([int(action_rng.random() >= probs[0, 0].item())])
        else:
            action = m.sample()
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = deque()
        for r in policy.rewards[::-1]:
            R = r + gamma * R
            returns.appendleft(R)
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

    running_reward = 10.0
    lengths = []
    t0 = time.time()
    for _ in range(episodes):
        state, ep_reward = env.reset(), 0.0
        for _t in range(max_steps):
            action = select_action(state)
            state, reward, done = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        lengths.append(int(ep_reward))
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode()
        if running_reward > threshold:
            break
    return {"seed": seed, "episodes": len(lengths), "solved": running_reward > threshold,
            "running_reward": round(running_reward, 1),
            "best_len": max(lengths), "last10_mean": round(float(np.mean(lengths[-10:])), 1),
            "seconds": round(time.time() - t0, 1)}


def lockstep(seed: int, episodes: int, max_steps: int, gamma: float = 0.99) -> dict:
    """torch and tracec side by side from torch's initial weights, fed the
    same random numbers (NumPy's dropout masks and action draws): any
    difference left in their learning comes from the libraries' arithmetic.
    Returns how many episodes the two made the same actions, and the largest
    weight difference then."""
    import torch
    import tracec
    libs = {"torch": torch, "tracec": tracec}
    torch.manual_seed(seed)
    t_net = [torch.nn.Linear(4, 128), torch.nn.Linear(128, 2)]
    c_net = [tracec.nn.Linear(4, 128), tracec.nn.Linear(128, 2)]
    for t, c in zip(t_net, c_net):
        c.load_state_dict({k: tracec.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    nets = {"torch": t_net, "tracec": c_net}
    opts = {k: libs[k].optim.Adam([p for m in nets[k] for p in m.parameters()], lr=1e-2)
            for k in libs}
    env, rng = CartPole(seed), np.random.default_rng(seed + 30_000)
    eps = np.finfo(np.float32).eps.item()
    same_episodes, lengths = 0, []
    for _ in range(episodes):
        state, log_probs, rewards, diverged = env.reset(), {k: [] for k in libs}, [], False
        for _t in range(max_steps):
            mask = (rng.random((1, 128)) < 0.4).astype(np.float32) / np.float32(0.4)
            u = rng.random()
            acts = {}
            for k, lib in libs.items():
                a1, a2 = nets[k]
                x = lib.from_numpy(state).float().unsqueeze(0)
                probs = lib.nn.functional.softmax(
                    a2(lib.nn.functional.relu(a1(x) * lib.from_numpy(mask))), dim=1)
                m = lib.distributions.Categorical(probs)
                acts[k] = int(u >= float(probs[0, 0].detach()))
                log_probs[k].append(m.log_prob(lib.tensor([acts[k]])))
            diverged |= acts["torch"] != acts["tracec"]
            state, reward, done = env.step(acts["torch"])
            rewards.append(reward)
            if done:
                break
        lengths.append(len(rewards))
        for k, lib in libs.items():
            R, returns = 0, deque()
            for r in rewards[::-1]:
                R = r + gamma * R
                returns.appendleft(R)
            returns = lib.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)
            loss = lib.cat([-lp * R for lp, R in zip(log_probs[k], returns)]).sum()
            opts[k].zero_grad()
            loss.backward()
            opts[k].step()
        if diverged:
            break
        same_episodes += 1
    diff = max(float(np.abs(t.weight.detach().numpy() - c.weight.detach().numpy()).max())
               for t, c in zip(t_net, c_net))
    return {"seed": seed, "same_action_episodes": same_episodes,
            "steps_in_those": int(sum(lengths[:same_episodes])),
            "max_len": max(lengths), "max_weight_diff": diff}


def _numpy_bits(tracec, seed: int) -> None:
    """Make every tracec draw (init, dropout, sampling) come from NumPy."""
    from tracec.creation import Generator
    from tracec.tensor import Tensor
    rng = np.random.default_rng(seed + 20_000)

    def uniform(self, shape, dtype):
        n = math.prod(shape)
        u = rng.integers(0, 1 << 24, size=n) * (1.0 / (1 << 24))
        return Tensor._make(u.astype(dtype.np).reshape(shape), dtype)

    Generator.uniform = uniform


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", choices=["tracec", "torch"], default="tracec")
    ap.add_argument("--seeds", type=int, nargs="*", default=[543, 1, 2, 3, 4, 5, 6, 7])
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=195.0)
    ap.add_argument("--max-steps", type=int, default=500)
    ap.add_argument("--actions", choices=["library", "numpy"], default="library",
                    help="draw actions with the library's Categorical.sample or NumPy")
    ap.add_argument("--bits", choices=["library", "numpy"], default="library",
                    help="tracec only: numpy replaces the bits of tracec's generator by "
                         "NumPy's PCG64 (24-bit uniforms, as tracec's float32 draws), "
                         "everything else unchanged")
    ap.add_argument("--lockstep", action="store_true",
                    help="run torch and tracec side by side on the same random numbers")
    ap.add_argument("--json", help="append one JSON line per seed to this file")
    args = ap.parse_args(argv)
    if args.lockstep:
        for seed in args.seeds:
            print(json.dumps(lockstep(seed, args.episodes, args.max_steps)), flush=True)
        return 0
    torch = importlib.import_module(args.lib)
    if args.lib == "torch":
        torch.set_num_threads(1)
    for seed in args.seeds:
        if args.bits == "numpy":
            _numpy_bits(torch, seed)
        res = run_seed(torch, seed, args.episodes, args.threshold, args.max_steps, args.actions)
        res.update(lib=args.lib, actions=args.actions, bits=args.bits)
        line = json.dumps(res)
        print(line, flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
