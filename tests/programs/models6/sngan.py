# christiancosgrove/pytorch-spectral-normalization-gan (model.py's DCGAN-like
# Generator and the spectrally normalized Discriminator; main.py's training
# with the hinge, wasserstein and BCE losses, disc_iters, Adam betas
# (0.0, 0.9) over filter(lambda p: p.requires_grad, ...), ExponentialLR).
# Changes for a CPU test: the repo's own SpectralNorm wrapper is PyTorch's
# (torch.nn.utils.spectral_norm on the convolutions,
# torch.nn.utils.parametrizations.spectral_norm on the final Linear, as the
# README now suggests), Variable(...).cuda() is a plain tensor, the sizes are
# tiny (16x16 images, 8-channel widths, Z_dim 8), CIFAR10 is numpy data, z is
# drawn from numpy instead of torch.randn, loss.data[0] is loss.item(), and
# the weights and the power-iteration vectors u, v come from numpy, so
# tracec and torch compute the same numbers.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.utils import spectral_norm as SpectralNorm
from torch.nn.utils.parametrizations import spectral_norm

channels = 3
leak = 0.1
w_g = 2            # 4


class Generator(nn.Module):
    def __init__(self, z_dim):
        super(Generator, self).__init__()
        self.z_dim = z_dim

        self.model = nn.Sequential(
            nn.ConvTranspose2d(z_dim, 32, 4, stride=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=(1,1)),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=(1,1)),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.ConvTranspose2d(8, channels, 3, stride=1, padding=(1,1)),
            nn.Tanh())

    def forward(self, z):
        return self.model(z.view(-1, self.z_dim, 1, 1))


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        self.conv1 = SpectralNorm(nn.Conv2d(channels, 8, 3, stride=1, padding=(1,1)))

        self.conv2 = SpectralNorm(nn.Conv2d(8, 8, 4, stride=2, padding=(1,1)))
        self.conv3 = SpectralNorm(nn.Conv2d(8, 16, 3, stride=1, padding=(1,1)))
        self.conv4 = SpectralNorm(nn.Conv2d(16, 16, 4, stride=2, padding=(1,1)))
        self.conv5 = SpectralNorm(nn.Conv2d(16, 32, 3, stride=1, padding=(1,1)))
        self.conv6 = SpectralNorm(nn.Conv2d(32, 32, 4, stride=2, padding=(1,1)))
        self.conv7 = SpectralNorm(nn.Conv2d(32, 64, 3, stride=1, padding=(1,1)))

        self.fc = spectral_norm(nn.Linear(w_g * w_g * 64, 1))

    def forward(self, x):
        m = x
        m = nn.LeakyReLU(leak)(self.conv1(m))
        m = nn.LeakyReLU(leak)(self.conv2(m))
        m = nn.LeakyReLU(leak)(self.conv3(m))
        m = nn.LeakyReLU(leak)(self.conv4(m))
        m = nn.LeakyReLU(leak)(self.conv5(m))
        m = nn.LeakyReLU(leak)(self.conv6(m))
        m = nn.LeakyReLU(leak)(self.conv7(m))

        return self.fc(m.view(-1,w_g * w_g * 64))


class Args:
    batch_size = 4       # 64
    lr = 2e-4
    loss = 'hinge'


Z_dim = 8                # 128
disc_iters = 2           # 5
g = np.random.default_rng(0)
data_all = torch.from_numpy(np.tanh(g.standard_normal((8, 3, 16, 16))).astype(np.float32))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data_all, torch.zeros(8, dtype=torch.long)),
                                     batch_size=4, shuffle=False, drop_last=False)


def randn(*shape):
    return torch.from_numpy(g.standard_normal(shape).astype(np.float32))


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in list(module.named_parameters()) + list(module.named_buffers()):
            if p.dtype != torch.float32 or "running" in name:
                continue
            if name.endswith("_u") or name.endswith("_v"):
                p.copy_(F.normalize(torch.from_numpy(r.standard_normal(tuple(p.shape)).astype(np.float32)), dim=0))
                continue
            std = 0.1 if p.dim() == 1 else p[0].numel() ** -0.5
            p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))


