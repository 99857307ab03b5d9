# Hamiltonian Monte Carlo for a Bayesian neural model in the style of
# hamiltorch (https://github.com/AdamCobb/hamiltorch, hamiltorch/samplers.py
# and util.py): the model's parameters flattened into one vector
# (torch.cat of p.flatten(), unflattened by slicing and view_as), the log
# probability through torch.func.functional_call with a Normal prior
# (tau * ||w||^2 / 2) and a Bernoulli likelihood
# (-F.binary_cross_entropy_with_logits(..., reduction='sum')), gradients by
# torch.autograd.grad, the leapfrog integrator (half momentum steps, a
# momentum Normal(0, 1) draw per sample), the Hamiltonian with the kinetic
# energy 0.5 * p.dot(p), Metropolis acceptance
# torch.log(torch.rand(1)) < H_old - H_new, and the posterior predictive
# averaged over samples. Written for this test: 40 points of 2-D data
# (numpy), an MLP with one hidden layer of 6, 30 samples of 8 leapfrog
# steps; one compiled leapfrog trajectory against eager.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 6)
        self.fc2 = nn.Linear(6, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x))).squeeze(-1)


def flatten(model):
    return torch.cat([p.flatten() for p in model.parameters()])


def unflatten(model, flattened_params):
    if flattened_params.dim() != 1:
        raise ValueError('Expecting a 1d flattened_params')
    params_list = {}
    i = 0
    for name, val in model.named_parameters():
        length = val.nelement()
        params_list[name] = flattened_params[i:i + length].view_as(val)
        i += length
    return params_list


def log_prob_func(params, model, x, y, tau=1.0):
    logits = functional_call(model, unflatten(model, params), (x,))
    ll = -F.binary_cross_entropy_with_logits(logits, y, reduction='sum')
    prior = -0.5 * tau * (params ** 2).sum()
    return ll + prior


def params_grad(p, model, x, y):
    p = p.detach().requires_grad_()
    log_prob = log_prob_func(p, model, x, y)
    return torch.autograd.grad(log_prob, p)[0]


def leapfrog(params, momentum, model, x, y, steps=8, step_size=0.1):
    params = params.clone()
    momentum = momentum.clone()
    momentum = momentum + 0.5 * step_size * params_grad(params, model, x, y)
    for n in range(steps):
        params = params + step_size * momentum
        if n < steps - 1:
            momentum = momentum + step_size * params_grad(params, model, x, y)
    momentum = momentum + 0.5 * step_size * params_grad(params, model, x, y)
    return params.detach(), momentum.detach()


def hamiltonian(params, momentum, model, x, y):
    with torch.no_grad():
        potential = -log_prob_func(params, model, x, y)
    kinetic = 0.5 * torch.dot(momentum, momentum)
    return potential + kinetic


rng = np.random.RandomState(0)
X_np = rng.randn(40, 2).astype(np.float32)
y_np = ((X_np[:, 0] * X_np[:, 1] + 0.3 * rng.randn(40)) > 0).astype(np.float32)
x, y = torch.from_numpy(X_np), torch.from_numpy(y_np)

torch.manual_seed(0)
model = Net()
params = flatten(model).detach()
print("parameters", params.numel(), "log prob", round(log_prob_func(params, model, x, y).item(), 5))
momentum_dist = torch.distributions.Normal(torch.zeros_like(params), torch.ones_like(params))

samples, accepted = [params], 0
for n in range(30):
    momentum = momentum_dist.sample()
    H_old = hamiltonian(params, momentum, model, x, y)
    new_params, new_momentum = leapfrog(params, momentum, model, x, y)
    H_new = hamiltonian(new_params, new_momentum, model, x, y)
    rho = min(0., (H_old - H_new).item())
    if rho >= torch.log(torch.rand(1)).item():
        params = new_params
        accepted += 1
    samples.append(params)
    if n % 10 == 0 or n == 29:
        print(f"sample {n}: H_old {H_old.item():.4f} H_new {H_new.item():.4f} "
              f"log prob {log_prob_func(params, model, x, y).item():.4f}")
print("acceptance rate", accepted / 30)

with torch.no_grad():
    probs = torch.stack([torch.sigmoid(functional_call(model, unflatten(model, s), (x,)))
                         for s in samples[10:]])
pred = probs.mean(0)
print("posterior predictive accuracy", ((pred > 0.5).float() == y).float().mean().item(),
      "mean entropy", round((-(pred * pred.log() + (1 - pred) * (1 - pred).log())).mean().item(), 5))

momentum = momentum_dist.sample()
p_c, m_c = torch.compile(leapfrog)(params, momentum, model, x, y)
p_e, m_e = leapfrog(params, momentum, model, x, y)
print("compiled trajectory end", [round(v, 4) for v in p_c[:4].tolist()])
print("compiled == eager", torch.allclose(p_c, p_e, atol=1e-5), torch.allclose(m_c, m_e, atol=1e-4))
