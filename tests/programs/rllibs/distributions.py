"""SB3's action distributions on their own (stable_baselines3.common.
distributions, as its tests use them): make_proba_distribution for each
action space, log_prob / entropy / sample / mode, the params helpers,
kl_divergence, the squashed Gaussian's TanhBijector (its log-prob with and
without the pre-squash actions, at the bounds too), and gSDE's
StateDependentNoiseDistribution (sample_weights, get_std with expln,
learned features, batched noise); gradients through log_prob as well."""
import random

import numpy as np
import torch as th
from gymnasium import spaces

from stable_baselines3.common.distributions import (
    DiagGaussianDistribution, SquashedDiagGaussianDistribution, StateDependentNoiseDistribution,
    TanhBijector, kl_divergence, make_proba_distribution)


def fmt(t):
    return [f"{x:.5f}" for x in np.asarray(t.detach(), dtype=np.float64).ravel().tolist()]


random.seed(0)
th.manual_seed(0)
N, LATENT = 5, 6
latent = th.randn(N, LATENT)

for space in (spaces.Discrete(4), spaces.MultiDiscrete([3, 2, 4]), spaces.MultiBinary(3),
              spaces.Box(-1, 1, (2,))):
    dist = make_proba_distribution(space)
    print(type(space).__name__, type(dist).__name__)
    net = dist.proba_distribution_net(LATENT) if not isinstance(dist, DiagGaussianDistribution) \
        else dist.proba_distribution_net(LATENT, log_std_init=-0.5)
    if isinstance(net, tuple):
        net, log_std = net
        d = dist.proba_distribution(net(latent), log_std)
    else:
        d = dist.proba_distribution(net(latent))
    th.manual_seed(1)
    sample = d.sample()
    lp = d.log_prob(sample)
    print("  sample", fmt(sample))
    print("  mode", fmt(d.mode()), "log_prob", fmt(lp))
    print("  entropy", fmt(d.entropy()))
    lp.sum().backward()
    print("  grad", f"{sum(p.grad.abs().sum().item() for p in net.parameters()):.5f}")
    th.manual_seed(2)
    if isinstance(net, th.nn.Linear) and isinstance(dist, DiagGaussianDistribution):
        acts, logp = dist.log_prob_from_params(net(latent), log_std)
    else:
        acts, logp = dist.log_prob_from_params(net(latent))
    print("  from params", fmt(acts), fmt(logp))
    other = type(dist)(*(([space.n] if isinstance(space, spaces.Discrete) else
                          [list(space.nvec)] if isinstance(space, spaces.MultiDiscrete) else
                          [space.n] if isinstance(space, spaces.MultiBinary) else [2])))
    if isinstance(other, DiagGaussianDistribution):
        other.proba_distribution(net(latent).detach() * 0.5, log_std.detach() + 0.1)
    else:
        other.proba_distribution(net(latent).detach() * 0.5)
    print("  kl", fmt(kl_divergence(d, other)))

# the squashed Gaussian (SAC's): tanh and its log-det correction
dist = SquashedDiagGaussianDistribution(2)
mean = th.randn(N, 2, requires_grad=True)
log_std = th.full((N, 2), -0.3, requires_grad=True)
th.manual_seed(3)
actions, logp = dist.log_prob_from_params(mean, log_std)
print("squashed", fmt(actions), fmt(logp))
print("squashed again", fmt(dist.log_prob(actions)))   # via TanhBijector.inverse
(logp.sum() + actions.pow(2).sum()).backward()
print("squashed grads", fmt(mean.grad), fmt(log_std.grad))
edge = th.tensor([[-1.0, 1.0], [0.999999, -0.9999999], [0.0, 0.5]])
print("inverse", fmt(TanhBijector.inverse(edge)), fmt(TanhBijector.atanh(edge * 0.5)))
print("correction", fmt(TanhBijector(1e-6).log_prob_correction(th.tensor([[0.0, 3.0, -20.0]]))))
print("squashed mode / entropy", fmt(dist.mode()), dist.entropy())

# gSDE
for full_std, use_expln, learn_features, squash in ((True, False, False, False),
                                                     (False, True, True, True)):
    th.manual_seed(4)
    dist = StateDependentNoiseDistribution(2, full_std=full_std, use_expln=use_expln,
                                           learn_features=learn_features, squash_output=squash)
    mean_net, log_std = dist.proba_distribution_net(LATENT, log_std_init=-1.0)
    log_std.data += th.linspace(-1, 1, log_std.numel()).reshape(log_std.shape)
    print("gsde", full_std, use_expln, tuple(log_std.shape), fmt(dist.get_std(log_std)))
    dist.sample_weights(log_std, batch_size=N)
    print("  exploration mat", tuple(dist.exploration_matrices.shape),
          f"{dist.exploration_mat.sum().item():.5f}", f"{dist.exploration_matrices.sum().item():.5f}")
    d = dist.proba_distribution(mean_net(latent), log_std, latent)
    noise = dist.get_noise(latent)
    actions = d.sample()
    print("  noise", fmt(noise))
    print("  actions", fmt(actions), "log_prob", fmt(d.log_prob(actions)))
    print("  mode", fmt(d.mode()), "entropy", None if d.entropy() is None else fmt(d.entropy()))
    d.log_prob(actions.detach()).sum().backward()
    print("  grads", f"{log_std.grad.abs().sum().item():.5f}",
          f"{mean_net.weight.grad.abs().sum().item():.5f}")
    dist.sample_weights(log_std)
    print("  single noise", fmt(dist.get_noise(latent[:2])))
