# 1Konny/Beta-VAE: model.py (BetaVAE_H: conv encoder to 2*z_dim, View,
# ConvTranspose2d decoder, kaiming_init with the deprecated
# init.kaiming_normal, reparametrize through Tensor.data.new().normal_()) and
# solver.py's losses (reconstruction_loss with the legacy size_average=False,
# kl_divergence's total / dimension-wise / mean KLD, the 'H' and 'B'
# objectives with the capacity C clamped by C_max.data[0]); then the same
# ELBO with torch.distributions (Normal, Independent, Bernoulli,
# kl_divergence, rsample) as a conditional VAE.  Torch is seeded with
# manual_seed(0) for the sampled lines; the other numbers use z = mu (and
# the rsample gradient that does not depend on the draw).  Weights and data
# come from numpy.
import copy
import warnings

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
from torch.autograd import Variable
from torch import distributions as D

warnings.simplefilter("ignore")


def reparametrize(mu, logvar):
    std = logvar.div(2).exp()
    eps = Variable(std.data.new(std.size()).normal_())
    return mu + std*eps


class View(nn.Module):
    def __init__(self, size):
        super(View, self).__init__()
        self.size = size

    def forward(self, tensor):
        return tensor.view(self.size)


class BetaVAE_H(nn.Module):
    """Model proposed in original beta-VAE paper(Higgins et al, ICLR, 2017)."""

    def __init__(self, z_dim=10, nc=3):
        super(BetaVAE_H, self).__init__()
        self.z_dim = z_dim
        self.nc = nc
        self.encoder = nn.Sequential(
            nn.Conv2d(nc, 32, 4, 2, 1),          # B,  32, 32, 32
            nn.ReLU(True),
            nn.Conv2d(32, 32, 4, 2, 1),          # B,  32, 16, 16
            nn.ReLU(True),
            nn.Conv2d(32, 64, 4, 2, 1),          # B,  64,  8,  8
            nn.ReLU(True),
            nn.Conv2d(64, 64, 4, 2, 1),          # B,  64,  4,  4
            nn.ReLU(True),
            nn.Conv2d(64, 256, 4, 1),            # B, 256,  1,  1
            nn.ReLU(True),
            View((-1, 256*1*1)),                 # B, 256
            nn.Linear(256, z_dim*2),             # B, z_dim*2
        )
        self.decoder = nn.Sequential(
            nn.Linear(z_dim, 256),               # B, 256
            View((-1, 256, 1, 1)),               # B, 256,  1,  1
            nn.ReLU(True),
            nn.ConvTranspose2d(256, 64, 4),      # B,  64,  4,  4
            nn.ReLU(True),
            nn.ConvTranspose2d(64, 64, 4, 2, 1), # B,  64,  8,  8
            nn.ReLU(True),
            nn.ConvTranspose2d(64, 32, 4, 2, 1), # B,  32, 16, 16
            nn.ReLU(True),
            nn.ConvTranspose2d(32, 32, 4, 2, 1), # B,  32, 32, 32
            nn.ReLU(True),
            nn.ConvTranspose2d(32, nc, 4, 2, 1),  # B, nc, 64, 64
        )

        self.weight_init()

    def weight_init(self):
        for block in self._modules:
            for m in self._modules[block]:
                kaiming_init(m)

    def forward(self, x):
        distributions = self._encode(x)
        mu = distributions[:, :self.z_dim]
        logvar = distributions[:, self.z_dim:]
        z = reparametrize(mu, logvar)
        x_recon = self._decode(z)

        return x_recon, mu, logvar

    def _encode(self, x):
        return self.encoder(x)

    def _decode(self, z):
        return self.decoder(z)


def kaiming_init(m):
    if isinstance(m, (nn.Linear, nn.Conv2d)):
        init.kaiming_normal(m.weight)
        if m.bias is not None:
            m.bias.data.fill_(0)
    elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
        m.weight.data.fill_(1)
        if m.bias is not None:
            m.bias.data.fill_(0)


