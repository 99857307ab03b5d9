# RealNVP on the 2-D moons the way senya-ashukha/real-nvp-pytorch's
# real-nvp-pytorch.ipynb writes it: alternating masks kept as
# nn.Parameter(mask, requires_grad=False) and indexed per coupling layer,
# ModuleLists of s-nets (ending in Tanh) and t-nets built from lambdas,
# the inverse f accumulating log_det_J from x.new_zeros with -=, the
# forward g, log_prob through a MultivariateNormal(torch.zeros(2),
# torch.eye(2)) prior, sampling prior.sample((batchSize, 1)) through g
# (a (B, 1, 2) batch), Adam over [p for p in flow.parameters() if
# p.requires_grad==True], loss.backward(retain_graph=True) and
# 'loss = %.3f' % loss on a tensor. Changes for a CPU test: 32-unit nets,
# the moons made with numpy as sklearn.datasets.make_moons makes them,
# weights from numpy, a few iterations; the sampled points are checked
# through f(g(z)) == z (the draws themselves are [rng]); then one training
# step under torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
from torch import nn
from torch import distributions
from torch.nn.parameter import Parameter


class RealNVP(nn.Module):
    def __init__(self, nets, nett, mask, prior):
        super(RealNVP, self).__init__()

        self.prior = prior
        self.mask = nn.Parameter(mask, requires_grad=False)
        self.t = torch.nn.ModuleList([nett() for _ in range(len(masks))])
        self.s = torch.nn.ModuleList([nets() for _ in range(len(masks))])

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


r = np.random.default_rng(0)


def make_moons(n_samples=100, noise=None):
    # sklearn.datasets.make_moons, with the numpy generator above
    n_samples_out = n_samples // 2
    n_samples_in = n_samples - n_samples_out
    outer_circ_x = np.cos(np.linspace(0, np.pi, n_samples_out))
    outer_circ_y = np.sin(np.linspace(0, np.pi, n_samples_out))
    inner_circ_x = 1 - np.cos(np.linspace(0, np.pi, n_samples_in))
    inner_circ_y = 1 - np.sin(np.linspace(0, np.pi, n_samples_in)) - .5
    X = np.vstack([np.append(outer_circ_x, inner_circ_x),
                   np.append(outer_circ_y, inner_circ_y)]).T
    y = np.hstack([np.zeros(n_samples_out, dtype=np.intp), np.ones(n_samples_in, dtype=np.intp)])
    idx = r.permutation(n_samples)
    X, y = X[idx], y[idx]
    if noise is not None:
        X += r.normal(scale=noise, size=X.shape)
    return X, y


H = 32
nets = lambda: nn.Sequential(nn.Linear(2, H), nn.LeakyReLU(), nn.Linear(H, H), nn.LeakyReLU(), nn.Linear(H, 2), nn.Tanh())
nett = lambda: nn.Sequential(nn.Linear(2, H), nn.LeakyReLU(), nn.Linear(H, H), nn.LeakyReLU(), nn.Linear(H, 2))
masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 3).astype(np.float32))
prior = distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))
flow = RealNVP(nets, nett, masks, prior)
with torch.no_grad():
    for name, p in flow.named_parameters():
        if p.requires_grad:
            p.copy_(torch.from_numpy(r.normal(0, 0.2, tuple(p.shape)).astype(np.float32)))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


print("mask", type(flow.mask).__name__, flow.mask.requires_grad, flow.mask[1].tolist(),
      "params", sum(p.numel() for p in flow.parameters()), sum(p.numel() for p in flow.parameters() if p.requires_grad),
      list(flow.state_dict())[:3])
print("prior", prior.batch_shape, prior.event_shape, fmt(prior.covariance_matrix, 4),
      f"{prior.log_prob(torch.tensor([0.5, -1.0])).item():.5f}", f"{prior.entropy().item():.5f}")

optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad==True], lr=1e-3)
for t in range(31):
    noisy_moons = make_moons(n_samples=64, noise=.05)[0].astype(np.float32)
    loss = -flow.log_prob(torch.from_numpy(noisy_moons)).mean()

    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()

    if t % 10 == 0:
        print('iter %s:' % t, 'loss = %.3f' % loss)

print("mask grad", flow.mask.grad, "s0 grad", fmt(flow.s[0][0].weight.grad, 3), "t2", fmt(flow.t[2][4].bias, 2))

x_data = torch.from_numpy(noisy_moons)
z, logdet = flow.f(x_data)
z = z.detach().numpy()
print("f(x)", z.shape, [f"{v:.4f}" for v in z[:2].reshape(-1)], fmt(logdet, 3), logdet.requires_grad)
x_back = flow.g(torch.from_numpy(z))
print("g(f(x)) == x", torch.allclose(x_back, x_data, atol=1e-5))

# the log-determinant against the Jacobian by autograd, for one point
xp = x_data[:1].clone().requires_grad_(True)
zp, ld = flow.f(xp)
J = torch.stack([torch.autograd.grad(zp[0, k], xp, retain_graph=True)[0][0] for k in range(2)])
print("log|det J|", f"{ld.item():.5f}", f"{torch.logdet(J).item():.5f}", f"{torch.linalg.slogdet(J)[1].item():.5f}")

torch.manual_seed(0)
x = flow.sample(200)
zs, _ = flow.f(x.view(-1, 2))
print("samples", tuple(x.shape), "[rng]", fmt(x, 4))
print("g(f(x)) == x", torch.allclose(flow.g(zs).view(-1, 1, 2), x, atol=1e-4),
      x.detach().numpy().shape, x.requires_grad)
with torch.no_grad():
    z0 = torch.from_numpy(r.standard_normal((5, 1, 2)).astype(np.float32))
    print("g(z)", fmt(flow.g(z0), 6), f"{flow.log_prob(flow.g(z0).squeeze(1)).mean().item():.4f}",
          fmt(prior.log_prob(z0), 3), tuple(prior.log_prob(z0).shape))

# the model copied with its frozen mask (as a checkpoint round trip does)
clone = copy.deepcopy(flow)
clone.load_state_dict(flow.state_dict())
print("clone", clone.mask.requires_grad, isinstance(clone.mask, Parameter),
      torch.equal(clone.log_prob(x_data), flow.log_prob(x_data)))


# one training step under torch.compile against the same step eagerly
def train_step(x):
    loss = -flow.log_prob(x).mean()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    return loss


xs = torch.from_numpy(make_moons(n_samples=64, noise=.05)[0].astype(np.float32))
state, opt_state = copy.deepcopy(flow.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xs).item() for _ in range(2)]
after = {k: v.clone() for k, v in flow.state_dict().items()}
flow.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xs).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(flow.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
