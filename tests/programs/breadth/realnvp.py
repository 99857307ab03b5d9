# A RealNVP normalizing flow on 2-D "two moons"-like data, as in the common
# PyTorch flow tutorials: affine coupling layers with masks, log-det of the
# Jacobian, MultivariateNormal prior, sampling by inverting the flow.
import numpy as np
import torch
from torch import nn
from torch import distributions

torch.manual_seed(0)
np.random.seed(0)

class RealNVP(nn.Module):
    def __init__(self, nets, nett, mask, prior):
        super(RealNVP, self).__init__()
        self.prior = prior
        self.mask = nn.Parameter(mask, requires_grad=False)
        self.t = torch.nn.ModuleList([nett() for _ in range(len(mask))])
        self.s = torch.nn.ModuleList([nets() for _ in range(len(mask))])

    def g(self, z):
        x = z
        for i in range(len(self.t)):
            x_ = x*self.mask[i]
            s = self.s[i](x_)*(1 - self.mask[i])
            t = self.t[i](x_)*(1 - self.mask[i])
            x = x_ + (1 - self.mask[i]) * (x * torch.exp(s) + t)
        return x

    def f(self, x):
        log_det_J, z = x.new_zeros(x.shape[0]), x
        for i in reversed(range(len(self.t))):
            z_ = self.mask[i] * z
            s = self.s[i](z_) * (1-self.mask[i])
            t = self.t[i](z_) * (1-self.mask[i])
            z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
            log_det_J -= s.sum(dim=1)
        return z, log_det_J

    def log_prob(self,x):
        z, logp = self.f(x)
        return self.prior.log_prob(z) + logp

    def sample(self, batchSize):
        z = self.prior.sample((batchSize, 1))
        logp = self.prior.log_prob(z)
        x = self.g(z)
        return x

nets = lambda: nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 2), nn.Tanh())
nett = lambda: nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 2))
masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 3).astype(np.float32))
prior = distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))
flow = RealNVP(nets, nett, masks, prior)

def make_moons(n, noise):
    t = np.random.rand(n) * np.pi
    outer = np.stack([np.cos(t), np.sin(t)], 1)
    inner = np.stack([1 - np.cos(t), 1 - np.sin(t) - .5], 1)
    x = np.where((np.arange(n) % 2 == 0)[:, None], outer, inner)
    return x + noise * np.random.randn(n, 2), None

optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad==True], lr=1e-4)
for t in range(60):
    noisy_moons = make_moons(n_samples=100, noise=.05)[0].astype(np.float32) if False else make_moons(100, .05)[0].astype(np.float32)
    loss = -flow.log_prob(torch.from_numpy(noisy_moons)).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    if t % 20 == 0:
        print('iter %s:' % t, 'loss = %.3f' % loss)

noisy_moons = make_moons(100, .05)[0].astype(np.float32)
z = flow.f(torch.from_numpy(noisy_moons))[0].detach().numpy()
print(z.shape)
x = flow.sample(50).detach().numpy()
print(x.shape)
x = torch.from_numpy(noisy_moons)
z, logdet = flow.f(x)
print('round trip error < 1e-4:', (flow.g(z) - x).abs().max().item() < 1e-4)
# distributions used alongside flows
base = distributions.Normal(torch.zeros(2), torch.ones(2))
ind = distributions.Independent(base, 1)
print(ind.log_prob(z).shape, ind.batch_shape, ind.event_shape)
print(prior.entropy().item(), prior.mean, prior.covariance_matrix)
print(torch.allclose(prior.log_prob(z), ind.log_prob(z), atol=1e-5))