def reconstruction_loss(x, x_recon, distribution):
    batch_size = x.size(0)
    assert batch_size != 0

    if distribution == 'bernoulli':
        recon_loss = F.binary_cross_entropy_with_logits(x_recon, x, size_average=False).div(batch_size)
    elif distribution == 'gaussian':
        x_recon = F.sigmoid(x_recon)
        recon_loss = F.mse_loss(x_recon, x, size_average=False).div(batch_size)
    else:
        recon_loss = None

    return recon_loss


def kl_divergence(mu, logvar):
    batch_size = mu.size(0)
    assert batch_size != 0
    if mu.data.ndimension() == 4:
        mu = mu.view(mu.size(0), mu.size(1))
    if logvar.data.ndimension() == 4:
        logvar = logvar.view(logvar.size(0), logvar.size(1))

    klds = -0.5*(1 + logvar - mu.pow(2) - logvar.exp())
    total_kld = klds.sum(1).mean(0, True)
    dimension_wise_kld = klds.mean(0)
    mean_kld = klds.mean(1).mean(0, True)

    return total_kld, dimension_wise_kld, mean_kld


def numpy_init(model, seed, scale=1.0):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.from_numpy((0.05 * g.standard_normal(p.shape)).astype(np.float32)))
            else:
                fan_in = p.shape[1] * p[0, 0].numel() if "decoder" not in name or p.dim() == 2 \
                    else p.shape[0] * p[0, 0].numel() / 4
                std = scale * (2.0 / fan_in) ** 0.5
                p.copy_(torch.from_numpy((std * g.standard_normal(p.shape)).astype(np.float32)))
    return model


rng = np.random.default_rng(0)
x = torch.from_numpy((rng.random((4, 1, 64, 64)) < 0.3).astype(np.float32))

net = BetaVAE_H(z_dim=6, nc=1)
print("init biases zero:", all(bool((m.bias == 0).all()) for m in net.encoder if isinstance(m, nn.Conv2d)))
numpy_init(net, 1)

x_recon, mu, logvar = net(x)
print("x_recon", tuple(x_recon.shape), f"{x_recon.mean().item():.4f}")
print("mu", [f"{v:.5f}" for v in mu[0].tolist()])
print("logvar", [f"{v:.5f}" for v in logvar[0].tolist()])

# deterministic ELBO: decode the mean
recon_mu = net._decode(mu)
recon_loss = reconstruction_loss(x, recon_mu, 'bernoulli')
total_kld, dim_wise_kld, mean_kld = kl_divergence(mu, logvar)
print(f"recon {recon_loss.item():.5f} total_kld {total_kld.item():.5f} mean_kld {mean_kld.item():.5f}",
      tuple(total_kld.shape), [f"{v:.5f}" for v in dim_wise_kld.tolist()])
print(f"gaussian recon {reconstruction_loss(x, recon_mu, 'gaussian').item():.5f}")
beta = 4
beta_vae_loss = recon_loss + beta*total_kld
beta_vae_loss.backward()
print(f"beta_vae_loss {beta_vae_loss.item():.5f}")
for name, p in net.named_parameters():
    print(f"grad {name} {p.grad.norm().item():.5e}")

# solver.py's 'B' objective: the capacity C grows to C_max
C_max = Variable(torch.FloatTensor([25]))
C_stop_iter, gamma = 10, 100
optim = torch.optim.Adam(net.parameters(), lr=1e-4, betas=(0.9, 0.999))
for global_iter in range(1, 4):
    x_recon, mu, logvar = net(x)
    recon_loss = reconstruction_loss(x, net._decode(mu), 'bernoulli')
    total_kld, dim_wise_kld, mean_kld = kl_divergence(mu, logvar)
    C = torch.clamp(C_max/C_stop_iter*global_iter, 0, C_max.data[0])
    beta_vae_loss = recon_loss + gamma*(total_kld-C).abs()
    optim.zero_grad()
    beta_vae_loss.backward()
    optim.step()
    print('[{}] recon_loss:{:.3f} total_kld:{:.3f} mean_kld:{:.3f} C:{:.1f}'.format(
        global_iter, recon_loss.item(), total_kld.item(), mean_kld.item(), C.item()))
    print("sampled recon", f"{reconstruction_loss(x, x_recon, 'bernoulli').item():.3f}")