def run(loss_name, epochs=1):
    args = Args()
    args.loss = loss_name
    discriminator = Discriminator()
    generator = Generator(Z_dim)
    numpy_init(discriminator, 1)
    numpy_init(generator, 2)
    print(loss_name, sorted(n for n, _ in discriminator.conv1.named_parameters()),
          sorted(n for n, _ in discriminator.conv1.named_buffers()),
          sorted(n for n, _ in discriminator.fc.named_parameters()))

    # because the spectral normalization module creates parameters that don't require gradients (u and v), we don't want to
    # optimize these using sgd. We only let the optimizer operate on parameters that _do_ require gradients
    # TODO: replace Parameters with buffers, which aren't returned from .parameters() method.
    optim_disc = optim.Adam(filter(lambda p: p.requires_grad, discriminator.parameters()), lr=args.lr, betas=(0.0,0.9))
    optim_gen  = optim.Adam(generator.parameters(), lr=args.lr, betas=(0.0,0.9))

    # use an exponentially decaying learning rate
    scheduler_d = optim.lr_scheduler.ExponentialLR(optim_disc, gamma=0.99)
    scheduler_g = optim.lr_scheduler.ExponentialLR(optim_gen, gamma=0.99)

    def train(epoch):
        for batch_idx, (data, target) in enumerate(loader):
            if data.size()[0] != args.batch_size:
                continue
            data, target = data, target

            # update discriminator
            for _ in range(disc_iters):
                z = randn(args.batch_size, Z_dim)
                optim_disc.zero_grad()
                optim_gen.zero_grad()
                if args.loss == 'hinge':
                    disc_loss = nn.ReLU()(1.0 - discriminator(data)).mean() + nn.ReLU()(1.0 + discriminator(generator(z))).mean()
                elif args.loss == 'wasserstein':
                    disc_loss = -discriminator(data).mean() + discriminator(generator(z)).mean()
                else:
                    disc_loss = nn.BCEWithLogitsLoss()(discriminator(data), torch.ones(args.batch_size, 1)) + \
                        nn.BCEWithLogitsLoss()(discriminator(generator(z)), torch.zeros(args.batch_size, 1))
                disc_loss.backward()
                optim_disc.step()

            z = randn(args.batch_size, Z_dim)

            # update generator
            optim_disc.zero_grad()
            optim_gen.zero_grad()
            if args.loss == 'hinge' or args.loss == 'wasserstein':
                gen_loss = -discriminator(generator(z)).mean()
            else:
                gen_loss = nn.BCEWithLogitsLoss()(discriminator(generator(z)), torch.ones(args.batch_size, 1))
            gen_loss.backward()
            optim_gen.step()

            if batch_idx % 2 == 0:
                print('disc loss', f"{disc_loss.item():.6f}", 'gen loss', f"{gen_loss.item():.6f}")
        scheduler_d.step()
        scheduler_g.step()

    for epoch in range(epochs):
        train(epoch)
    w = discriminator.conv2.weight_orig.detach().reshape(8, -1)
    sigma = discriminator.conv2.weight_u @ w @ discriminator.conv2.weight_v
    print("lr", f"{scheduler_d.get_last_lr()[0]:.8f}", "sigma", f"{sigma.item():.5f}",
          "fc sigma", f"{torch.linalg.matrix_norm(discriminator.fc.weight.detach(), 2).item():.5f}")
    return discriminator, generator, optim_disc


D, G, optim_disc = run("hinge", epochs=2)
run("wasserstein")
run("bce")

# eval mode: no power iteration, the same normalized weight on each call
D.eval()
with torch.no_grad():
    a = D(data_all[:4])
    b = D(data_all[:4])
print("eval", torch.equal(a, b), f"{a.sum().item():.5f}")
sd = D.state_dict()
print("state", sorted(k for k in sd if k.startswith("conv1") or k.startswith("fc")))
D2 = Discriminator()
D2.load_state_dict(sd)
D2.eval()
with torch.no_grad():
    print("reloaded", torch.allclose(D2(data_all[:4]), a, atol=1e-6))
D.train()

# (no torch.compile check here: the cold native build of the eight
# spectrally normalized layers' step takes longer than this test may;
# tests/test_models6_gaps.py compiles spectral_norm's step against torch)