# --- the same ELBO with torch.distributions: a conditional VAE --------------
class CVAE(nn.Module):
    def __init__(self, x_dim, c_dim, h_dim, z_dim):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(x_dim + c_dim, h_dim), nn.ReLU())
        self.loc = nn.Linear(h_dim, z_dim)
        self.scale = nn.Linear(h_dim, z_dim)
        self.dec = nn.Sequential(nn.Linear(z_dim + c_dim, h_dim), nn.ReLU(), nn.Linear(h_dim, x_dim))

    def encode(self, x, c):
        h = self.enc(torch.cat([x, c], dim=1))
        return D.Independent(D.Normal(self.loc(h), F.softplus(self.scale(h)) + 1e-4), 1)

    def decode(self, z, c):
        return D.Independent(D.Bernoulli(logits=self.dec(torch.cat([z, c], dim=-1))), 1)

    def forward(self, x, c, sample=True):
        q = self.encode(x, c)
        z = q.rsample() if sample else q.mean
        p = self.decode(z, c)
        prior = D.Independent(D.Normal(torch.zeros_like(q.mean), torch.ones_like(q.stddev)), 1)
        kl = D.kl_divergence(q, prior)
        return -(p.log_prob(x) - kl).mean(), kl


xf = x.view(4, -1)[:, :32]
c = F.one_hot(torch.tensor([0, 1, 2, 1]), num_classes=3).float()
cvae = numpy_init(CVAE(32, 3, 16, 4), 2, scale=0.7)
q = cvae.encode(xf, c)
print("q", q.batch_shape, q.event_shape, [f"{v:.5f}" for v in q.mean[0].tolist()],
      [f"{v:.5f}" for v in q.stddev[0].tolist()])
print("entropy", [f"{v:.5f}" for v in q.entropy().tolist()])
loss, kl = cvae(xf, c, sample=False)
mu, sd = q.base_dist.loc, q.base_dist.scale
closed = (-0.5 * (1 + 2 * sd.log() - mu.pow(2) - sd.pow(2))).sum(1)
print(f"elbo at the mean {loss.item():.5f}", "kl matches closed form:", torch.allclose(kl, closed, atol=1e-5))
recon = cvae.decode(q.mean, c)
print("bernoulli log_prob = -bce:", torch.allclose(
    recon.log_prob(xf), -F.binary_cross_entropy_with_logits(recon.base_dist.logits, xf, reduction='none').sum(1),
    atol=1e-4))
loss.backward()
for name, p in cvae.named_parameters():
    print(f"grad {name} {p.grad.norm().item():.5e}")

# rsample is differentiable: d(sum z)/d(loc) is one whatever the draw
loc = torch.zeros(3, requires_grad=True)
scale = torch.ones(3, requires_grad=True)
z = D.Normal(loc, scale).rsample((5,))
z.sum().backward()
print("rsample", tuple(z.shape), loc.grad.tolist(), "scale grad is the draws' sum:",
      torch.allclose(scale.grad, z.detach().sum(0), atol=1e-5))
print("z", f"{z.sum().item():.4f}")
print("sample detached:", not D.Normal(loc, scale).sample().requires_grad)

opt = torch.optim.Adam(cvae.parameters(), lr=1e-2)


def train_step(x, c):
    opt.zero_grad()
    loss, _ = cvae(x, c, sample=False)
    loss.backward()
    opt.step()
    return loss


for s in range(3):
    print(f"cvae step {s} loss {train_step(xf, c).item():.5f}")
state, opt_state = copy.deepcopy(cvae.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(xf, c).item() for _ in range(2)]
after = copy.deepcopy(cvae.state_dict())
cvae.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xf, c).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(cvae.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
cvae.train()
sampled, _ = cvae(xf, c)
print("sampled elbo", f"{sampled.item():.4f}")
